// cuTeSpMM (HRPB) SpMM on tensor cores, TF32: C = alpha * A * B + beta * C.
//
// A is HRPB in its device encoding (tcsparse-formats `HrpbDevice`): 16-row panels, each panel's
// active columns compacted and cut into 16x4 bricks; per stored brick 8 u32 words
//   { pattern_lo, pattern_hi, value_offset, 0, col0, col1, col2, col3 }
// with pattern bit p = row * 4 + col (LSB first), so bit `lane` is row lane / 4, column lane % 4, and
// bit 32 + lane is row 8 + lane / 4: exactly the A fragment of mma.m16n8k4 TF32 (a0 = A[g][t],
// a1 = A[g + 8][t], g = lane / 4, t = lane % 4). Values are stored per brick in bit order, so lane
// (g, t) finds a0 at value_offset + popc(lo & below) and a1 at value_offset + popc(lo) + popc(hi & below)
// (below = bits under the lane). Column id 0xFFFFFFFF (sentinel, at a panel's tail) means "zero B row":
// its B row is never read (a NaN in some B row cannot leak into other rows through padding).
//
// B (K x N) and C (M x N) are row-major f32 with leading dimensions ldb, ldc (elements).
//
// Two kernels, the same walk, different MMA shape:
//   hrpb_spmm_k4: one mma.m16n8k4 per brick and 8 features (the paper's instruction);
//   hrpb_spmm_k8: one mma.m16n8k8 per PAIR of consecutive bricks and 8 features: a0, a1 from brick i
//                 and a2, a3 (rows g, g + 8, k = t + 4) from brick i + 1, b0 = B[col_i[t]], b1 =
//                 B[col_{i+1}[t]]. Same loads, half the MMA instructions. A missing second brick
//                 (odd count) is zeros.
//
// Feature permutation (TN = 32 features per warp, 4 MMAs of 8 columns each): MMA j's column n is
// feature f0 + 4n + j, so lane (g, t) loads ONE float4 per brick, B[col[t]][f0 + 4g .. f0 + 4g + 3]
// (component j feeds MMA j; a warp's 8 lanes of one t read 128 contiguous bytes), and its
// accumulators c0 / c1 of MMA j are features f0 + 8t + j / f0 + 8t + 4 + j of row g (c2 / c3: row
// g + 8): two float4 stores per row. Features >= N load zeros and are not stored (any N).
//
// Work (built on the host, crates/gpu/src/spmm/hrpb.rs): thread block x runs work[4x .. 4x + 4] =
// { panel, brick_begin, brick_end, flags } (a virtual panel of planner::wave::wave_split; bricks are
// global indices); with warp items (hrpb_spmm_k8w) warp w of TB x runs item 4x + w
// on features [32 y, +32) instead, and the list is padded to a multiple of 4 with items whose flags
// bit 1 is set (skipped). k8o is k8 at 10 resident blocks per SM instead of 8. flags bit 0: the panel is split over several virtual panels; its rows were
// pre-scaled by beta (acc_spmm_prescale, 16-row groups, same stream, just before) and this TB adds
// alpha * acc with atomics (red.global.add.v4.f32 on the float4 path). Every other panel is written
// once: alpha * acc + beta * C, C not read when beta == 0, so empty panels are written too (0 or
// beta * C) and NaN in C does not propagate with beta == 0. Rows >= M are not stored.
// gridDim.y tiles the features: blockDim = (32, W), warp w of TB (x, y) owns features
// [32 (y W + w), +32); warps wholly beyond N exit.
//
// k8sc / k8wsc (v5, one item per TB / warp items) are the lean walk at 12 blocks per SM with B
// gathered a row per quarter warp: see hrpb_spmm_lean below. k8t / k8wtd (v6) are the tight walk
// (hrpb_spmm_tight) at 10 blocks per SM; k8ts is k8t whose split panels are not pre-scaled: the
// first piece stores and publishes a flag (`sync`, `slots`: see finish), the others wait for it.
// Every entry takes `sync` and `slots`; only k8ts reads them.
// Pipeline: a step is 2 bricks; the loads of step s + 1 (metadata, B rows, values) are issued before
// the MMAs of step s. No shared memory, no barriers (the row-tile kernels' lesson on the H200: a
// shared-memory B cache costs more occupancy than it saves L2 bytes).
//
// launch flags (kernel argument): bit 0 = ldb % 4 == 0 (float4 B loads), bit 1 = ldc % 4 == 0
// (float4 C stores / vector atomics). Device buffers are 256-byte aligned.

