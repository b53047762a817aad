// CSR SpMM on CUDA cores: C = alpha * A * B + beta * C, f32 A values and f32 accumulation.
// A: m x k CSR (u32 indptr[m+1], u32 indices[nnz], f32 values[nnz]); B: k x n row-major with leading
// dimension ldb; C: m x n row-major with ldc; B and C in f32 (csr_spmm_f32) or as the bits of f16 /
// bf16 (csr_spmm_f16, csr_spmm_bf16: B widened exactly, C rounded to nearest, beyond the range
// +-inf, as a cast). beta == 0 never reads C (BLAS semantics: NaN in C does not propagate).
//
// Work (built on the host, crates/gpu/src/spmm/csr.rs `csr_work`): warp item i is
// work[4i .. 4i+4] = {row_begin, row_end, nnz_begin, nnz_end}: the rows [row_begin, row_end), of
// their nonzeros only those in [nnz_begin, nnz_end). Items either pack whole consecutive rows (up to
// a nonzero budget, empty rows included) or hold one chunk of a row longer than the budget. A row
// whose nonzeros the item does not hold entirely is "split": it was pre-scaled by beta (the host
// runs acc_spmm_prescale of acc_spmm.cu on one-row groups, same stream, just before) and every
// chunk adds alpha * its partial sum with atomics; every other row is written once with
// alpha * acc + beta * C. A 16-bit C cannot take partial sums: the f16 / bf16 entries add a split
// row's chunks into its f32 scratch row (SplitScratch of tc_common.cuh, groups of one row, zeroed
// before) and csr_split_finish_f16 / _bf16 round scratch + beta * C into C after. So thread blocks stay
// balanced on rows of any length (R-MAT hubs: 30k nonzeros), and the product needs no separate
// beta pass over all of C (cuSPARSE's csrmm runs one).
//
// Launch: blockDim = (32, WARPS); warp item = blockIdx.x * WARPS + threadIdx.y (items beyond the
// count exit as a whole warp); gridDim.y = number of 128-feature slabs of C (<= 65535; the kernel
// strides over further slabs). Lane L owns features col0 + 4L .. col0 + 4L + 3 of the slab: one
// float4 (16-bit types: 8 bytes) per gathered B row when flags bit 0 is set (ldb, ldc multiples of
// 4, B and C aligned to four elements) and all four are < n.
// The warp loads 32 (column, value) pairs at once and broadcasts them with shuffles, then issues
// UNROLL B-row loads before their FMAs, so each warp keeps UNROLL 512-byte gathers in flight (f32;
// the 16-bit entries keep HALF_UNROLL 256-byte gathers, held as their raw bits until the FMAs).

#define FULL_MASK 0xffffffffu
#define COLS_PER_WARP 128
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef HALF_UNROLL
#define HALF_UNROLL 6
#endif

// Types and the guarded load of four features (load4_below).
#include "tc_common.cuh"

// The gathers of B in f32 (F32B) and f16 / bf16 (HalfB): V, the raw vector of four features
// (zeros beyond n; one vector load when vec); widen4, those features in f32 (exact); UNROLL_, the
// gathers a warp keeps in flight.
struct F32B {
    typedef float4 V;
    static constexpr int UNROLL_ = UNROLL;
    __device__ __forceinline__ static V zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
    __device__ __forceinline__ static V load4(const float* __restrict__ b, u64 ldb, u32 k, u64 col,
                                              u32 n, bool vec) {
        const float* p = b + (u64)k * ldb + col;
        if (vec) return __ldg(reinterpret_cast<const float4*>(p));
        return load4_below(p, col, n);
    }
    __device__ __forceinline__ static float4 widen4(V v) { return v; }
};

// B in f16 (BF false) or bf16 (BF true) bits: uint2 holds the four features' bits.
template <bool BF>
struct HalfB {
    typedef uint2 V;
    static constexpr int UNROLL_ = HALF_UNROLL;
    __device__ __forceinline__ static V zero() { return make_uint2(0u, 0u); }
    __device__ __forceinline__ static uint2 load4(const u16* __restrict__ b, u64 ldb, u32 k, u64 col,
                                                  u32 n, bool vec) {
        const u16* p = b + (u64)k * ldb + col;
        if (vec) return __ldg(reinterpret_cast<const uint2*>(p));
        u16 h[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) h[j] = col + j < n ? __ldg(p + j) : (u16)0;
        return make_uint2(pack_half2(h[0], h[1]), pack_half2(h[2], h[3]));
    }
    __device__ __forceinline__ static float4 widen4(uint2 v) {
        u16 h[4];
        Vec4<u16>::unpack(v, h);
        return make_float4(half_to_f32<BF>(h[0]), half_to_f32<BF>(h[1]), half_to_f32<BF>(h[2]),
                           half_to_f32<BF>(h[3]));
    }
};

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
        add4_atomic(p, v, col, n, vec);
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

