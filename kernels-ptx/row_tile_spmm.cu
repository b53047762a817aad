// Row-tile kernels tc16_spmm_tf32 / tc32_spmm_tf32: windows of 16 * MT rows (MT = 1, 2; row-tile TCF,
// tcsparse-formats' rowtile: ME-TCF's compacted 8-column blocks) on the same m16n8k8 TF32 MMA, operands
// NOT swapped: each 16x8 row tile of the sparse block is an A-operand (16 rows x 8 slots), the 8
// gathered B rows are the 8x8 B-operand (8 slots x 8 features), the accumulators are C (16 rows x 8
// features per MMA). One block's 8 gathered B rows serve 16 * MT rows of A instead of Acc-SpMM's 8:
// where the rows of a window share most columns (bands, clusters), B is gathered 2 * MT times less
// often per nonzero.
//
// A block has 2 * MT masks (mask i: local rows 8i..8i+7, bit = (row % 8) * 8 + slot), values in bit
// order (mask 0's bits, then mask 1's, ...). With g = lane / 4, t = lane % 4, row tile i:
// a0 = T[16i+g][t], a1 = T[16i+g+8][t], a2 = T[16i+g][t+4], a3 = T[16i+g+8][t+4];
// b0 = B[col[t]][f], b1 = B[col[t+4]][f] with MMA j's column n = g mapped to feature f0 + 4g + j, so a
// lane loads one float4 per gathered row; c0 (row g, n = 2t) of MMA j is feature f0 + 8t + j, c1 is
// f0 + 8t + 4 + j: each lane stores 8 consecutive features of rows 16i + g and 16i + g + 8.
//
// Work: as acc_spmm_tf32's: thread block x executes work[x] = {window_begin, window_end, block_begin,
// block_end} (windows [window_begin, window_end), of their blocks only [block_begin, block_end)). A
// window whose window_split flag is 0 is owned by one thread block and written with plain stores
// (alpha * acc + beta * C, C not read when beta == 0); a split window's rows were pre-scaled by beta
// (acc_spmm_prescale) and every thread block that touched it adds alpha * acc with vector atomics
// (red.global.add.v4.f32, sm_90) where 4 features are aligned and in range, scalar atomicAdd else.
//
// Shared device helpers (MMA step, B-row gather, tile decode, alpha/beta stores, vector atomics) are in
// tc_common.cuh; the beta pre-scale of split windows is acc_spmm_prescale in acc_spmm.cu. Generated
// PTX lives in row_tile_spmm.ptx (`cargo xtask ptx`); host side: crates/gpu/src/spmm/row_tile/.
//
// Other arithmetic (entries at the end of this file): the masked kernel is a template on RtArith,
// TF32 (the entries above), 3xTF32 (tc16/tc32_spmm_3xtf32) and f16 / bf16 (tc16/tc32_spmm_f16,
// _bf16: A's values, B and C in the 16-bit type, m16n8k8 f16 / bf16 MMAs, f32 accumulation).

#include "tc_common.cuh"

template <int MT>
struct MetaRT {
    u32 col_lo, col_hi;
    u64 m[2 * MT];
    u32 vo;
};

// V: the element of A's values and of B (float; u16 for the f16 and bf16 entries).
template <int MT, typename V = float>
struct StageRT {
    V blo[4];    // B[col[t]][f0 + 4g + q]
    V bhi[4];    // B[col[t + 4]][f0 + 4g + q]
    V a[MT][4];  // a0..a3 of every row tile
};

// The arithmetic of a row-tile entry: V = the element of A's values, B and C (float or the raw
// bits of a 16-bit type), kind = how a block's MMAs run.
enum RtKind { RT_TF32 = 0, RT_TF32X3 = 1, RT_F16 = 2, RT_BF16 = 3 };
template <bool H>
struct RtElem {
    typedef float V;
};
template <>
struct RtElem<true> {
    typedef u16 V;
};
template <RtKind K>
struct RtArith {
    typedef typename RtElem<K == RT_F16 || K == RT_BF16>::V V;
    static constexpr RtKind kind = K;
    static constexpr bool half = K == RT_F16 || K == RT_BF16;
};

template <int MT>
__device__ __forceinline__ MetaRT<MT> meta_rt(const u32* __restrict__ a2x,
                                             const u64* __restrict__ masks,
                                             const u32* __restrict__ bvo, u32 blk, u32 t) {
    MetaRT<MT> m;
    m.col_lo = __ldg(a2x + 8ull * blk + t);
    m.col_hi = __ldg(a2x + 8ull * blk + t + 4);
#pragma unroll
    for (int i = 0; i < 2 * MT; ++i) m.m[i] = __ldg(masks + 2ull * MT * blk + i);
    m.vo = __ldg(bvo + blk);
    return m;
}