// Types, SENTINEL, the TF32 MMA step, the guarded B load, the C stores and the vector atomic add.
#include "tc_common.cuh"

#define BRICK_WORDS 8
#ifndef HRPB_MIN_BLOCKS
#define HRPB_MIN_BLOCKS 8
#endif
// The occupancy variant k8o (v4): k8 at 10 resident blocks of 128 threads per SM (48 registers,
// 4 bytes of spill, ptxas 12.4) instead of 8 (59 registers). k8w built the same way (24 bytes of
// spill) was 5-17 % slower than k8w and was dropped.
// ncu on the H200 (docs/kernels/hrpb.md v4): the walk is latency-bound (long-scoreboard stalls,
// 0.43-0.62 instructions issued per scheduler and cycle, L1 <= 71 %, L2 <= 62 %, DRAM <= 35 %).
#ifndef HRPB_OCC_BLOCKS
#define HRPB_OCC_BLOCKS 10
#endif

__device__ __forceinline__ void mma_k4(float d[4], float a0, float a1, float b0) {
    asm volatile(
        "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(to_tf32(a0)), "r"(to_tf32(a1)), "r"(to_tf32(b0)));
}

// mma_m16n8k8_tf32 with every fragment given in f32 (rounded to TF32 here, A before B).
__device__ __forceinline__ void mma_k8(float d[4], float a0, float a1, float a2, float a3, float b0,
                                       float b1) {
    mma_m16n8k8_tf32(d, to_tf32(a0), to_tf32(a1), to_tf32(a2), to_tf32(a3), to_tf32(b0),
                     to_tf32(b1));
}

__device__ __forceinline__ float comp(const float4& v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// Features col .. col + 3 of B row k (zeros beyond n).
__device__ __forceinline__ float4 load_b4(const float* __restrict__ b, u32 ldb, u32 k, u64 col,
                                          u32 n, bool vec) {
    const float* p = b + (u64)k * ldb + col;
    if (vec && col + 3 < n) return __ldg(reinterpret_cast<const float4*>(p));
    return load4_below(p, col, n);
}

// One step: two bricks' A elements of this lane and their B float4.
struct Step {
    float a[4];  // a0, a1 of brick i, then of brick i + 1
    float4 b[2];
};

__device__ __forceinline__ Step load_step(const u32* __restrict__ bricks,
                                          const float* __restrict__ values,
                                          const float* __restrict__ b, u32 ldb, u32 n, u32 i,
                                          u32 end, u32 lane, u64 fb, bool bvec) {
    Step s;
    const u32 t = lane & 3;
    const u32 below = (1u << lane) - 1;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        s.a[2 * q] = 0.0f;
        s.a[2 * q + 1] = 0.0f;
        s.b[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const u32 k = i + q;
        if (k < end) {  // warp-uniform
            const u32* r = bricks + (u64)k * BRICK_WORDS;
            const uint4 m = __ldg(reinterpret_cast<const uint4*>(r));
            const u32 col = __ldg(r + 4 + t);
            if ((m.x >> lane) & 1u) s.a[2 * q] = __ldg(values + m.z + __popc(m.x & below));
            if ((m.y >> lane) & 1u)
                s.a[2 * q + 1] = __ldg(values + m.z + __popc(m.x) + __popc(m.y & below));
            if (col != SENTINEL && fb < n) s.b[q] = load_b4(b, ldb, col, fb, n, bvec);
        }
    }
    return s;
}

// alpha * v to four features col .. col + 3 of C row `row`: stored with beta * C added (C not read
// when beta == 0), or added with atomics for a split panel (C pre-scaled by beta).
__device__ __forceinline__ void write_c4(float* __restrict__ c, u32 ldc, u32 row, u64 col, u32 n,
                                         bool vec, bool split, float beta, float4 v) {
    float* p = c + (u64)row * ldc + col;
    const float w[4] = {v.x, v.y, v.z, v.w};
    if (vec && col + 3 < n) {
        if (split) {
            red_add_v4(p, w);
            return;
        }
        store_axpby4(reinterpret_cast<float4*>(p), v, beta);
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (col + j < n) {
            if (split) {
                atomicAdd(p + j, w[j]);
            } else {
                p[j] = beta == 0.0f ? w[j] : fmaf(beta, p[j], w[j]);
            }
        }
    }
}

// Lane (g, t)'s accumulators to C: features f0 + 8t .. + 7 of rows 16 panel + g and + g + 8.
__device__ __forceinline__ void store_c(float* __restrict__ c, u32 ldc, u32 m, u32 n, float alpha,
                                        float beta, bool split, bool cvec, u32 panel, u64 f0,
                                        u32 t, u32 g, const float (&acc)[4][4]) {
    const u64 fc = f0 + 8 * t;  // this lane's C features: fc .. fc + 7
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // h = 0: row g (c0, c1), h = 1: row g + 8 (c2, c3)
        const u32 row = 16 * panel + g + 8 * h;
        if (row >= m) continue;
        const float4 lo = make_float4(alpha * acc[0][2 * h], alpha * acc[1][2 * h],
                                      alpha * acc[2][2 * h], alpha * acc[3][2 * h]);
        const float4 hi = make_float4(alpha * acc[0][2 * h + 1], alpha * acc[1][2 * h + 1],
                                      alpha * acc[2][2 * h + 1], alpha * acc[3][2 * h + 1]);
        if (fc < n) write_c4(c, ldc, row, fc, n, cvec, split, beta, lo);
        if (fc + 4 < n) write_c4(c, ldc, row, fc + 4, n, cvec, split, beta, hi);
    }
}

// The parameters of every entry and body (checked against the launch code by ptx_signatures).
#define HRPB_PARAMS                                                                           \
    const u32 *__restrict__ work, const u32 *__restrict__ bricks,                             \
        const float *__restrict__ values, const float *__restrict__ b, u32 ldb,               \
        float *__restrict__ c, u32 ldc, u32 m, u32 n, float alpha, float beta, u32 flags,       \
        u32 *__restrict__ sync, u32 slots
#define HRPB_ARGS work, bricks, values, b, ldb, c, ldc, m, n, alpha, beta, flags, sync, slots

// One warp's work: its item (panel, brick range, split flag) and its 32 features [f0, f0 + 32).
struct WarpItem {
    u64 f0;
    u32 panel, begin, end, wflags;
    bool split;
};

// Reads this warp's work item; false when the warp has nothing to do (features beyond n, or a
// padding item). IPB = work items per thread block (blockDim.y = 4 when IPB > 1):
//   IPB = 1: the TB's warps split one item's features [32 (y W + w), +32);
//   IPB = 4 (warp items, k8w): warp w of TB x runs item 4x + w on features [32 y, +32), so the 4
//            warps walk 4 consecutive (virtual) panels on the same features;
//   (IPB = 2, pair items: warps 2i and 2i + 1 run item 2x + i on 64 features, was measured as
//   k8 and dropped: docs/kernels/hrpb.md v4.)
// Lists with IPB > 1 are padded to a multiple of IPB with skipped items (flags bit 1).
// The lean kernels (REREAD) read blockDim.y anew each time (asm volatile): ptxas otherwise keeps
// it from the start and spills it at 40 registers.
__device__ __forceinline__ u32 ntid_y() {
    u32 r;
    asm volatile("mov.u32 %0, %%ntid.y;" : "=r"(r));
    return r;
}

template <int IPB, bool REREAD = false>
__device__ __forceinline__ bool warp_item(const u32* __restrict__ work, u32 n, WarpItem& it) {
    constexpr u32 WPI = IPB > 1 ? 4 / IPB : 1;  // warps per item (IPB > 1)
    it.f0 = IPB > 1 ? ((u64)blockIdx.y * WPI + threadIdx.y % WPI) * 32
                    : ((u64)blockIdx.y * (REREAD ? ntid_y() : blockDim.y) + threadIdx.y) * 32;
    if (it.f0 >= n) return false;
    const u32* wk = work + 4ull * (IPB > 1 ? (u64)IPB * blockIdx.x + threadIdx.y / WPI
                                           : (u64)blockIdx.x);
    const u32 wflags = __ldg(wk + 3);
    if (wflags & 2u) return false;  // padding item
    it.panel = __ldg(wk);
    it.begin = __ldg(wk + 1);
    it.end = __ldg(wk + 2);
    it.wflags = wflags;
    it.split = wflags & 1u;
    return true;
}

// A warp's item and this lane's place in it, as the k8 and deep walks use them.
struct Walk {
    u64 f0, fb;  // the warp's first feature; this lane's B features f0 + 4g
    u32 panel, begin, end, lane, g, t;
    bool split, bvec, cvec;  // split panel; float4 B loads; float4 C access
};

template <int IPB>
__device__ __forceinline__ bool walk_item(const u32* __restrict__ work, u32 n, u32 flags, Walk& w) {
    WarpItem it;
    if (!warp_item<IPB>(work, n, it)) return false;
    w.f0 = it.f0;
    w.panel = it.panel;
    w.begin = it.begin;
    w.end = it.end;
    w.split = it.split;
    w.lane = threadIdx.x;
    w.g = w.lane >> 2;
    w.t = w.lane & 3;
    w.bvec = flags & 1u;
    w.cvec = (flags >> 1) & 1u;
    w.fb = w.f0 + 4 * w.g;
    return true;
}

__device__ __forceinline__ void zero_acc(float (&acc)[4][4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
}

template <bool K8, int IPB>
__device__ __forceinline__ void hrpb_spmm(HRPB_PARAMS) {
    Walk w;
    if (!walk_item<IPB>(work, n, flags, w)) return;  // whole warp

    float acc[4][4];
    zero_acc(acc);

    Step cur = load_step(bricks, values, b, ldb, n, w.begin, w.end, w.lane, w.fb, w.bvec);
    for (u32 i = w.begin; i < w.end; i += 2) {
        const Step nxt = load_step(bricks, values, b, ldb, n, i + 2, w.end, w.lane, w.fb, w.bvec);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (K8) {
                mma_k8(acc[j], cur.a[0], cur.a[1], cur.a[2], cur.a[3], comp(cur.b[0], j),
                       comp(cur.b[1], j));
            } else {
                mma_k4(acc[j], cur.a[0], cur.a[1], comp(cur.b[0], j));
                mma_k4(acc[j], cur.a[2], cur.a[3], comp(cur.b[1], j));
            }
        }
        cur = nxt;
    }

    store_c(c, ldc, m, n, alpha, beta, w.split, w.cvec, w.panel, w.f0, w.t, w.g, acc);
}

// Deep variant (v3, hrpb_spmm_k8d4): the same m16n8k8 pairs, but a step is CH = 4 bricks (CH = 8
// at 96 registers, and CH = 4 with warp items, were measured slower on the H200) and the step's metadata arrives one step early and in one coalesced load: the CH
// brick records (CH x 32 bytes) are read as CH / 4 u32 words per lane (lane l holds word l % 8 of
// record 4w + l / 8) and handed to the lanes with shuffles; the next step's records are loaded
// before this step's value and B loads. So the dependent chain of a step is one round trip (values
// and B, whose addresses are already in registers) instead of two (record, then values and B), and
// a warp has CH bricks' loads in flight at once (the 2-brick kernels: 2). Single-buffered: the
// registers go to more bricks per warp, not to a second step (the MMAs are short next to a load).
template <int CH>
__device__ __forceinline__ void load_meta(const u32* __restrict__ bricks, u32 i, u32 end,
                                          u32 lane, u32 (&mw)[CH / 4]) {
#pragma unroll
    for (int w = 0; w < CH / 4; ++w) {
        const u32 k = i + 4 * w + (lane >> 3);  // the brick whose record word this lane reads
        mw[w] = k < end && k >= i ? __ldg(bricks + (u64)i * BRICK_WORDS + 32 * w + lane) : 0u;
    }
}

template <int CH, int IPB>
__device__ __forceinline__ void hrpb_spmm_deep(HRPB_PARAMS) {
    Walk w;
    if (!walk_item<IPB>(work, n, flags, w)) return;  // whole warp
    const u32 below = (1u << w.lane) - 1;

    float acc[4][4];
    zero_acc(acc);

    u32 mw[CH / 4];
    load_meta<CH>(bricks, w.begin, w.end, w.lane, mw);
    for (u32 i = w.begin; i < w.end; i += CH) {
        u32 mn[CH / 4];
        load_meta<CH>(bricks, i + CH, w.end, w.lane, mn);  // next step's records, in flight now
        float a[2 * CH];
        float4 bv[CH];
#pragma unroll
        for (int q = 0; q < CH; ++q) {
            a[2 * q] = 0.0f;
            a[2 * q + 1] = 0.0f;
            bv[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i + q < w.end) {  // warp-uniform
                const u32 src = 8 * (q & 3);
                const u32 lo = __shfl_sync(0xFFFFFFFFu, mw[q / 4], src);
                const u32 hi = __shfl_sync(0xFFFFFFFFu, mw[q / 4], src + 1);
                const u32 off = __shfl_sync(0xFFFFFFFFu, mw[q / 4], src + 2);
                const u32 col = __shfl_sync(0xFFFFFFFFu, mw[q / 4], src + 4 + w.t);
                if ((lo >> w.lane) & 1u) a[2 * q] = __ldg(values + off + __popc(lo & below));
                if ((hi >> w.lane) & 1u)
                    a[2 * q + 1] = __ldg(values + off + __popc(lo) + __popc(hi & below));
                if (col != SENTINEL && w.fb < n) bv[q] = load_b4(b, ldb, col, w.fb, n, w.bvec);
            }
        }
#pragma unroll
        for (int p = 0; p < CH / 2; ++p) {
            if (i + 2 * p < w.end) {  // warp-uniform
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma_k8(acc[j], a[4 * p], a[4 * p + 1], a[4 * p + 2], a[4 * p + 3],
                           comp(bv[2 * p], j), comp(bv[2 * p + 1], j));
            }
        }
#pragma unroll
        for (int w = 0; w < CH / 4; ++w) mw[w] = mn[w];
    }
    store_c(c, ldc, m, n, alpha, beta, w.split, w.cvec, w.panel, w.f0, w.t, w.g, acc);
}


// Lean walk with coalesced B (v5, hrpb_spmm_k8sc / k8wsc, docs/kernels/hrpb.md v5): the k8 walk
// in 40 live registers, so 12 thread blocks fit an SM without spills (k8o: 10), and B gathered a
// row per quarter warp.
//  * A step is 2 bricks, single-buffered (12 step registers; k8's double buffer holds 24). Its two
//    32-byte brick records arrive one step early in ONE coalesced load (lane l holds word l % 16 of
//    the pair: lanes 0-7 brick i, 8-15 brick i + 1, lanes 16-31 a copy) and are handed out with 4
//    shuffles per brick, as k8d4 does for 4 bricks; so a step's chain is one round trip (values
//    and B, addresses in registers), as k8's.
//  * B: the MMA's B fragment puts k (the brick column, i.e. the B row) on lane % 4, so a lane
//    loading its own fragment makes every quarter warp (the unit a 128-bit load is served in)
//    touch 4 rows: 16 L1 wavefronts per brick and warp, two thirds of the walk's (ncu, v5 run 1).
//    Here lane l loads row col[l / 8] at features f0 + 4 (l % 8) -- a quarter warp reads 128
//    contiguous bytes of one row, 4 wavefronts -- and just before MMA j component j moves to lane
//    (g, t) from lane 8t + g with one shuffle (2 per MMA).
//  * This lane's B features are a 32-bit offset added to `b` at each load, `lanemask_lt` comes
//    from its special register, the work item is read again for the epilogue, and `ntid.y` and
//    `laneid` are read with asm volatile where they are needed (ptxas otherwise holds them, or
//    the 64-bit record offset, from the start and spills at 40 registers).
// Bits of the lanes below this one (a special register: nothing to hold across the walk).
__device__ __forceinline__ u32 lanemask_lt() {
    u32 r;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r));
    return r;
}

