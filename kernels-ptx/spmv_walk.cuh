// What the CUDA-core walks share -- split rows summed by the row's last chunk, the row store, the
// walk parameters and the row cursor -- and the first of them, `core` (8 lanes per tile-row).
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).

#ifndef TCSPARSE_SPMV_WALK_CUH
#define TCSPARSE_SPMV_WALK_CUH

// ---------------------------------------------------------------------------------------------
// Split rows inside the walks (v6): no spmv_fixup node. Each chunk of a split tile-row writes its
// partials to its slot as before, then the chunk that finishes the row last sums the row's slots:
// the chunk's lanes fence, one lane counts the chunk in count[first] (first = the row's first
// slot), and the chunk that brings the count to the row's number of chunks reads every slot of the
// row in slot order with L2 loads -- the sum spmv_fixup makes, in its order, so the result does not
// depend on which chunk comes last -- writes y once (beta = 0: y not read) and sets the count back
// to 0 for the next call (calls on one value are stream-ordered). split[slot] = {first slot of the
// slot's tile-row, its end slot}; count: one u32 per slot (only first slots used), zero at upload.
// ---------------------------------------------------------------------------------------------

// Called by every lane of `mask` (one chunk, same slot) after writing its partials; true on all of
// them when this chunk is the row's last. fe = {first slot, end slot} of the row. A null count
// (the host passes one for n >= 2, where the last chunk's serial sum over 8n elements cost more
// than the spmv_fixup node it saves) leaves the row to spmv_fixup: false on every lane.
__device__ __forceinline__ bool split_last(const uint2* __restrict__ split, u32* __restrict__ count,
                                        u32 slot, u32 mask, u32 leader, uint2& fe) {
    if (count == nullptr) return false;
    fe = __ldg(split + slot);
    // Release: this lane's partials before the count (the chunk's, through the barrier).
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    __syncwarp(mask);
    u32 last = 0u;
    if ((threadIdx.x & 31u) == leader) {
        last = atomicAdd(count + fe.x, 1u) + 1u == fe.y - fe.x ? 1u : 0u;
        if (last) count[fe.x] = 0u;  // every other chunk has counted: reset for the next call
    }
    last = __shfl_sync(mask, last, leader);
    if (last) asm volatile("fence.acq_rel.gpu;" ::: "memory");  // acquire the other chunks' partials
    return last != 0u;
}

// Sum of element e (= g * n + j) of the slots first..end-1 (partial[(slot * 8 + g) * n + j]), in
// slot order from 0 (spmv_fixup's order), read from L2 (written by other blocks in this call).
__device__ __forceinline__ float split_sum(const float* __restrict__ partial, uint2 fe, u32 e,
                                           u32 n) {
    float sum = 0.0f;
    for (u32 s = fe.x; s < fe.y; ++s) sum += __ldcg(partial + (u64)s * 8u * n + e);
    return sum;
}

// The row's last chunk writes y[yr·n + j] = the split sum of element e (beta = 0: y not read).
__device__ __forceinline__ void split_store(const float* __restrict__ partial, uint2 fe, u32 e,
                                            u32 n, float* __restrict__ y, u64 yr, u32 j,
                                            float beta) {
    const float sum = split_sum(partial, fe, e, n);
    float* py = y + yr * n + j;
    *py = beta == 0.0f ? sum : fmaf(beta, *py, sum);
}

// A one-RHS walk's store of `v`, the finished sum of local row `lr` of block-row `row`: into the
// split half's partial slot, or into y (β·y added unless β = 0, rows past `rows` skipped).
__device__ __forceinline__ void row_store(float* __restrict__ partial, float* __restrict__ y,
                                          u32 rows, float beta, bool split, u32 slot, u32 row,
                                          u32 lr, float v) {
    const u64 yr = (u64)row * 8u + lr;
    if (split) {
        partial[(u64)slot * 8u + lr] = v;
    } else if (yr < rows) {
        y[yr] = beta == 0.0f ? v : fmaf(beta, y[yr], v);
    }
}

