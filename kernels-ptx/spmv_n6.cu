// The SpMV walks for 6 right-hand sides: spmv_n6.ptx (see SPMV_MODULE_N in spmv.cu).
#define SPMV_MODULE_N 6
#include "spmv.cu"