// One lean step: bricks i, i + 1 (< end) from the pair's records in `mw` (lane l: word l % 16);
// lane l's B float4 is row col[l / 8], features fb = f0 + 4 (l % 8) (zeros past n or for a
// sentinel column).
__device__ __forceinline__ Step lean_step(const float* __restrict__ values,
                                          const float* __restrict__ b, u32 ldb, u32 n, u32 i,
                                          u32 end, u32 mw, u32 lane, u32 fb, bool bload,
                                          bool bvec) {
    Step s;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        s.a[2 * q] = 0.0f;
        s.a[2 * q + 1] = 0.0f;
        s.b[q] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i + q < end) {  // warp-uniform
            const u32 lo = __shfl_sync(0xFFFFFFFFu, mw, 8 * q);
            const u32 hi = __shfl_sync(0xFFFFFFFFu, mw, 8 * q + 1);
            const u32 off = __shfl_sync(0xFFFFFFFFu, mw, 8 * q + 2);
            const u32 col = __shfl_sync(0xFFFFFFFFu, mw, 8 * q + 4 + (lane >> 3));
            const u32 below = lanemask_lt();
            if ((lo >> lane) & 1u) s.a[2 * q] = __ldg(values + off + __popc(lo & below));
            if ((hi >> lane) & 1u)
                s.a[2 * q + 1] = __ldg(values + off + __popc(lo) + __popc(hi & below));
            if (col != SENTINEL && bload) {
                const float* p = b + ((u64)col * ldb + fb);
                if (bvec) {
                    s.b[q] = __ldg(reinterpret_cast<const float4*>(p));
                } else {
                    s.b[q].x = __ldg(p);
                    s.b[q].y = fb + 1 < n ? __ldg(p + 1) : 0.0f;
                    s.b[q].z = fb + 2 < n ? __ldg(p + 2) : 0.0f;
                    s.b[q].w = fb + 3 < n ? __ldg(p + 3) : 0.0f;
                }
            }
        }
    }
    return s;
}

