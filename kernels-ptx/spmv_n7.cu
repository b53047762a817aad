// The SpMV walks for 7 right-hand sides: spmv_n7.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 7
#include "spmv.cu"
