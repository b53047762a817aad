// Window-staged CSR SpMM on CUDA cores, f32: C = alpha * A * B + beta * C.
// A in the window-staged CSR layout (crates/formats/src/staged.rs): consecutive rows cut into
// windows whose rows together read at most slot_cap distinct columns. Per window w: its rows
// window_rows[w] .. window_rows[w+1], its sorted unique columns unique_cols[unique_offsets[w] ..
// unique_offsets[w+1]]; per nonzero (CSR order, row offsets indptr) the column's slot in its
// window's list (u16) and the value. B: k x n row-major with leading dimension ldb; C: m x n
// row-major with ldc. beta == 0 never reads C (BLAS semantics: NaN in C does not propagate).
//
// Launch: one thread block per (window, slice of S columns of C): blockIdx.x = window,
// blockIdx.y = slice (the kernel strides over slices beyond gridDim.y), blockDim = (32, WARPS).
// Dynamic shared memory: (most unique columns of any window) * S floats.
//
// 1. Stage: the window's U unique B rows, S features each, into shared memory, slot-major
//    (stage[slot * S + f] = B[unique_cols[slot], col0 + f]). When flags bit 0 is set (B 16-byte
//    aligned, ldb a multiple of 4: every staged row segment starts 16-byte aligned) and the slice
//    is full (col0 + S <= n), each slot is one Hopper bulk copy (cp.async.bulk, S*4 bytes) whose
//    completion is counted on one mbarrier armed with the slice's U*S*4 bytes (expect_tx);
//    with flags bit 1 also set, the aligned full slice is staged in 16-byte cp.async
//    chunks instead (consecutive threads copy consecutive chunks of a segment, every copy in
//    flight before one wait); otherwise the block loads the segments with plain coalesced loads
//    (zeros beyond n).
// 2. Compute: a warp per row (the window's rows dealt round-robin to the warps). The warp loads
//    32 (slot, value) pairs at a time and broadcasts them with shuffles; lane l accumulates
//    feature l (S = 32) or features 2l, 2l+1 (S = 64, one float2) with f32 FMAs from shared
//    memory, into two partial sums (alternate nonzeros) added at the end. Every nonzero is
//    multiplied, so NaN and Inf in A or B propagate as IEEE.
// 3. Store: C = alpha * acc + beta * C, each element written once (no atomics).
//
// So each B row segment crosses L2 once per window instead of once per nonzero: the gather
// traffic falls by nnz / sum_w |U_w| (docs/kernels/staged-spmm.md).

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

#include "async_copy.cuh"

#define FULL_MASK 0xffffffffu
#ifndef STAGED_WARPS
#define STAGED_WARPS 8
#endif
// Registers for four resident blocks of 256 threads (64 per thread); the staged rows decide how
// many fit: two at the default caps (96 KB each), four at the light ones (32 KB).
#ifndef STAGED_MIN_BLOCKS
#define STAGED_MIN_BLOCKS 4
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

// One 16-byte asynchronous copy global -> shared (both addresses 16-byte aligned), L2 only.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src)
                 : "memory");
}

// Waits for every cp.async this thread issued.
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Orders this thread's earlier generic-proxy accesses of shared memory before later async-proxy
// ones (the bulk copies that overwrite a stage the warps have read).
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The accumulator of one lane: S / 32 features.
template <int S>
struct Acc;
template <>
struct Acc<32> {
    float x = 0.0f;
    __device__ __forceinline__ void fma(float a, const float* stage, u32 slot, u32 lane) {
        x = fmaf(a, stage[slot * 32 + lane], x);
    }
    __device__ __forceinline__ void add(const Acc<32>& o) { x += o.x; }
    __device__ __forceinline__ void store(float* c_row, u64 col0, u32 lane, u32 n, float alpha,
                                          float beta) const {
        const u64 col = col0 + lane;
        if (col < n) {
            float* p = c_row + col;
            *p = beta == 0.0f ? alpha * x : fmaf(beta, *p, alpha * x);
        }
    }
};
template <>
struct Acc<64> {
    float x = 0.0f, y = 0.0f;
    __device__ __forceinline__ void fma(float a, const float* stage, u32 slot, u32 lane) {
        const float2 v = reinterpret_cast<const float2*>(stage + slot * 64)[lane];
        x = fmaf(a, v.x, x);
        y = fmaf(a, v.y, y);
    }
    __device__ __forceinline__ void add(const Acc<64>& o) {
        x += o.x;
        y += o.y;
    }
    __device__ __forceinline__ void store(float* c_row, u64 col0, u32 lane, u32 n, float alpha,
                                          float beta) const {
        const u64 col = col0 + 2 * lane;
        const float v[2] = {alpha * x, alpha * y};
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            if (col + j < n) {
                float* p = c_row + col + j;
                *p = beta == 0.0f ? v[j] : fmaf(beta, *p, v[j]);
            }
        }
    }
};

