// The SpMV walks for 5 right-hand sides: spmv_n5.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 5
#include "spmv.cu"
