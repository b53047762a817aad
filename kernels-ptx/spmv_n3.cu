// The SpMV walks for 3 right-hand sides: spmv_n3.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 3
#include "spmv.cu"