// The two records of bricks i, i + 1 (zeros past end): lane l loads word l % 16 (the lane read
// anew from %laneid each time: ptxas otherwise holds its 64-bit offset and spills it at 40).
__device__ __forceinline__ u32 lean_records(const u32* __restrict__ bricks, u32 i, u32 end) {
    u32 l;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
    const u32 wl = l & 15;
    return i + (wl >> 3) < end ? __ldg(bricks + ((u64)i * BRICK_WORDS + wl)) : 0u;
}

// The end of a lean or tight walk: the item read again (a few cached words) instead of held
// through the walk, and lane (g, t)'s accumulators to C.
// SYNC (k8ts): a split panel is not pre-scaled. Its first piece (work flags bit 2) writes
// alpha * acc + beta * C with plain stores and then sets its flag to 1; every other piece (a
// waiter) waits for that flag before it adds with atomics, then counts itself, and the last
// waiter of the (panel, 32 features) pair sets flag and count back to 0. `sync` holds, for
// `slots` split panels and S = ceil(n / 32) slices: the waiters per panel (sync[slot], written
// by the host), then the flags (sync[slots + slot * S + f0 / 32]), then the counts (the flags'
// index + slots * S). Every launch thus leaves them as it found them (zero), so launches need
// no host-side state and a captured CUDA graph may replay one. The first piece's work item comes
// earlier in the list, so its thread block (or warp, for warp items) was dispatched before any
// waiter's (blocks start in index order, the assumption of decoupled look-back scans); a waiter
// waits only after its walk.
template <int IPB, bool SYNC>
__device__ __forceinline__ void finish(HRPB_PARAMS, u32 lane, const float (&acc)[4][4]) {
    WarpItem it;
    warp_item<IPB, true>(work, n, it);
    bool add = it.split;
    u32* flag = nullptr;
    u32* count = nullptr;
    u32 waiters = 0;
    if (SYNC && it.split) {
        const u64 slices = (n + 31) >> 5;
        const u32 slot = it.wflags >> 3;
        waiters = __ldg(sync + slot);
        flag = sync + slots + slot * slices + (u32)(it.f0 >> 5);
        count = flag + slots * slices;
        if (it.wflags & 4u) {
            add = false;  // the first piece stores
        } else {
            if (lane == 0) {
                u32 v;
                for (;;) {
                    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
                    if (v != 0) break;
                    __nanosleep(64);
                }
            }
            __syncwarp();
        }
    }
    store_c(c, ldc, m, n, alpha, beta, add, (flags >> 1) & 1u, it.panel, it.f0, lane & 3,
            lane >> 2, acc);
    if (SYNC && it.split) {
        __syncwarp();
        if (lane == 0) {
            if (!add) {
                // (No waiter: nothing to publish, and nobody would reset the flag.)
                if (waiters != 0) {
                    __threadfence();
                    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(1u) : "memory");
                }
            } else if (atomicAdd(count, 1u) + 1 == waiters) {
                // Every waiter has read the flag: back to zero for the next launch.
                *count = 0;
                asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(0u) : "memory");
            }
        }
    }
}