template <int MT, typename V>
__device__ __forceinline__ void stage_rt_zero(StageRT<MT, V>& s) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        s.blo[q] = V(0);
        s.bhi[q] = V(0);
#pragma unroll
        for (int i = 0; i < MT; ++i) s.a[i][q] = V(0);
    }
}

// One block's MMAs for MT row tiles: a[i] = this lane's TF32 A fragments of row tile i, blo/bhi its
// B values (features f0 + 4g + j of rows col[t] and col[t + 4]), converted here; acc[i][j] is MMA j
// of row tile i (feature group j).
template <int MT>
__device__ __forceinline__ void mma_row_tiles(float (&acc)[MT][4][4], const u32 (&a)[MT][4],
                                              const float (&blo)[4], const float (&bhi)[4]) {
    u32 b0[4], b1[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        b0[j] = to_tf32(blo[j]);
        b1[j] = to_tf32(bhi[j]);
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            mma_m16n8k8_tf32(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b0[j], b1[j]);
        }
    }
}

// One block's MMAs in 3xTF32: every A and B value split into big + small (split_tf32), and
// acc += a_small * b_big + a_big * b_small + a_big * b_big (the small products first, as SpAMM).
template <int MT>
__device__ __forceinline__ void mma_row_tiles_3xtf32(float (&acc)[MT][4][4],
                                                     const float (&av)[MT][4],
                                                     const float (&blo)[4], const float (&bhi)[4]) {
    u32 b0[4], b1[4], s0[4], s1[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        split_tf32(blo[j], b0[j], s0[j]);
        split_tf32(bhi[j], b1[j], s1[j]);
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        u32 a[4], as[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) split_tf32(av[i][q], a[q], as[q]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            mma_m16n8k8_tf32(acc[i][j], as[0], as[1], as[2], as[3], b0[j], b1[j]);
            mma_m16n8k8_tf32(acc[i][j], a[0], a[1], a[2], a[3], s0[j], s1[j]);
            mma_m16n8k8_tf32(acc[i][j], a[0], a[1], a[2], a[3], b0[j], b1[j]);
        }
    }
}

// One block's MMAs on f16 or bf16 (m16n8k8, f32 accumulate). The 8 slots of a block are the MMA's
// k in the order k = 2t <-> slot t, k = 2t + 1 <-> slot t + 4 (any order works where A and B
// agree): lane (g, t) then needs the same tile values and B rows as the TF32 kernel, only packed
// two to a register: A {T[g][t], T[g][t+4]} and {T[g+8][t], T[g+8][t+4]}, B {B[col[t]][f],
// B[col[t+4]][f]}; C fragments are TF32's.
template <int MT, bool BF>
__device__ __forceinline__ void mma_row_tiles_half(float (&acc)[MT][4][4], const u16 (&av)[MT][4],
                                                   const u16 (&blo)[4], const u16 (&bhi)[4]) {
    u32 b[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = pack_half2(blo[j], bhi[j]);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const u32 a01 = pack_half2(av[i][0], av[i][2]);  // row g: slots t, t + 4
        const u32 a23 = pack_half2(av[i][1], av[i][3]);  // row g + 8
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (BF) {
                mma_m16n8k8_bf16(acc[i][j], a01, a23, b[j]);
            } else {
                mma_m16n8k8_f16(acc[i][j], a01, a23, b[j]);
            }
        }
    }
}

template <int MT>
__device__ __forceinline__ void zero_acc(float (&acc)[MT][4][4]) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;
}

// Visits window w's accumulators four features at a time: f(dst, v, vec, fb) gets v = alpha * acc
// for features fb .. fb + 3 of one row, dst = &C[row][fb], and vec = whether the float4 path may
// be used (aligned, all four features < N). Rows >= M are skipped.
// acc[i][j][0] -> (row 16i + g, feature f0 + 8t + j), [1] -> (16i + g, f0 + 8t + 4 + j),
// [2] -> (16i + g + 8, f0 + 8t + j), [3] -> (16i + g + 8, f0 + 8t + 4 + j).
template <int MT, typename E, typename F>
__device__ __forceinline__ void visit_row_tiles(const float (&acc)[MT][4][4],
                                                E* __restrict__ C, u32 ldc, u32 M, u32 N,
                                                u32 w, u32 g, u32 t, u32 f0, float alpha,
                                                u32 flags, F&& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const u32 row = 16 * MT * w + 16 * i + g + 8 * half;
            if (row >= M) continue;
            E* dst = C + (u64)row * ldc + f0 + 8 * t;
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const u32 fb = f0 + 8 * t + 4 * k;
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) v[j] = alpha * acc[i][j][2 * half + k];
                f(dst + 4 * k, v, (flags & 1u) && fb + 3 < N, fb);
            }
        }
    }
}