// The sum of a over lanes l, l ^ 8, l ^ 16 and l ^ 24 (the four lane groups of 8, in a fixed
// order), on every lane; a is set to 0 for the next row.
__device__ __forceinline__ float take_group_sum(float& a) {
    float v = a;
    v += __shfl_xor_sync(FULL_MASK, v, 8);
    v += __shfl_xor_sync(FULL_MASK, v, 16);
    a = 0.0f;
    return v;
}

// ---------------------------------------------------------------------------------------------
// CUDA-core bitBSR walk for one right-hand side ("8 lanes per tile-row"). At n = 1 the MMA uses
// 1/8 of its B columns and the MMA kernels (spmv_mma.cuh) are instruction-issue bound (~10
// warp-instructions per nonzero); this walk spends ~1 per nonzero on banded matrices.
//
// A warp is 4 groups of 8 lanes; group q of warp w takes half 4w + q of the same work list (two
// halves per item, so a warp covers two items). Lane r of a group owns row r of the current
// tile-row and keeps its sum in one register over all of the row's tiles: no shuffles, no
// reductions. Per tile the 16-byte record is one address for the group's 8 lanes (broadcast), the
// lane takes its row byte of the bitmap, its first value is offset + popc(bitmap bits below row r),
// the tile's 8 x values are two float4 loads (one address per group; scalar, guarded, at the K tail
// or when x is not 16-byte aligned), then 8 predicated value loads and FMAs. Two tiles per
// iteration (their loads issued before either's FMAs), the next two tile records and the next row's
// end and scale prefetched one iteration ahead, so a row change costs no dependent load.
// F16: values are f16 scaled per tile-row, x is read as f32 (no x16 pass: one kernel node), the row
// scale is applied once at the flush: y = (alpha * s_r) * acc + beta * y. F32: f32 values (TF32- or
// f32-storage) on f32 FMAs. Split rows write their partial slot and spmv_fixup adds them (n = 1).
// ---------------------------------------------------------------------------------------------

// Parameters of the walks' bodies (X as f32, no xs or n) and the arguments an entry passes them.
#define SPMV_WALK_BODY_PARAMS                                                                      \
    const uint4* __restrict__ tiles, const void* __restrict__ values,                              \
        const float* __restrict__ row_scale, const u32* __restrict__ ptr,                          \
        const uint4* __restrict__ work, u32 num_items, const float* __restrict__ x,                \
        float* __restrict__ y, float* __restrict__ partial, u32 rows, u32 cols, float alpha,       \
        float beta, const uint2* __restrict__ spl, u32* __restrict__ cnt
#define SPMV_WALK_BODY_ARGS                                                                        \
    tiles, values, row_scale, ptr, work, num_items, reinterpret_cast<const float*>(x), y, partial, \
        rows, cols, alpha, beta, spl, cnt

// The walks' row cursor (`core`, `bits`/`seg`, `tc`): e = the current tile-row's end tile (at most
// te, the half's end), s = its scale (F16); e_next / s_next = the next row's, loaded one row ahead
// so that a row change costs no dependent load.
template <int F16>
__device__ __forceinline__ void row_cursor_init(u32 row, u32 rend, u32 te,
                                                const u32* __restrict__ ptr,
                                                const float* __restrict__ row_scale, u32& e,
                                                float& s, u32& e_next, float& s_next) {
    const bool in = row < rend;
    e = in ? min(__ldg(ptr + row + 1), te) : te;
    s = (F16 && in) ? __ldg(row_scale + row) : 1.0f;
    e_next = row + 1u < rend ? __ldg(ptr + row + 2) : te;
    s_next = (F16 && row + 1u < rend) ? __ldg(row_scale + row + 1) : 1.0f;
}

// Moves the cursor to the next row.
template <int F16>
__device__ __forceinline__ void row_cursor_next(u32& row, u32 rend, u32 te,
                                                const u32* __restrict__ ptr,
                                                const float* __restrict__ row_scale, u32& e,
                                                float& s, u32& e_next, float& s_next) {
    ++row;
    e = min(e_next, te);
    s = s_next;
    if (row + 1u < rend) {
        e_next = __ldg(ptr + row + 2);
        if (F16) s_next = __ldg(row_scale + row + 1);
    }
}