template <int IPB, bool SYNC = false>
__device__ __forceinline__ void hrpb_spmm_lean(HRPB_PARAMS) {
    WarpItem it;
    if (!warp_item<IPB, true>(work, n, it)) return;  // whole warp
    const u32 begin = it.begin, end = it.end;
    const u32 lane = threadIdx.x;
    const u32 fb = (u32)it.f0 + 4 * (lane & 7);  // this lane's B features (f0 < n < 2^32)
    const bool bload = fb < n;
    const bool bvec = (flags & 1u) && fb + 3 < n;

    float acc[4][4];
    zero_acc(acc);

    u32 mw = lean_records(bricks, begin, end);
    for (u32 i = begin; i < end; i += 2) {
        const Step cur = lean_step(values, b, ldb, n, i, end, mw, lane, fb, bload, bvec);
        // The next step's records, in flight during this step's wait and MMAs.
        mw = lean_records(bricks, i + 2, end);
        // Feature component j of lane (g, t) comes from lane 8t + g, moved just before MMA j
        // (each loaded component dies at its shuffle).
        const u32 src = 8 * (lane & 3) + (lane >> 2);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float b0 = __shfl_sync(0xFFFFFFFFu, comp(cur.b[0], j), src);
            const float b1 = __shfl_sync(0xFFFFFFFFu, comp(cur.b[1], j), src);
            mma_k8(acc[j], cur.a[0], cur.a[1], cur.a[2], cur.a[3], b0, b1);
        }
    }
    finish<IPB, SYNC>(HRPB_ARGS, lane, acc);
}