// Writes window w's accumulators: C = alpha * acc + beta * C (C not read when beta == 0).
template <int MT>
__device__ __forceinline__ void store_row_tiles(const float (&acc)[MT][4][4], float* __restrict__ C,
                                                u32 ldc, u32 M, u32 N, u32 w, u32 g, u32 t, u32 f0,
                                                float alpha, float beta, u32 flags) {
    visit_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, flags,
                        [&](float* d, const float (&v)[4], bool vec, u32 fb) {
                            if (vec) {
                                store_axpby4(reinterpret_cast<float4*>(d),
                                             make_float4(v[0], v[1], v[2], v[3]), beta);
                                return;
                            }
#pragma unroll
                            for (int j = 0; j < 4; ++j) {
                                if (fb + j < N) store_axpby(d + j, v[j], beta);
                            }
                        });
}

// Adds window w's partial sums to C with atomics (a split window, pre-scaled by beta): one
// red.global.add.v4.f32 (sm_90) per four features on the float4 path, scalar atomicAdd else.
template <int MT>
__device__ __forceinline__ void add_row_tiles(const float (&acc)[MT][4][4], float* __restrict__ C,
                                              u32 ldc, u32 M, u32 N, u32 w, u32 g, u32 t, u32 f0,
                                              float alpha, u32 flags) {
    visit_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, flags,
                        [&](float* d, const float (&v)[4], bool vec, u32 fb) {
                            add4_atomic(d, v, fb, N, vec);
                        });
}

// store_row_tiles for C in f16 (BF = false) or bf16 (BF = true): C = alpha * acc + beta * C in
// f32, beta * C read in the type (C not read when beta == 0), rounded to the type to nearest
// (beyond its range +-inf, as a cast); one 8-byte access per four features on the vector path.
template <int MT, bool BF>
__device__ __forceinline__ void store_row_tiles_half(const float (&acc)[MT][4][4],
                                                     u16* __restrict__ C, u32 ldc, u32 M, u32 N,
                                                     u32 w, u32 g, u32 t, u32 f0, float alpha,
                                                     float beta, u32 flags) {
    visit_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, flags,
                        [&](u16* d, const float (&v)[4], bool vec, u32 fb) {
                            store4_half<BF>(d, v, vec, fb, N, beta);
                        });
}

// Thread block x's share of a work schedule (see "Work" above).
struct RowTileWork {
    u32 wb, we;  // windows [wb, we)
    u32 bb, be;  // blocks [bb, be)
};

__device__ __forceinline__ RowTileWork row_tile_work(const u32* __restrict__ work) {
    RowTileWork r;
    r.wb = __ldg(work + 4ull * blockIdx.x + 0);
    r.we = __ldg(work + 4ull * blockIdx.x + 1);
    r.bb = __ldg(work + 4ull * blockIdx.x + 2);
    r.be = __ldg(work + 4ull * blockIdx.x + 3);
    return r;
}

// Writes window w's accumulators: plain stores when the window is this thread block's alone,
// atomic adds when it is split (nothing when this thread block had none of its blocks): into C
// after the beta pre-scale (f32 entries), or into the window's f32 scratch rows (f16 / bf16
// entries: a 16-bit C cannot take partial sums).
template <int MT, typename Ar = RtArith<RT_TF32>>
__device__ __forceinline__ void write_row_tiles(const float (&acc)[MT][4][4],
                                                const unsigned char* __restrict__ window_split,
                                                bool touched, typename Ar::V* __restrict__ C,
                                                u32 ldc, u32 M, u32 N, u32 w, u32 g, u32 t, u32 f0,
                                                float alpha, float beta, u32 flags,
                                                const SplitScratch& ss) {
    if constexpr (Ar::half) {
        if (__ldg(window_split + w) == 0) {
            store_row_tiles_half<MT, Ar::kind == RT_BF16>(acc, C, ldc, M, N, w, g, t, f0, alpha,
                                                          beta, flags);
        } else if (touched) {
            // Scratch rows of slot s stand for window w's rows; those at or beyond M are skipped.
            const u32 s = split_slot(ss, w);
            const u32 rows = min(16u * MT, M - 16u * MT * w);
            add_row_tiles<MT>(acc, ss.rows, N, 16u * MT * s + rows, N, s, g, t, f0, alpha,
                              (N % 4u == 0u) ? 1u : 0u);
        }
    } else {
        if (__ldg(window_split + w) == 0) {
            store_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, beta, flags);
        } else if (touched) {
            add_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, flags);
        }
    }
}

