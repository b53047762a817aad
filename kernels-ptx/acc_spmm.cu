// Placeholder: the Acc-SpMM BitTCF kernel is being written (issue 7).
extern "C" __global__ void acc_spmm_placeholder() {}