// write_c4 for C in f16 / bf16 bits: alpha * acc (+ beta * C, read in the type) rounded to the
// type; a split row's partial sum goes to its f32 scratch row instead (ss; C untouched until
// csr_split_finish_*).
template <bool BF>
__device__ __forceinline__ void write_c4_half(u16* __restrict__ c, u64 ldc, u32 row, u64 col,
                                              u32 n, bool vec, bool split, float alpha, float beta,
                                              float4 acc, const SplitScratch& ss) {
    const float v[4] = {alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w};
    if (split) {
        float* p = ss.rows + (u64)split_slot(ss, row) * n + col;
        // Scratch rows are n floats: 16-byte aligned at col (a multiple of 4) when n is too.
        add4_atomic(p, v, col, n, vec && (n & 3u) == 0);
        return;
    }
    store4_half<BF>(c + (u64)row * ldc + col, v, vec, col, n, beta);
}

#ifndef CSR_WARPS
#define CSR_WARPS 8
#endif
// 4 resident blocks of 256 threads: at most 64 registers, 32 warps per SM.
#ifndef CSR_MIN_BLOCKS
#define CSR_MIN_BLOCKS 4
#endif

// The kernel body: B and C of element T (float, or u16 bits of f16 / bf16 with BF telling which),
// gathered by Ld (F32B, HalfB<BF>); ss the split rows' scratch of the 16-bit entries (unused by
// f32's).
template <typename T, bool BF, class Ld>
__device__ __forceinline__ void csr_spmm(const u32* __restrict__ indptr,
                                         const u32* __restrict__ indices,
                                         const float* __restrict__ values,
                                         const u32* __restrict__ work, u32 num_items,
                                         const T* __restrict__ b, u32 ldb, T* __restrict__ c,
                                         u32 ldc, u32 n, float alpha, float beta, u32 flags,
                                         const SplitScratch& ss) {
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
                constexpr int U = Ld::UNROLL_;
                for (u32 i = 0; i < cnt; i += U) {
                    typename Ld::V bv[U];
                    float av[U];
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        // Shuffles stay warp-uniform; beyond cnt the pair is (0, 0.0) and unused.
                        const u32 k = __shfl_sync(FULL_MASK, kc, (i + u) & 31);
                        av[u] = __shfl_sync(FULL_MASK, kv, (i + u) & 31);
                        const bool ok = active && i + u < cnt;
                        bv[u] = ok ? Ld::load4(b, ldb, k, col, n, vec) : Ld::zero();
                    }
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        if (i + u < cnt) fma4(acc, av[u], Ld::widen4(bv[u]));
                    }
                }
            }
            if (!active) continue;
            if constexpr (sizeof(T) == 4) {
                write_c4(c, ldc, row, col, n, vec, split, alpha, beta, acc);
            } else {
                write_c4_half<BF>(c, ldc, row, col, n, vec, split, alpha, beta, acc, ss);
            }
        }
    }
}

// The entries' parameters before the scratch, B and C of element T.
#define CSR_SPMM_PARAMS(T)                                                                       \
    const u32 *__restrict__ indptr, const u32 *__restrict__ indices,                            \
        const float *__restrict__ values, const u32 *__restrict__ work, u32 num_items,          \
        const T *__restrict__ b, u32 ldb, T *__restrict__ c, u32 ldc, u32 n, float alpha,       \
        float beta, u32 flags
#define CSR_SPMM_ARGS indptr, indices, values, work, num_items, b, ldb, c, ldc, n, alpha, beta, flags

extern "C" __global__ void __launch_bounds__(32 * CSR_WARPS, CSR_MIN_BLOCKS)
    csr_spmm_f32(CSR_SPMM_PARAMS(float)) {
    csr_spmm<float, false, F32B>(CSR_SPMM_ARGS, SplitScratch{nullptr, 0u, nullptr});
}

// The f16 / bf16 entries: the split rows' ids (ascending, as the work list's) and f32 scratch rows
// (split_count * n floats, zeroed before) after the common parameters.
#define CSR_SPMM_HALF_ENTRY(NAME, BF)                                                             \
    extern "C" __global__ void __launch_bounds__(32 * CSR_WARPS, CSR_MIN_BLOCKS)                \
        NAME(CSR_SPMM_PARAMS(u16), const u32 *__restrict__ split_ids, u32 split_count,          \
             float *__restrict__ scratch) {                                                      \
        csr_spmm<u16, BF, HalfB<BF>>(CSR_SPMM_ARGS, SplitScratch{split_ids, split_count, scratch});        \
    }
CSR_SPMM_HALF_ENTRY(csr_spmm_f16, false)
CSR_SPMM_HALF_ENTRY(csr_spmm_bf16, true)

// After csr_spmm_f16 / _bf16 with split rows: C = round(scratch + beta * C) on those rows
// (split_rows_finish of tc_common.cuh, group_rows = 1).
SPLIT_ROWS_FINISH_ENTRY(csr_split_finish_f16, false)
SPLIT_ROWS_FINISH_ENTRY(csr_split_finish_bf16, true)