// Walks thread block wk's windows: per window w, acc is zeroed, step(acc, blk) runs for each of
// its blocks in [bb, be), and the window's rows are written (write_row_tiles). The masked and the
// dense kernels differ only in their step (software pipeline of loads and MMAs).
template <int MT, typename Ar = RtArith<RT_TF32>, typename Step>
__device__ __forceinline__ void walk_row_tile_windows(const u32* __restrict__ rwo,
                                                      const RowTileWork& wk, Step&& step,
                                                      const unsigned char* __restrict__ window_split,
                                                      typename Ar::V* __restrict__ C, u32 ldc,
                                                      u32 M, u32 N,
                                                      u32 g, u32 t, u32 f0, float alpha, float beta,
                                                      u32 flags, const SplitScratch& ss) {
    u32 blk = wk.bb;
    u32 next_rwo = __ldg(rwo + wk.wb + 1);
    for (u32 w = wk.wb; w < wk.we; ++w) {
        const u32 wend = min(next_rwo, wk.be);
        if (w + 1 < wk.we) next_rwo = __ldg(rwo + w + 2);
        const bool touched = blk < wend;
        float acc[MT][4][4];
        zero_acc<MT>(acc);
        for (; blk < wend; ++blk) step(acc, blk);
        write_row_tiles<MT, Ar>(acc, window_split, touched, C, ldc, M, N, w, g, t, f0, alpha,
                                beta, flags, ss);
    }
}

// This lane's place in the warp's 32 features of C: lane, fragment row g = lane / 4 and column
// t = lane % 4, and the warp's first feature f0.
struct RowTileLane {
    u32 lane, g, t, f0;
};

__device__ __forceinline__ RowTileLane row_tile_lane() {
    RowTileLane l;
    l.lane = threadIdx.x & 31;
    const u32 warp = threadIdx.x >> 5;
    l.g = l.lane >> 2;
    l.t = l.lane & 3;
    l.f0 = blockIdx.y * blockDim.x + warp * 32;
    return l;
}

// The masked kernel of arithmetic Ar (TF32, 3xTF32, f16, bf16): A's values, B and C in Ar::V.
template <int MT, typename Ar = RtArith<RT_TF32>>
__device__ __forceinline__ void row_tile_spmm(const u32* __restrict__ rwo,
                                              const u32* __restrict__ bvo,
                                              const u32* __restrict__ a2x,
                                              const u64* __restrict__ masks,
                                              const typename Ar::V* __restrict__ values,
                                              const u32* __restrict__ work,
                                              const unsigned char* __restrict__ window_split,
                                              const typename Ar::V* __restrict__ B,
                                              u32 ldb, typename Ar::V* __restrict__ C, u32 ldc,
                                              u32 M, u32 N, float alpha, float beta, u32 flags,
                                              const SplitScratch& ss) {
    typedef typename Ar::V V;
    const RowTileLane l = row_tile_lane();
    const u32 lane = l.lane, g = l.g, t = l.t, f0 = l.f0;
    if (f0 >= N) return;  // warp-uniform; no barriers in this kernel
    const u32 fl = f0 + 4 * g;  // first feature this lane loads
    bool qok[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) qok[q] = fl + q < N;
    const bool vec_load = (flags & 1u) && qok[3];
    const u32 p0 = 8 * g + t;
    const u64 below0 = (1ull << p0) - 1ull;
    const u64 below1 = (1ull << (p0 + 4)) - 1ull;

    const RowTileWork wk = row_tile_work(work);
    const u32 bb = wk.bb, be = wk.be;
    if (wk.wb >= wk.we) return;

    auto load = [&](const MetaRT<MT>& m, StageRT<MT, V>& s) {
        load_b_rows(B, ldb, fl, m.col_lo, m.col_hi, qok, vec_load, s.blo, s.bhi);
        u32 base = m.vo;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const u64 lo = m.m[2 * i], hi = m.m[2 * i + 1];
            const u32 base_hi = base + __popcll(lo);
            s.a[i][0] = masked_value(values, base, lo, p0, below0);
            s.a[i][2] = masked_value(values, base, lo, p0 + 4, below1);
            s.a[i][1] = masked_value(values, base_hi, hi, p0, below0);
            s.a[i][3] = masked_value(values, base_hi, hi, p0 + 4, below1);
            base = base_hi + __popcll(hi);
        }
    };

    StageRT<MT, V> cur;
    stage_rt_zero(cur);
    MetaRT<MT> m_next;
    m_next.col_lo = m_next.col_hi = SENTINEL;
