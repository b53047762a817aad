// CSR SpMM on CUDA cores, f32: C = alpha * A * B + beta * C.
// A: m x k CSR (u32 indptr[m+1], u32 indices[nnz], f32 values[nnz]); B: k x n row-major with leading
// dimension ldb; C: m x n row-major with ldc. beta == 0 never reads C (BLAS semantics: NaN in C does
// not propagate).
//
// Work (built on the host, crates/gpu/src/spmm/csr.rs `csr_work`): warp item i is
// work[4i .. 4i+4] = {row_begin, row_end, nnz_begin, nnz_end}: the rows [row_begin, row_end), of
// their nonzeros only those in [nnz_begin, nnz_end). Items either pack whole consecutive rows (up to
// a nonzero budget, empty rows included) or hold one chunk of a row longer than the budget. A row
// whose nonzeros the item does not hold entirely is "split": it was pre-scaled by beta (the host
// runs acc_spmm_prescale of acc_spmm.cu on one-row groups, same stream, just before) and every
// chunk adds alpha * its partial sum with atomics; every other row is written once with
// alpha * acc + beta * C. So thread blocks stay
// balanced on rows of any length (R-MAT hubs: 30k nonzeros), and the product needs no separate
// beta pass over all of C (cuSPARSE's csrmm runs one).
//
// Launch: blockDim = (32, WARPS); warp item = blockIdx.x * WARPS + threadIdx.y (items beyond the
// count exit as a whole warp); gridDim.y = number of 128-feature slabs of C (<= 65535; the kernel
// strides over further slabs). Lane L owns features col0 + 4L .. col0 + 4L + 3 of the slab: one
// float4 per gathered B row when flags bit 0 is set (ldb, ldc multiples of 4) and all four are < n.
// The warp loads 32 (column, value) pairs at once and broadcasts them with shuffles, then issues
// UNROLL B-row loads before their FMAs, so each warp keeps UNROLL 512-byte gathers in flight.

#define FULL_MASK 0xffffffffu
#define COLS_PER_WARP 128
#ifndef UNROLL
#define UNROLL 4
#endif

// Types and the guarded load of four features (load4_below).
#include "tc_common.cuh"

// Features col .. col + 3 of B row k (zeros beyond n).
__device__ __forceinline__ float4 load_b4(const float* __restrict__ b, u64 ldb, u32 k, u64 col,
                                          u32 n, bool vec) {
    const float* p = b + (u64)k * ldb + col;
    if (vec) return __ldg(reinterpret_cast<const float4*>(p));
    return load4_below(p, col, n);
}

__device__ __forceinline__ void fma4(float4& acc, float a, const float4& b) {
    acc.x = fmaf(a, b.x, acc.x);
    acc.y = fmaf(a, b.y, acc.y);
    acc.z = fmaf(a, b.z, acc.z);
    acc.w = fmaf(a, b.w, acc.w);
}

__device__ __forceinline__ float axpby(float a, float c, float beta) {
    return beta == 0.0f ? a : fmaf(beta, c, a);
}

// Writes alpha * acc to features col .. col + 3 of C row `row`: stored with beta * C added, or, for
// a split row, added with atomics (C pre-scaled by beta).
__device__ __forceinline__ void write_c4(float* __restrict__ c, u64 ldc, u32 row, u64 col, u32 n,
                                         bool vec, bool split, float alpha, float beta, float4 acc) {
    float* p = c + (u64)row * ldc + col;
    const float v[4] = {alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w};
    if (split) {
        if (vec) {
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v[0]),
                         "f"(v[1]), "f"(v[2]), "f"(v[3])
                         : "memory");
            return;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (col + j < n) atomicAdd(p + j, v[j]);
        }
        return;
    }
    if (vec) {
        float4* q = reinterpret_cast<float4*>(p);
        if (beta == 0.0f) {
            *q = make_float4(v[0], v[1], v[2], v[3]);
        } else {
            const float4 old = *q;
            *q = make_float4(axpby(v[0], old.x, beta), axpby(v[1], old.y, beta),
                             axpby(v[2], old.z, beta), axpby(v[3], old.w, beta));
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (col + j < n) p[j] = beta == 0.0f ? v[j] : fmaf(beta, p[j], v[j]);
    }
}

#ifndef CSR_WARPS
#define CSR_WARPS 8
#endif
// 4 resident blocks of 256 threads: at most 64 registers, 32 warps per SM.
#ifndef CSR_MIN_BLOCKS
#define CSR_MIN_BLOCKS 4
#endif

extern "C" __global__ void __launch_bounds__(32 * CSR_WARPS, CSR_MIN_BLOCKS)
    csr_spmm_f32(const u32* __restrict__ indptr, const u32* __restrict__ indices,
                 const float* __restrict__ values, const u32* __restrict__ work, u32 num_items,
                 const float* __restrict__ b, u32 ldb, float* __restrict__ c, u32 ldc, u32 n,
                 float alpha, float beta, u32 flags) {
    const u32 item = blockIdx.x * blockDim.y + threadIdx.y;
    if (item >= num_items) return;  // whole warp: item depends only on threadIdx.y
    const u32 lane = threadIdx.x;
    const u32 rb = __ldg(work + 4ull * item), re = __ldg(work + 4ull * item + 1);
    const u32 nb = __ldg(work + 4ull * item + 2), ne = __ldg(work + 4ull * item + 3);

    for (u64 slab = (u64)blockIdx.y * COLS_PER_WARP; slab < n;
         slab += (u64)gridDim.y * COLS_PER_WARP) {
        const u64 col = slab + 4 * lane;
        const bool active = col < n;  // lanes past n still shuffle, never load or store
        const bool vec = (flags & 1u) && col + 3 < n;
        u32 row_start = __ldg(indptr + rb);
        for (u32 row = rb; row < re; ++row) {
            const u32 row_end = __ldg(indptr + row + 1);
            const u32 s = max(row_start, nb), e = min(row_end, ne);
            const bool split = row_start < nb || row_end > ne;
            row_start = row_end;
            float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (u32 p = s; p < e; p += 32) {
                const u32 q = p + lane;
                u32 kc = 0;
                float kv = 0.0f;
                if (q < e) {
                    kc = __ldg(indices + q);
                    kv = __ldg(values + q);
                }
                const u32 cnt = min(32u, e - p);
                for (u32 i = 0; i < cnt; i += UNROLL) {
                    float4 bv[UNROLL];
                    float av[UNROLL];
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        // Shuffles stay warp-uniform; beyond cnt the pair is (0, 0.0) and unused.
                        const u32 k = __shfl_sync(FULL_MASK, kc, (i + u) & 31);
                        av[u] = __shfl_sync(FULL_MASK, kv, (i + u) & 31);
                        const bool ok = active && i + u < cnt;
                        bv[u] = ok ? load_b4(b, ldb, k, col, n, vec)
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    }
#pragma unroll
                    for (int u = 0; u < UNROLL; ++u) {
                        if (i + u < cnt) fma4(acc, av[u], bv[u]);
                    }
                }
            }
            if (active) write_c4(c, ldc, row, col, n, vec, split, alpha, beta, acc);
        }
    }
}
