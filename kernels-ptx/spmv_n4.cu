// The SpMV walks for 4 right-hand sides: spmv_n4.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 4
#include "spmv.cu"