#pragma unroll
    for (int i = 0; i < 2 * MT; ++i) m_next.m[i] = 0;
    m_next.vo = 0;
    if (bb < be) load(meta_rt<MT>(a2x, masks, bvo, bb, t), cur);
    if (bb + 1 < be) m_next = meta_rt<MT>(a2x, masks, bvo, bb + 1, t);

    auto step = [&](float (&acc)[MT][4][4], u32 blk) {
        StageRT<MT, V> nxt;
        stage_rt_zero(nxt);
        if (blk + 1 < be) load(m_next, nxt);
        if (blk + 2 < be) m_next = meta_rt<MT>(a2x, masks, bvo, blk + 2, t);
        if constexpr (Ar::kind == RT_TF32) {
            u32 a[MT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int q = 0; q < 4; ++q) a[i][q] = to_tf32(cur.a[i][q]);
            mma_row_tiles<MT>(acc, a, cur.blo, cur.bhi);
        } else if constexpr (Ar::kind == RT_TF32X3) {
            mma_row_tiles_3xtf32<MT>(acc, cur.a, cur.blo, cur.bhi);
        } else {
            mma_row_tiles_half<MT, Ar::kind == RT_BF16>(acc, cur.a, cur.blo, cur.bhi);
        }
        cur = nxt;
    };
    walk_row_tile_windows<MT, Ar>(rwo, wk, step, window_split, C, ldc, M, N, g, t, f0, alpha,
                                  beta, flags, ss);
}

#define ROW_TILE_PARAMS BITTCF_SPMM_PARAMS(a2x, masks)
#define ROW_TILE_ARGS \
    rwo, bvo, a2x, masks, values, work, window_split, B, ldb, C, ldc, M, N, alpha, beta, flags
// The f32 entries' split windows go through the beta pre-scale and C: no scratch.
#define NO_SPLIT_SCRATCH (SplitScratch{nullptr, 0u, nullptr})

// At most 64 registers (4 resident blocks of 256 threads): 32 warps per SM, as for acc_spmm_tf32_reg.
extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, 4) tc16_spmm_tf32(ROW_TILE_PARAMS) {
    row_tile_spmm<1>(ROW_TILE_ARGS, NO_SPLIT_SCRATCH);
}

// Twice the accumulators and tile values: TC32_MIN_BLOCKS resident blocks of 256 threads.
#ifndef TC32_MIN_BLOCKS
#define TC32_MIN_BLOCKS 3
#endif
#ifndef TC32D_MIN_BLOCKS
#define TC32D_MIN_BLOCKS 3
#endif
extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, TC32_MIN_BLOCKS)
    tc32_spmm_tf32(ROW_TILE_PARAMS) {
    row_tile_spmm<2>(ROW_TILE_ARGS, NO_SPLIT_SCRATCH);
}

// ---------------------------------------------------------------------------------------------------
// Dense-tile row-tile kernels tc16d_spmm_tf32 / tc32d_spmm_tf32: the same MMAs, windows and B gathers
// as tc16 / tc32, but each block's 16 * MT x 8 tile is stored dense (zeros included), in MMA
// fragment order and already rounded to TF32 on the host: lane L of row tile i finds its
// a0..a3 = T[16i+g][t], T[16i+g+8][t], T[16i+g][t+4], T[16i+g+8][t+4] as float4 frag[(32 blk + L) MT
// + i], so a warp reads a block's tile as 512 * MT contiguous bytes and needs no masks, no value
// offsets and no popcounts. It moves 4 B per tile slot instead of 4 B per nonzero plus the masks: the
// host offers it only where tiles are dense enough (RowTileKernel docs in crates/gpu).

// The dense-tile entries' parameters (the register and the TMA kernels take the same).
#define ROW_TILE_DENSE_PARAMS                                                                  \
    const u32 *__restrict__ rwo, const u32 *__restrict__ a2x, const float4 *__restrict__ frag, \
        const u32 *__restrict__ work, const unsigned char *__restrict__ window_split,          \
        const float *__restrict__ B, u32 ldb, float *__restrict__ C, u32 ldc, u32 M, u32 N,   \
        float alpha, float beta, u32 flags

