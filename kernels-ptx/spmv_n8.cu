// The SpMV walks for 8 right-hand sides: spmv_n8.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 8
#include "spmv.cu"