// The warp-per-half walks' variant (`corew`, `bitsw`/`segw`), whose e_next is loaded already cut
// at te: e takes ne, the step's next end, and the row after next is loaded ahead.
template <int F16>
__device__ __forceinline__ void row_cursor_step(u32& row, u32 rend, u32 te,
                                                const u32* __restrict__ ptr,
                                                const float* __restrict__ row_scale, u32 ne, u32& e,
                                                float& s, u32& e_next, float& s_next) {
    ++row;
    e = ne;
    s = s_next;
    if (row + 1u < rend) {
        e_next = min(__ldg(ptr + row + 2), te);
        if (F16) s_next = __ldg(row_scale + row + 1);
    }
}

// Value i as f32 (f16 bits converted, or f32).
template <int F16>
__device__ __forceinline__ float core_val(const void* __restrict__ values, u32 i) {
    if (F16) {
        const u16 b = __ldg(reinterpret_cast<const u16*>(values) + i);
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
        return f;
    }
    return __ldg(reinterpret_cast<const float*>(values) + i);
}

// The 8 x values of column segment c (zeros beyond K).
__device__ __forceinline__ void core_x(const float* __restrict__ x, u32 c, u32 cols, bool vec,
                                       float xv[8]) {
    const u32 k0 = c * 8;
    if (vec && k0 + 8 <= cols) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(x + k0));
        const float4 b = __ldg(reinterpret_cast<const float4*>(x + k0) + 1);
        xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w;
        xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) xv[j] = k0 + j < cols ? __ldg(x + k0 + j) : 0.0f;
    }
}

// Where lane r's row byte sits in a tile record's 64-bit row mask (rows 0-3 in word x, 4-7 in
// word y): which word, its shift, and the masks of the bits before it in each word (the values
// of rows before r come first).
struct CoreLane {
    bool hi;
    u32 sh;
    u32 lo_mask;
    u32 hi_mask;
};

__device__ __forceinline__ CoreLane core_lane(u32 r) {
    CoreLane l;
    l.hi = r >= 4u;
    l.sh = 8u * (r & 3u);
    l.lo_mask = l.hi ? 0xffffffffu : (1u << l.sh) - 1u;
    l.hi_mask = l.hi ? (1u << l.sh) - 1u : 0u;
    return l;
}

// Lane r's row byte of tile record m and the index of its first value.
struct CoreTile {
    u32 bits;
    u32 idx;
};

__device__ __forceinline__ CoreTile core_decode(uint4 m, const CoreLane& l) {
    CoreTile c;
    c.bits = ((l.hi ? m.y : m.x) >> l.sh) & 0xffu;
    c.idx = m.w + __popc(m.x & l.lo_mask) + __popc(m.y & l.hi_mask);
    return c;
}

template <int F16>
__device__ __forceinline__ void core_load(const void* __restrict__ values, CoreTile c,
                                          float v[8]) {
    u32 idx = c.idx;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const bool b = (c.bits >> j) & 1u;
        v[j] = b ? core_val<F16>(values, idx) : 0.0f;
        idx += b ? 1u : 0u;
    }
}

// The walks' half `hidx` of the work list (2·num_items halves, uint4 each): `w` (w.x its first
// row; w.y one past its last row, or SPLIT_BIT | slot for a split half of one row; tiles
// [w.z, w.w)), `split`, `slot`, `rend` (one past its last row) and the cursors `row`, `t`, `te`.
// Returns from the walk for a half past the list or the empty half that pads an odd count (`hidx`
// is uniform over the lanes that share it, so they return together).
#define SPMV_WALK_HALF(hidx)                                                                        \
    if ((hidx) >= 2u * num_items) return;                                                          \
    const uint4 w = __ldg(work + (hidx));                                                          \
    const bool split = (w.y & SPLIT_BIT) != 0u;                                                    \
    const u32 slot = w.y & ~SPLIT_BIT;                                                             \
    const u32 rend = split ? w.x + 1u : w.y;                                                       \
    u32 row = w.x, t = w.z;                                                                        \
    const u32 te = w.w;                                                                            \
    if (row >= rend) return