template <int MT>
__device__ __forceinline__ void row_tile_dense_spmm(ROW_TILE_DENSE_PARAMS) {
    const RowTileLane l = row_tile_lane();
    const u32 lane = l.lane, g = l.g, t = l.t, f0 = l.f0;
    if (f0 >= N) return;  // warp-uniform; no barriers in this kernel
    const u32 fl = f0 + 4 * g;
    bool qok[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) qok[q] = fl + q < N;
    const bool vec_load = (flags & 1u) && qok[3];

    const RowTileWork wk = row_tile_work(work);
    const u32 bb = wk.bb, be = wk.be;
    if (wk.wb >= wk.we) return;

    const float4* __restrict__ frag_lane = frag + lane * MT;  // this lane's fragments of block 0
    // Stage of one block: this lane's B values and tile fragments.
    struct Stage {
        float blo[4], bhi[4];
        float4 a[MT];
    };
    auto load = [&](u32 blk, u32 col_lo, u32 col_hi, Stage& s) {
        load_b_rows(B, ldb, fl, col_lo, col_hi, qok, vec_load, s.blo, s.bhi);
#pragma unroll
        for (int i = 0; i < MT; ++i) s.a[i] = __ldg(frag_lane + (u64)blk * (32 * MT) + i);
    };
    auto zero = [&](Stage& s) {
#pragma unroll
        for (int q = 0; q < 4; ++q) s.blo[q] = s.bhi[q] = 0.0f;
#pragma unroll
        for (int i = 0; i < MT; ++i) s.a[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };

    Stage cur;
    zero(cur);
    u32 nlo = SENTINEL, nhi = SENTINEL;  // column ids of block blk + 1
    if (bb < be) load(bb, __ldg(a2x + 8ull * bb + t), __ldg(a2x + 8ull * bb + t + 4), cur);
    if (bb + 1 < be) {
        nlo = __ldg(a2x + 8ull * (bb + 1) + t);
        nhi = __ldg(a2x + 8ull * (bb + 1) + t + 4);
    }

    auto step = [&](float (&acc)[MT][4][4], u32 blk) {
        Stage nxt;
        if (blk + 1 < be) {
            load(blk + 1, nlo, nhi, nxt);
        } else {
            zero(nxt);
        }
        if (blk + 2 < be) {
            nlo = __ldg(a2x + 8ull * (blk + 2) + t);
            nhi = __ldg(a2x + 8ull * (blk + 2) + t + 4);
        }
        // Already TF32 (rounded on the host): the bits go to the MMA as they are.
        u32 a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            a[i][0] = __float_as_uint(cur.a[i].x);
            a[i][1] = __float_as_uint(cur.a[i].y);
            a[i][2] = __float_as_uint(cur.a[i].z);
            a[i][3] = __float_as_uint(cur.a[i].w);
        }
        mma_row_tiles<MT>(acc, a, cur.blo, cur.bhi);
        cur = nxt;
    };
    walk_row_tile_windows<MT>(rwo, wk, step, window_split, C, ldc, M, N, g, t, f0, alpha, beta,
                              flags, NO_SPLIT_SCRATCH);
}

// One entry NAME over the dense-tile parameters, running BODY (a row_tile_dense*_spmm<MT>) with
// __launch_bounds__(THREADS, MIN_BLOCKS).
#define ROW_TILE_DENSE_ENTRY_OF(NAME, THREADS, MIN_BLOCKS, BODY)                                \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                          \
        NAME(ROW_TILE_DENSE_PARAMS) {                                                           \
        BODY(rwo, a2x, frag, work, window_split, B, ldb, C, ldc, M, N, alpha, beta, flags);     \
    }

// One dense-tile entry NAME: MT row tiles of 16 rows per window (1: tc16d, 2: tc32d), MIN_BLOCKS
// resident thread blocks for __launch_bounds__.
#define ROW_TILE_DENSE_ENTRY(NAME, MIN_BLOCKS, MT) \
    ROW_TILE_DENSE_ENTRY_OF(NAME, 32 * MAX_WARPS, MIN_BLOCKS, row_tile_dense_spmm<MT>)

ROW_TILE_DENSE_ENTRY(tc16d_spmm_tf32, 4, 1)
ROW_TILE_DENSE_ENTRY(tc32d_spmm_tf32, TC32D_MIN_BLOCKS, 2)


