// Sampled dense-dense product on a sparse pattern (SDDMM), the gradient of an SpMM with respect to
// the sparse matrix's values:
//   out[p] = alpha * sum_t left[rows[p]][t] * right[cols[p]][t]     for p < nnz, t < k
// (rows/cols: the stored positions in CSR order; left and right row-major with leading dimensions
// ldl and ldr, in elements). One warp per stored position, lanes stride over t, a shuffle
// reduction; warps grid-stride over positions. rows[p] and cols[p] are validated on the host
// (they come from a checked CSR, crates/gpu/src/sddmm.rs).

typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" __global__ void sddmm_f32(const u32* __restrict__ rows, const u32* __restrict__ cols,
                                     u32 nnz, const float* __restrict__ left, u32 ldl,
                                     const float* __restrict__ right, u32 ldr, u32 k, float alpha,
                                     float* __restrict__ out) {
    const u32 lane = threadIdx.x & 31u;
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 p = warp; p < nnz; p += warps) {
        // Warp-uniform p: every lane takes the loop and the shuffles below together.
        const float* l = left + (u64)rows[p] * ldl;
        const float* r = right + (u64)cols[p] * ldr;
        float acc = 0.0f;
        for (u32 t = lane; t < k; t += 32u) acc = fmaf(l[t], r[t], acc);
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) out[p] = alpha * acc;
    }
}
