// The SpMV walks for 2 right-hand sides: spmv_n2.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 2
#include "spmv.cu"