template <int F16>
__device__ __forceinline__ void spmv_core_body(SPMV_WALK_BODY_PARAMS) {
    const u32 lane = threadIdx.x, r = lane & 7u;
    const u32 hidx = (blockIdx.x * SPMV_WARPS + threadIdx.y) * 4u + (lane >> 3);
    SPMV_WALK_HALF(hidx);  // (returns for whole groups: no shuffles below)
    const CoreLane cl = core_lane(r);
    const bool vec = (reinterpret_cast<size_t>(x) & 15u) == 0u;
    u32 e, e_next;
    float s, s_next;
    row_cursor_init<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
    float acc = 0.0f;
    // Writes the current row and moves to the next (empty rows included) while it ends at t.
    auto settle = [&]() {
        while (row < rend && t == e) {
            const float v = (alpha * s) * acc;
            acc = 0.0f;
            row_store(partial, y, rows, beta, split, slot, row, r, v);
            row_cursor_next<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
        }
    };
    // The first records are bounded by the half, not the row: issued before the row end arrives.
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 m0 = t < te ? __ldg(tiles + t) : zero;
    uint4 m1 = t + 1u < te ? __ldg(tiles + t + 1) : zero;
    settle();
    while (t < te) {
        const uint4 p0 = t + 2u < te ? __ldg(tiles + t + 2) : zero;
        const uint4 p1 = t + 3u < te ? __ldg(tiles + t + 3) : zero;
        const CoreTile c0 = core_decode(m0, cl);
        const CoreTile c1 = core_decode(m1, cl);
        float x0[8], x1[8], v0[8], v1[8];
        core_x(x, m0.z, cols, vec, x0);
        core_x(x, m1.z, cols, vec, x1);  // m1 beyond te is zero: column 0, in bounds, unused
        core_load<F16>(values, c0, v0);
        core_load<F16>(values, c1, v1);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc = fmaf(v0[j], x0[j], acc);
        ++t;
        settle();
        if (t < te) {
#pragma unroll
            for (int j = 0; j < 8; ++j) acc = fmaf(v1[j], x1[j], acc);
            ++t;
            settle();
        }
        m0 = p0;
        m1 = p1;
    }
    // A split half's one row was written to its slot by the last settle; the row's last chunk
    // writes y (after the loop: nothing else is live).
    uint2 fe;
    if (split && split_last(spl, cnt, slot, 0xffu << (lane & 24u), lane & 24u, fe)) {
        const u64 yr = (u64)w.x * 8u + r;
        if (yr < rows) split_store(partial, fe, r, 1u, y, yr, 0u, beta);
    }
}

// The entry of an n = 1 walk whose body takes no x segment width nor n (core, corew, lane):
// `SPMV_N1_WALK_ENTRY(name, body<template arguments>)`.
// `SPMV_N1_WALK_ENTRY_LB(launch bounds, name, body<template arguments>)` likewise.
#define SPMV_N1_WALK_ENTRY_LB(LB, NAME, ...)                                                       \
    extern "C" __global__ void LB NAME(SPMV_WALK_PARAMS) {                                         \
        (void)xs;                                                                                  \
        (void)n;                                                                                   \
        __VA_ARGS__(SPMV_WALK_BODY_ARGS);                                                          \
    }
#define SPMV_N1_WALK_ENTRY(NAME, ...)                                                              \
    SPMV_N1_WALK_ENTRY_LB(__launch_bounds__(32 * SPMV_WARPS), NAME, __VA_ARGS__)

#if SPMV_MODULE_N == 1
SPMV_N1_WALK_ENTRY(spmv_core_f16, spmv_core_body<1>)
SPMV_N1_WALK_ENTRY(spmv_core_f32, spmv_core_body<0>)
#endif

#endif  // TCSPARSE_SPMV_WALK_CUH