// Dense-tile build on the device (a plan-cache hit, RowTileDevice::build_dense and
// build_dense_derived in crates/gpu/src/spmm/row_tile.rs): scatters the nonzeros of a CSR matrix
// given in its ORIGINAL order into the fragment-order tiles of its prepared layout, whose window
// prefix rwo and block columns a2x (per window: sorted unique prepared columns, SENTINEL-padded)
// are given. Prepared row r is input row old_row[r] (identity when null), input column c is
// prepared column new_col[c] (identity when null). Each value is rounded to TF32 as the host's
// fragment_tiles does (bit for bit: carry into bit 13, clear bits 0-12; not finite: unchanged) and
// stored where fragment_tiles puts tile entry T[row][slot]: block j, lane 4g + t, row tile i holds
// T[16i+g][t], T[16i+g+8][t], T[16i+g][t+4], T[16i+g+8][t+4] at ((32j + lane)·MT + i)·4. frag must
// be zeroed. A nonzero whose column is missing from its window's columns (a skeleton that does not
// belong to this matrix) is skipped and counted in *missing. One warp per prepared row, lanes over
// its nonzeros; grid-stride over rows.
extern "C" __global__ void row_tile_dense_build(const u32* __restrict__ indptr,
                                                const u32* __restrict__ indices,
                                                const float* __restrict__ values, u32 rows,
                                                const u32* __restrict__ old_row,
                                                const u32* __restrict__ new_col,
                                                const u32* __restrict__ rwo,
                                                const u32* __restrict__ a2x, u32 window_rows,
                                                float* __restrict__ frag, u32* __restrict__ missing) {
    const u32 lane = threadIdx.x & 31;
    const u32 warps = (gridDim.x * blockDim.x) >> 5;
    const u32 mt = window_rows / 16;
    u32 misses = 0;
    for (u32 nr = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; nr < rows; nr += warps) {
        const u32 r = old_row ? __ldg(old_row + nr) : nr;
        const u32 w = nr / window_rows, lr = nr % window_rows;
        const u32 lo = __ldg(rwo + w) * 8u, hi = __ldg(rwo + w + 1) * 8u;
        const u32 i = lr / 16, g = lr % 8, row_hi = (lr % 16) / 8;
        const u32 s = __ldg(indptr + r), e = __ldg(indptr + r + 1);
        for (u32 k = s + lane; k < e; k += 32) {
            const u32 c0 = __ldg(indices + k);
            const u32 c = new_col ? __ldg(new_col + c0) : c0;
            u32 a = lo, b = hi;  // lower bound of c in a2x[lo, hi)
            while (a < b) {
                const u32 m = a + (b - a) / 2;
                if (__ldg(a2x + m) < c) a = m + 1; else b = m;
            }
            if (a == hi || __ldg(a2x + a) != c) {
                ++misses;
                continue;
            }
            const u32 j = a / 8, slot = a % 8, t = slot % 4, col_hi = slot / 4;
            const u64 at = (u64)j * window_rows * 8 + 4ull * ((4 * g + t) * mt + i) + row_hi + 2 * col_hi;
            const float v = __ldg(values + k);
            const u32 bits = __float_as_uint(v);
            frag[at] = isfinite(v) ? __uint_as_float((bits + 0x1000u) & 0xFFFFE000u) : v;
        }
    }
    if (misses) atomicAdd(missing, misses);
}