// Tight walk (v6, hrpb_spmm_k8t / k8ts / k8wtd, docs/kernels/hrpb.md v6): the lean walk's loads
// and shuffles in fewer instructions per brick (145 SASS instructions per step of 2 bricks against
// k8wsc's ~170 on its float4 path; 10 blocks per SM). The v5 walks issue ~95 SASS instructions
// per brick and warp (nvdisasm: per-brick branches around each brick with divergence checks before
// the shuffles, `%tid`, `%lanemask_lt`, `%ctaid.y`, n, flags and pointers re-read inside the loop to
// stay at 40 registers, a float4-or-scalar branch per B load). Here, when the warp's 32 features all
// lie below n and B takes float4 loads (warp-uniform, checked once), the walk has
//  * no per-brick branch: records past the item's end read as an empty brick (pattern 0, sentinel
//    columns), so the odd last brick needs no test; values and B are predicated loads;
//  * the lane's bit, `lanemask_lt`, the shuffle source and a 64-bit B row base (b + fb) held in
//    registers; B's address is one IMAD.WIDE of col by ldb * 4 (ldb < 2^30, checked);
// other warps (a ragged feature tail, unaligned B) take the lean walk unchanged.
// CB: B gathered a row per quarter warp and moved to the MMA lanes by shuffles (as k8wsc); !CB:
// lane (g, t) loads its fragment's row col[t] directly (as k8w: no B shuffles, 16 L1 wavefronts
// per brick instead of 4).
__device__ __forceinline__ u32 tight_records(const u32* __restrict__ bricks, u32 i, u32 end,
                                             u32 wl) {
    // wl = lane % 16: word wl % 8 of brick i + wl / 8; past end an empty brick.
    return i + (wl >> 3) < end ? __ldg(bricks + ((u64)i * BRICK_WORDS + wl))
                               : ((wl & 7) >= 4 ? SENTINEL : 0u);
}