template <int S>
__device__ __forceinline__ void staged_spmm(const u32* __restrict__ window_rows,
                                            const u32* __restrict__ unique_offsets,
                                            const u32* __restrict__ unique_cols,
                                            const u32* __restrict__ indptr,
                                            const u16* __restrict__ slots,
                                            const float* __restrict__ values, const float* b,
                                            u32 ldb, float* c, u32 ldc, u32 n, float alpha,
                                            float beta, u32 flags) {
    extern __shared__ __align__(128) float stage[];
    __shared__ __align__(8) u64 bar;
    const u32 w = blockIdx.x;
    const u32 lane = threadIdx.x, warp = threadIdx.y;
    const u32 tid = warp * 32 + lane, threads = 32 * blockDim.y;
    const u32 rb = __ldg(window_rows + w), re = __ldg(window_rows + w + 1);
    const u32 ub = __ldg(unique_offsets + w), u = __ldg(unique_offsets + w + 1) - ub;
    const u32* ucols = unique_cols + ub;
    const u32 slices = (n + S - 1) / S;
    if (tid == 0) {
        mbar_init(&bar, 1);
        mbar_init_fence();
    }
    __syncthreads();
    u32 phase = 0;
    for (u32 slice = blockIdx.y; slice < slices; slice += gridDim.y) {
        const u64 col0 = (u64)slice * S;
        const bool full = col0 + S <= n;
        // 1. Stage the window's unique B row segments.
        if (u > 0) {
            if ((flags & 3u) == 3u && full) {
                // 16-byte chunks, S / 4 per segment (a power of two).
                constexpr u32 CHUNKS = S / 4;
                for (u32 i = tid; i < u * CHUNKS; i += threads) {
                    const u32 s = i / CHUNKS, q = i % CHUNKS;
                    const float* src = b + (u64)__ldg(ucols + s) * ldb + col0 + 4 * q;
                    cp_async16(stage + (u64)s * S + 4 * q, src);
                }
                cp_async_wait_all();
                __syncthreads();
            } else if ((flags & 1u) && full) {
                if (tid == 0) mbar_arrive_expect_tx(&bar, u * S * 4u);
                fence_proxy_async_smem();
                for (u32 s = tid; s < u; s += threads) {
                    const float* src = b + (u64)__ldg(ucols + s) * ldb + col0;
                    bulk_g2s(stage + (u64)s * S, src, S * 4u, &bar);
                }
                mbar_wait(&bar, phase);
                phase ^= 1u;
            } else {
                for (u32 i = tid; i < u * S; i += threads) {
                    const u32 s = i / S, f = i % S;
                    const u64 col = col0 + f;
                    stage[i] = col < n ? b[(u64)__ldg(ucols + s) * ldb + col] : 0.0f;
                }
                __syncthreads();
            }
        }
        // 2. A warp per row, from shared memory.
        for (u32 row = rb + warp; row < re; row += blockDim.y) {
            const u32 s0 = __ldg(indptr + row), e = __ldg(indptr + row + 1);
            // Two partial sums (even and odd positions of each group of UNROLL nonzeros), so
            // consecutive FMAs of a lane do not wait on each other.
            Acc<S> acc, acc_odd;
            for (u32 p = s0; p < e; p += 32) {
                const u32 q = p + lane;
                u32 ks = 0;
                float kv = 0.0f;
                if (q < e) {
                    ks = __ldg(slots + q);
                    kv = __ldg(values + q);
                }
                const u32 cnt = min(32u, e - p);
                u32 i = 0;
                for (; i + UNROLL <= cnt; i += UNROLL) {
#pragma unroll
                    for (int j = 0; j < UNROLL; ++j) {
                        const u32 slot = __shfl_sync(FULL_MASK, ks, i + j);
                        const float a = __shfl_sync(FULL_MASK, kv, i + j);
                        if (j & 1) {
                            acc_odd.fma(a, stage, slot, lane);
                        } else {
                            acc.fma(a, stage, slot, lane);
                        }
                    }
                }
                for (; i < cnt; ++i) {
                    const u32 slot = __shfl_sync(FULL_MASK, ks, i);
                    const float a = __shfl_sync(FULL_MASK, kv, i);
                    acc.fma(a, stage, slot, lane);
                }
            }
            // 3. Store.
            acc.add(acc_odd);
            acc.store(c + (u64)row * ldc, col0, lane, n, alpha, beta);
        }
        // Every warp is done with this slice's stage before the next one overwrites it.
        if (slice + gridDim.y < slices) __syncthreads();
    }
}

#define STAGED_PARAMS                                                                         \
    const u32 *__restrict__ window_rows, const u32 *__restrict__ unique_offsets,              \
        const u32 *__restrict__ unique_cols, const u32 *__restrict__ indptr,                  \
        const u16 *__restrict__ slots, const float *__restrict__ values, const float *b,      \
        u32 ldb, float *c, u32 ldc, u32 n, float alpha, float beta, u32 flags

extern "C" __global__ void __launch_bounds__(32 * STAGED_WARPS, STAGED_MIN_BLOCKS)
    staged_spmm_s32_f32(STAGED_PARAMS) {
    staged_spmm<32>(window_rows, unique_offsets, unique_cols, indptr, slots, values, b, ldb, c,
                    ldc, n, alpha, beta, flags);
}

extern "C" __global__ void __launch_bounds__(32 * STAGED_WARPS, STAGED_MIN_BLOCKS)
    staged_spmm_s64_f32(STAGED_PARAMS) {
    staged_spmm<64>(window_rows, unique_offsets, unique_cols, indptr, slots, values, b, ldb, c,
                    ldc, n, alpha, beta, flags);
}
