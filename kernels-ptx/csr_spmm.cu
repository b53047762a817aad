// CSR SpMM on CUDA cores, f32: C = alpha * A * B + beta * C.
// A: m x k CSR (u32 indptr[m+1], u32 indices[nnz], f32 values[nnz]); B: k x n row-major; C: m x n row-major.
// beta == 0 never reads C (BLAS semantics: NaN in C does not propagate).
//
// Launch: blockDim = (32, ROWS_PER_BLOCK); one warp per row of A; gridDim.x = ceil(m / ROWS_PER_BLOCK)
// (rows beyond m exit as a whole warp), gridDim.y = number of 128-column slabs of C (<= 65535; the kernel
// strides over further slabs). Each lane owns columns col0 + lane + 32*t, t = 0..3, of its row's slab.
// The warp loads 32 (column, value) pairs of the row at once and broadcasts them with shuffles.

#define FULL_MASK 0xffffffffu
#define COLS_PER_WARP 128

extern "C" __global__ void csr_spmm_f32(const unsigned int* __restrict__ indptr,
                                        const unsigned int* __restrict__ indices,
                                        const float* __restrict__ values,
                                        const float* __restrict__ b,
                                        float* __restrict__ c,
                                        unsigned int m,
                                        unsigned int n,
                                        float alpha,
                                        float beta) {
    const unsigned int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= m) {
        return;  // whole warp: row depends only on threadIdx.y
    }
    const unsigned int lane = threadIdx.x;
    const unsigned int start = indptr[row];
    const unsigned int end = indptr[row + 1];
    float* crow = c + (size_t)row * n;

    for (size_t col0 = (size_t)blockIdx.y * COLS_PER_WARP; col0 < n;
         col0 += (size_t)gridDim.y * COLS_PER_WARP) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (unsigned int p = start; p < end; p += 32) {
            const unsigned int q = p + lane;
            unsigned int kc = 0;
            float kv = 0.0f;
            if (q < end) {
                kc = __ldg(indices + q);
                kv = __ldg(values + q);
            }
            const unsigned int cnt = min(32u, end - p);
            for (unsigned int i = 0; i < cnt; ++i) {
                const unsigned int k = __shfl_sync(FULL_MASK, kc, i);
                const float v = __shfl_sync(FULL_MASK, kv, i);
                const float* brow = b + (size_t)k * n;
#pragma unroll
                for (int t = 0; t < 4; ++t) {
                    const size_t j = col0 + lane + 32 * t;
                    if (j < n) {
                        acc[t] = fmaf(v, __ldg(brow + j), acc[t]);
                    }
                }
            }
        }
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const size_t j = col0 + lane + 32 * t;
            if (j < n) {
                crow[j] = (beta == 0.0f) ? alpha * acc[t] : fmaf(beta, crow[j], alpha * acc[t]);
            }
        }
    }
}