// Row-tile skeleton on the device (RowTileDevice::build_dense_derived): the sorted unique columns
// of every window of the prepared matrix, whose row r is input row old_row[r] (identity when null)
// with its columns unchanged (so each row's columns are sorted, a CSR invariant). One warp per
// window, lane l on the window's row l (lanes past window_rows or the last row idle): each step
// takes the smallest column at the heads of the lanes' rows (__reduce_min_sync), and the lanes
// holding it step past it, so the window's columns come out sorted and once each. With a2x null,
// counts[w] = the window's unique columns; else they are written to a2x[8·rwo[w] ...] (never past
// 8·rwo[w+1]) and the rest of the window's last block is SENTINEL. Grid-stride over windows.
extern "C" __global__ void row_tile_skeleton(const u32* __restrict__ indptr,
                                             const u32* __restrict__ indices, u32 rows,
                                             const u32* __restrict__ old_row, u32 window_rows,
                                             u32 windows, u32* __restrict__ counts,
                                             const u32* __restrict__ rwo, u32* __restrict__ a2x) {
    const u32 lane = threadIdx.x & 31;
    const u32 warps = (gridDim.x * blockDim.x) >> 5;
    for (u32 w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < windows; w += warps) {
        const u32 r = w * window_rows + lane;
        u32 p = 0, e = 0;
        if (lane < window_rows && r < rows) {
            const u32 o = old_row ? __ldg(old_row + r) : r;
            p = __ldg(indptr + o);
            e = __ldg(indptr + o + 1);
        }
        u32 head = p < e ? __ldg(indices + p) : SENTINEL;
        const u32 base = a2x ? __ldg(rwo + w) * 8u : 0u;
        const u32 cap = a2x ? __ldg(rwo + w + 1) * 8u - base : 0u;
        u32 k = 0;
        for (;;) {
            const u32 m = __reduce_min_sync(0xFFFFFFFFu, head);
            if (m == SENTINEL) break;
            if (lane == 0 && k < cap) a2x[base + k] = m;
            ++k;
            if (head == m) {
                ++p;
                head = p < e ? __ldg(indices + p) : SENTINEL;
            }
        }
        if (a2x) {
            for (u32 q = k + lane; q < cap; q += 32) a2x[base + q] = SENTINEL;
        } else if (lane == 0) {
            counts[w] = k;
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The masked kernels in other arithmetic, same parameters (pointers to the element type):
// tc16/tc32_spmm_3xtf32 (f32 A, B, C; 3xTF32 MMAs, f32-grade products; split windows as TF32's),
// tc16/tc32_spmm_f16 and _bf16 (A's values, B and C in f16 / bf16 bits, m16n8k8 f16 / bf16 MMAs
// with f32 accumulation; split windows add into the f32 scratch rows given after the common
// parameters, see SplitScratch, and row_tile_split_finish_f16 / _bf16 write them into C).
#define ROW_TILE_TYPED_PARAMS(V)                                                                 \
    const u32 *__restrict__ rwo, const u32 *__restrict__ bvo, const u32 *__restrict__ a2x,      \
        const u64 *__restrict__ masks, const V *__restrict__ values,                            \
        const u32 *__restrict__ work, const unsigned char *__restrict__ window_split,           \
        const V *__restrict__ B, u32 ldb, V *__restrict__ C, u32 ldc, u32 M, u32 N,             \
        float alpha, float beta, u32 flags

#ifndef TC32X3_MIN_BLOCKS
#define TC32X3_MIN_BLOCKS 2
#endif
// One masked entry NAME in arithmetic ARITH: MT row tiles of 16 rows per window (1: tc16, 2: tc32),
// MIN_BLOCKS resident thread blocks for __launch_bounds__, V the element of values, B and C.
#define ROW_TILE_TYPED_ENTRY(NAME, MIN_BLOCKS, MT, V, ARITH)                                     \
    extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, MIN_BLOCKS)                   \
        NAME(ROW_TILE_TYPED_PARAMS(V)) {                                                        \
        row_tile_spmm<MT, RtArith<ARITH>>(ROW_TILE_ARGS, NO_SPLIT_SCRATCH);                     \
    }
// The same for f16 / bf16, with the split windows' scratch (SplitScratch) after the common
// parameters.
#define ROW_TILE_HALF_ENTRY(NAME, MIN_BLOCKS, MT, ARITH)                                         \
    extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, MIN_BLOCKS)                   \
        NAME(ROW_TILE_TYPED_PARAMS(u16), const u32 *__restrict__ split_ids, u32 split_count,    \
             float *__restrict__ scratch) {                                                     \
        row_tile_spmm<MT, RtArith<ARITH>>(ROW_TILE_ARGS,                                        \
                                          SplitScratch{split_ids, split_count, scratch});       \
    }

ROW_TILE_TYPED_ENTRY(tc16_spmm_3xtf32, 3, 1, float, RT_TF32X3)
ROW_TILE_TYPED_ENTRY(tc32_spmm_3xtf32, TC32X3_MIN_BLOCKS, 2, float, RT_TF32X3)
ROW_TILE_HALF_ENTRY(tc16_spmm_f16, 4, 1, RT_F16)
ROW_TILE_HALF_ENTRY(tc32_spmm_f16, TC32_MIN_BLOCKS, 2, RT_F16)
ROW_TILE_HALF_ENTRY(tc16_spmm_bf16, 4, 1, RT_BF16)
ROW_TILE_HALF_ENTRY(tc32_spmm_bf16, TC32_MIN_BLOCKS, 2, RT_BF16)

// After a f16 / bf16 entry with split windows: C = round(scratch + beta * C) on their rows
// (split_rows_finish of tc_common.cuh, group_rows = the windows' rows).
SPLIT_ROWS_FINISH_ENTRY(row_tile_split_finish_f16, false)
SPLIT_ROWS_FINISH_ENTRY(row_tile_split_finish_bf16, true)

// TMA pipeline entries (sm_90): row_tile_tma.cuh.
#include "row_tile_tma.cuh"