template <int IPB, bool CB, bool SYNC>
__device__ __forceinline__ void hrpb_spmm_tight(HRPB_PARAMS) {
    WarpItem it;
    if (!warp_item<IPB, true>(work, n, it)) return;  // whole warp
    const bool full = (flags & 1u) && it.f0 + 32 <= n && ldb < (1u << 30);  // warp-uniform
    if (!full) {
        hrpb_spmm_lean<IPB, SYNC>(HRPB_ARGS);
        return;
    }
    const u32 begin = it.begin, end = it.end;
    const u32 lane = threadIdx.x;
    const u32 bit = 1u << lane;
    const u32 below = lanemask_lt();
    const u32 wl = lane & 15;
    // This lane's B features and the column of the brick record it reads.
    const u32 fb = (u32)it.f0 + 4 * (CB ? (lane & 7) : (lane >> 2));
    const u32 csel = CB ? (lane >> 3) : (lane & 3);
    const char* bl = reinterpret_cast<const char*>(b + fb);
    const u32 ldb4 = 4 * ldb;
    const u32 src = 8 * (lane & 3) + (lane >> 2);  // CB: lane (g, t) takes lane 8t + g's B

    float acc[4][4];
    zero_acc(acc);

    u32 mw = tight_records(bricks, begin, end, wl);
    for (u32 i = begin; i < end; i += 2) {
        float a[4];
        float4 bv[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const u32 lo = __shfl_sync(0xFFFFFFFFu, mw, 8 * q);
            const u32 hi = __shfl_sync(0xFFFFFFFFu, mw, 8 * q + 1);
            const u32 off = __shfl_sync(0xFFFFFFFFu, mw, 8 * q + 2);
            const u32 col = __shfl_sync(0xFFFFFFFFu, mw, 8 * q + 4 + csel);
            const u32 i0 = off + __popc(lo & below);
            const u32 i1 = off + __popc(lo) + __popc(hi & below);
            a[2 * q] = (lo & bit) ? __ldg(values + i0) : 0.0f;
            a[2 * q + 1] = (hi & bit) ? __ldg(values + i1) : 0.0f;
            bv[q] = col != SENTINEL
                        ? __ldg(reinterpret_cast<const float4*>(bl + (u64)col * ldb4))
                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        mw = tight_records(bricks, i + 2, end, wl);  // the next step's records, in flight now
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float b0 = comp(bv[0], j), b1 = comp(bv[1], j);
            if (CB) {
                b0 = __shfl_sync(0xFFFFFFFFu, b0, src);
                b1 = __shfl_sync(0xFFFFFFFFu, b1, src);
            }
            mma_k8(acc[j], a[0], a[1], a[2], a[3], b0, b1);
        }
    }
    finish<IPB, SYNC>(HRPB_ARGS, lane, acc);
}


extern "C" __global__ void __launch_bounds__(128, HRPB_MIN_BLOCKS) hrpb_spmm_k4(HRPB_PARAMS) {
    hrpb_spmm<false, 1>(HRPB_ARGS);
}

extern "C" __global__ void __launch_bounds__(128, HRPB_MIN_BLOCKS) hrpb_spmm_k8(HRPB_PARAMS) {
    hrpb_spmm<true, 1>(HRPB_ARGS);
}

extern "C" __global__ void __launch_bounds__(128, HRPB_MIN_BLOCKS) hrpb_spmm_k8w(HRPB_PARAMS) {
    hrpb_spmm<true, 4>(HRPB_ARGS);
}

extern "C" __global__ void __launch_bounds__(128, HRPB_MIN_BLOCKS) hrpb_spmm_k8d4(HRPB_PARAMS) {
    hrpb_spmm_deep<4, 1>(HRPB_ARGS);
}

extern "C" __global__ void __launch_bounds__(128, HRPB_OCC_BLOCKS) hrpb_spmm_k8o(HRPB_PARAMS) {
    hrpb_spmm<true, 1>(HRPB_ARGS);
}

#ifndef HRPB_LEAN_BLOCKS
#define HRPB_LEAN_BLOCKS 12
#endif
extern "C" __global__ void __launch_bounds__(128, HRPB_LEAN_BLOCKS) hrpb_spmm_k8sc(HRPB_PARAMS) {
    hrpb_spmm_lean<1>(HRPB_ARGS);
}

extern "C" __global__ void __launch_bounds__(128, HRPB_LEAN_BLOCKS) hrpb_spmm_k8wsc(HRPB_PARAMS) {
    hrpb_spmm_lean<4>(HRPB_ARGS);
}

#ifndef HRPB_TIGHT_BLOCKS
#define HRPB_TIGHT_BLOCKS 10
#endif
extern "C" __global__ void __launch_bounds__(128, HRPB_TIGHT_BLOCKS) hrpb_spmm_k8t(HRPB_PARAMS) {
    hrpb_spmm_tight<1, true, false>(HRPB_ARGS);
}

// k8t without the pre-scale launch: split panels through the flag handshake of `finish`.
extern "C" __global__ void __launch_bounds__(128, HRPB_TIGHT_BLOCKS) hrpb_spmm_k8ts(HRPB_PARAMS) {
    hrpb_spmm_tight<1, true, true>(HRPB_ARGS);
}

extern "C" __global__ void __launch_bounds__(128, HRPB_TIGHT_BLOCKS) hrpb_spmm_k8wtd(HRPB_PARAMS) {
    hrpb_spmm_tight<4, false, false>(HRPB_ARGS);
}
