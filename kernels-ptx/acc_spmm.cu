// Acc-SpMM (PPoPP'25) BitTCF SpMM on tensor cores: C = alpha * A * B + beta * C.
//
// A is BitTCF: 8-row windows, 8x8 TC blocks over the window's compacted columns (8 "slots"), one u64
// mask per block (bit = local_row * 8 + slot, LSB = row 0 slot 0), values in bit order, per-block value
// offsets, 8 column ids per block (SparseAToB) with u32::MAX as a sentinel meaning "zero B row".
// B (K x N) and C (M x N) are row-major f32 with leading dimensions ldb, ldc (in elements).
//
// Operands are swapped (as in the paper): the dense B tile is the 16x8 A-operand of
// mma.sync.m16n8k8 TF32 (16 features x 8 slots), the decoded 8x8 sparse block is the 8x8 B-operand
// (8 slots x 8 rows), and the 16x8 accumulator is C^T (16 features x 8 rows). With g = lane / 4,
// t = lane % 4 and f0 the first feature of an MMA:
//   a0 = B[col[t]][f0+g]  a1 = B[col[t]][f0+g+8]  a2 = B[col[t+4]][f0+g]  a3 = B[col[t+4]][f0+g+8]
//   b0 = T[g][t]          b1 = T[g][t+4]
//   c0, c1 -> C[8w + 2t (+1)][f0+g]                 c2, c3 -> C[8w + 2t (+1)][f0+g+8]
// (with the features renumbered as described under "Feature permutation" below).
// Each warp owns 32 features (two MMAs per block); a thread block of W warps covers TN = 32 W features
// and grid.y = ceil(N / TN) tiles the feature dimension. Every feature index is guarded against N and
// every row against M, so any N >= 1, M, K is handled (unused features are zero-filled, not stored).
//
// Feature permutation: the MMA's M dimension (features) may be numbered in any order as long as loads
// and stores agree. MMA h (0, 1) row m of the warp is feature f0 + 4 (m % 8) + 2h + m / 8, so lane
// (g, t) needs features f0 + 4g + {0, 1, 2, 3} of B rows col[t] and col[t + 4] -- one float4 each --
// and its accumulators for row 2t (and 2t + 1) are the four consecutive features f0 + 4g + q,
// q = 2h + k / 2 -- one float4 store each. A warp's float4 loads of one B row cover 128 contiguous
// bytes. The scalar path (flag bit 0 clear: ldb or ldc not a multiple of 4) uses the same mapping.
//
// Decoding: each lane needs exactly two elements of the 8x8 tile (b0, b1), so it decodes them straight
// from the mask with popcount (value index = offset + popc(mask & ((1 << p) - 1))) instead of first
// expanding the tile into shared memory: same result, no extra shared-memory pass.
//
// Work: thread block x executes work[x] = {window_begin, window_end, block_begin, block_end} of an
// AccSchedule: windows [window_begin, window_end), and of their blocks only [block_begin, block_end).
// The blocks of consecutive windows are contiguous, so a thread block walks one contiguous block range
// and flushes its accumulators at each window end. A window whose window_split flag is 0 is owned by
// exactly one thread block, which writes its rows with plain stores (alpha * acc + beta * C, C not read
// when beta == 0; an empty window gets beta * C or 0). A split window's rows are pre-scaled by beta by
// acc_spmm_prescale and every thread block adds its partial sums with atomicAdd.
//
// Pipeline (one iteration per TC block i, one barrier per block): the B rows and the two tile values
// of block i + 1 are loaded into a second register set while block i is multiplied; the block metadata
// (8 column ids, mask, value offset) of block i + 2 is fetched either by cp.async into a double buffer
// in shared memory (acc_spmm_tf32, the paper's design: fetched once per thread block) or by plain
// loads into registers by every warp (acc_spmm_tf32_reg: no barriers at all).
//
// B-row cache (acc_spmm_tf32_cache, register metadata as acc_spmm_tf32_reg): each warp keeps a
// direct-mapped cache of 2^cache_log2 B-row slices (its 32 features, 128 bytes per row) in dynamic
// shared memory, tagged by column id (slot = column & (S - 1)). A lane whose B row is cached reads it
// from shared memory instead of L1/L2. After a block's MMAs its missed rows are inserted, but only when
// all of the block's real column ids lie in [c0, c0 + S) for its first column c0: then the 8 rows
// map to 8 distinct slots and no two lanes write one slot in the same instruction. Row windows that
// share columns (banded, clustered matrices under a packed schedule) then read most B rows from
// shared memory; a warp's cache is private, so only __syncwarp orders it (lookups of block i + 1 are
// issued before block i's rows are inserted; both are separated by __syncwarp). Only used when the
// whole warp takes the float4 path.
//
// Paper pipeline (acc_spmm_tf32_paper, the ablation of issue 20): acc_spmm_tf32's cp.async metadata
// double buffer plus the paper's cache policy: B rows loaded with ld.global.ca (cached in L1 and L2,
// instead of the read-only path ld.global.nc that __ldg gives every other entry) and C written with
// st.global.wt (write-through) instead of the default write-back stores. Split windows still add
// with atomics. Same results as every other entry.
//
// Device helpers shared with the row-tile kernels (row_tile_spmm.cu) are in tc_common.cuh. Generated
// PTX lives in acc_spmm.ptx (`cargo xtask ptx`). Host-side validation of every index array happens in
// crates/gpu/src/spmm/acc.rs (and crates/gpu/src/schedule.rs for the work list) before any launch.

#include "tc_common.cuh"

struct Meta {
    u32 col_lo;  // column of slot t
    u32 col_hi;  // column of slot t + 4
    u64 mask;
    u32 vo;      // value offset of the block
};

struct Stage {
    float lo[4];  // B[col_lo][f0 + 4g + q], q = 0..3
    float hi[4];  // B[col_hi][f0 + 4g + q]
    float v0;     // T[g][t]
    float v1;     // T[g][t + 4]
};

// The per-warp B-row cache (acc_spmm_tf32_cache): 2^log2 slots of 8 float4 (one per g) and their tags.
struct RowCache {
    float4* data;  // slot * 8 + g
    u32* tags;     // column id held by each slot, SENTINEL when empty
    u32 mask;      // slots - 1
    u32 span;      // slots
};

// What a cached stage remembers for inserting its rows after the MMAs.
struct Fill {
    u32 col_lo, col_hi;  // columns of this lane's rows (SENTINEL: nothing to insert)
    bool miss_lo, miss_hi;
};


__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
    u32 s = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem) {
    u32 s = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem) {
    u32 s = (u32)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

struct SmemMeta {
    u32 cols[2][8];
    u64 mask[2];
    u32 vo[2];
};

struct Ctx {
    const u32* __restrict__ bvo;
    const u32* __restrict__ a2b;
    const u64* __restrict__ bits;
    const float* __restrict__ values;
    const float* __restrict__ B;
    u64 ldb;
    u32 g, t;
    u32 f0;        // first feature of this warp
    bool qok[4];   // f0 + 4g + q < N
    bool vec;      // float4 loads/stores: aligned (flag bit 0) and all four features < N
    u64 lowmask0;  // bits below p0 = 8g + t
    u64 lowmask1;  // bits below p1 = 8g + t + 4
};

__device__ __forceinline__ Meta meta_global(const Ctx& c, u32 blk) {
    Meta m;
    m.col_lo = __ldg(c.a2b + 8ull * blk + c.t);
    m.col_hi = __ldg(c.a2b + 8ull * blk + c.t + 4);
    m.mask = __ldg(c.bits + blk);
    m.vo = __ldg(c.bvo + blk);
    return m;
}

__device__ __forceinline__ Meta meta_shared(const Ctx& c, const SmemMeta& s, u32 buf) {
    Meta m;
    m.col_lo = s.cols[buf][c.t];
    m.col_hi = s.cols[buf][c.t + 4];
    m.mask = s.mask[buf];
    m.vo = s.vo[buf];
    return m;
}

// Issues the cp.async copies of block blk's metadata into buffer buf (threads 0..3 of the block).
__device__ __forceinline__ void meta_issue(const Ctx& c, SmemMeta& s, u32 buf, u32 blk) {
    const u32 tid = threadIdx.x;
    if (tid < 2) {
        cp_async_16(&s.cols[buf][4 * tid], c.a2b + 8ull * blk + 4 * tid);
    } else if (tid == 2) {
        cp_async_8(&s.mask[buf], c.bits + blk);
    } else if (tid == 3) {
        cp_async_4(&s.vo[buf], c.bvo + blk);
    }
    cp_async_commit();
}


// The two elements of the 8x8 tile one lane needs (T[g][t], T[g][t + 4]), decoded from the mask.
__device__ __forceinline__ void tile_values(const Ctx& c, const Meta& m, Stage& s) {
    const u32 p0 = 8 * c.g + c.t;
    s.v0 = ((m.mask >> p0) & 1ull) ? __ldg(c.values + m.vo + __popcll(m.mask & c.lowmask0)) : 0.0f;
    s.v1 = ((m.mask >> (p0 + 4)) & 1ull) ? __ldg(c.values + m.vo + __popcll(m.mask & c.lowmask1))
                                          : 0.0f;
}

// The paper's cache policy: loads through L1 (ld.global.ca), write-through stores (st.global.wt).
// The loads are not volatile (B is not written during the kernel), so the compiler may schedule
// them like the __ldg loads of the other entries; the stores are.
__device__ __forceinline__ float4 ld_ca_v4(const float* p) {
    float4 v;
    asm("ld.global.ca.v4.f32 {%0, %1, %2, %3}, [%4];\n"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
}
__device__ __forceinline__ float ld_ca(const float* p) {
    float v;
    asm("ld.global.ca.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ void st_wt_v4(float* p, float4 v) {
    asm volatile("st.global.wt.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y),
                 "f"(v.z), "f"(v.w)
                 : "memory");
}
__device__ __forceinline__ void st_wt(float* p, float v) {
    asm volatile("st.global.wt.f32 [%0], %1;\n" ::"l"(p), "f"(v) : "memory");
}

// The loads of load_b_rows (tc_common.cuh) through L1: ld.global.ca, the same guards, the same zero
// rows.
struct CaLoads {
    __device__ __forceinline__ static float4 vec(const float* p) { return ld_ca_v4(p); }
    __device__ __forceinline__ static float one(const float* p) { return ld_ca(p); }
};

// Loads the B rows and the two tile values one lane needs for a block (B through L1 with
// ld.global.ca when PAPER).
template <bool PAPER = false>
__device__ __forceinline__ void stage_load(const Ctx& c, const Meta& m, Stage& s) {
    if (PAPER) {
        load_b_rows<CaLoads>(c.B, c.ldb, c.f0 + 4 * c.g, m.col_lo, m.col_hi, c.qok, c.vec, s.lo,
                             s.hi);
    } else {
        load_b_rows(c.B, c.ldb, c.f0 + 4 * c.g, m.col_lo, m.col_hi, c.qok, c.vec, s.lo, s.hi);
    }
    tile_values(c, m, s);
}

// store_axpby4 / store_axpby (tc_common.cuh) with a write-through store when PAPER.
template <bool PAPER>
__device__ __forceinline__ void store_c4(float4* dst, float4 v, float beta) {
    if (!PAPER) {
        store_axpby4(dst, v, beta);
        return;
    }
    st_wt_v4(reinterpret_cast<float*>(dst), axpby4(dst, v, beta));
}
template <bool PAPER>
__device__ __forceinline__ void store_c(float* dst, float v, float beta) {
    if (!PAPER) {
        store_axpby(dst, v, beta);
        return;
    }
    st_wt(dst, (beta == 0.0f) ? v : v + beta * *dst);
}

// stage_load through the warp's row cache (float4 path only; every lane of the warp takes it).
// Decides whether the block's rows may be inserted (all real columns in [c0, c0 + S)) and records
// which of this lane's rows missed.
__device__ __forceinline__ void stage_load_cached(const Ctx& c, const Meta& m, Stage& s,
                                                  const RowCache& rc, Fill& f) {
    const bool lo_ok = m.col_lo != SENTINEL;
    const bool hi_ok = m.col_hi != SENTINEL;
    const u32 slot_lo = m.col_lo & rc.mask;
    const u32 slot_hi = m.col_hi & rc.mask;
    const bool hit_lo = lo_ok && rc.tags[slot_lo] == m.col_lo;
    const bool hit_hi = hi_ok && rc.tags[slot_hi] == m.col_hi;
    const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* rlo = c.B + (lo_ok ? (u64)m.col_lo * c.ldb : 0) + c.f0 + 4 * c.g;
    const float* rhi = c.B + (hi_ok ? (u64)m.col_hi * c.ldb : 0) + c.f0 + 4 * c.g;
    const float4 l = hit_lo  ? rc.data[8 * slot_lo + c.g]
                     : lo_ok ? __ldg(reinterpret_cast<const float4*>(rlo))
                             : z;
    const float4 h = hit_hi  ? rc.data[8 * slot_hi + c.g]
                     : hi_ok ? __ldg(reinterpret_cast<const float4*>(rhi))
                             : z;
    s.lo[0] = l.x; s.lo[1] = l.y; s.lo[2] = l.z; s.lo[3] = l.w;
    s.hi[0] = h.x; s.hi[1] = h.y; s.hi[2] = h.z; s.hi[3] = h.w;
    tile_values(c, m, s);
    // Lane 0 (t = 0) holds slot 0's column, a real column in every block.
    const u32 c0 = __shfl_sync(0xffffffffu, m.col_lo, 0);
    const bool in_span = (!lo_ok || m.col_lo - c0 < rc.span) && (!hi_ok || m.col_hi - c0 < rc.span);
    const bool insert = __all_sync(0xffffffffu, in_span);
    f.col_lo = m.col_lo;
    f.col_hi = m.col_hi;
    f.miss_lo = insert && lo_ok && !hit_lo;
    f.miss_hi = insert && hi_ok && !hit_hi;
}

// Inserts the rows a cached stage missed (call between two __syncwarp).
__device__ __forceinline__ void cache_insert(const Ctx& c, const Stage& s, const Fill& f,
                                             const RowCache& rc) {
    if (f.miss_lo) {
        const u32 slot = f.col_lo & rc.mask;
        rc.data[8 * slot + c.g] = make_float4(s.lo[0], s.lo[1], s.lo[2], s.lo[3]);
        if (c.g == 0) rc.tags[slot] = f.col_lo;
    }
    if (f.miss_hi) {
        const u32 slot = f.col_hi & rc.mask;
        rc.data[8 * slot + c.g] = make_float4(s.hi[0], s.hi[1], s.hi[2], s.hi[3]);
        if (c.g == 0) rc.tags[slot] = f.col_hi;
    }
}

__device__ __forceinline__ void stage_zero(Stage& s) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        s.lo[q] = 0.0f;
        s.hi[q] = 0.0f;
    }
    s.v0 = 0.0f;
    s.v1 = 0.0f;
}

template <bool SMEM, bool CACHE, bool PAPER = false>
__device__ __forceinline__ void acc_spmm_body(
    const u32* __restrict__ rwo, const u32* __restrict__ bvo, const u32* __restrict__ a2b,
    const u64* __restrict__ bits, const float* __restrict__ values, const u32* __restrict__ work,
    const unsigned char* __restrict__ window_split, const float* __restrict__ B, u32 ldb,
    float* __restrict__ C, u32 ldc, u32 M, u32 N, float alpha, float beta, u32 flags,
    u32 cache_log2) {
    __shared__ SmemMeta smeta;
    extern __shared__ float4 row_cache_smem[];

    const u32 lane = threadIdx.x & 31;
    const u32 warp = threadIdx.x >> 5;
    Ctx c;
    c.bvo = bvo;
    c.a2b = a2b;
    c.bits = bits;
    c.values = values;
    c.B = B;
    c.ldb = ldb;
    c.g = lane >> 2;
    c.t = lane & 3;
    c.f0 = blockIdx.y * blockDim.x + warp * 32;
#pragma unroll
    for (int q = 0; q < 4; ++q) c.qok[q] = c.f0 + 4 * c.g + q < N;
    c.vec = (flags & 1u) && c.qok[3];
    {
        const u32 p0 = 8 * c.g + c.t;
        c.lowmask0 = (1ull << p0) - 1ull;
        c.lowmask1 = (1ull << (p0 + 4)) - 1ull;
    }
    // Warp-uniform: does this warp own any feature, and is its second MMA (features f0 + 4g + 2,
    // f0 + 4g + 3) used at all?
    const bool warp_on = c.f0 < N;
    const bool second_on = c.f0 + 2 < N;

    // Row cache: warp w's data at [w * 8S, (w + 1) * 8S) float4, tags after all warps' data.
    RowCache rc;
    rc.span = 1u << cache_log2;
    rc.mask = rc.span - 1;
    rc.data = row_cache_smem + (u64)warp * 8 * rc.span;
    rc.tags = reinterpret_cast<u32*>(row_cache_smem + (u64)(blockDim.x >> 5) * 8 * rc.span) +
              warp * rc.span;
    const bool cached = CACHE && warp_on && __all_sync(0xffffffffu, c.vec);
    if (cached) {
        for (u32 i = lane; i < rc.span; i += 32) rc.tags[i] = SENTINEL;
        __syncwarp();
    }
    Fill fill_cur, fill_nxt;
    fill_cur.miss_lo = fill_cur.miss_hi = false;
    fill_cur.col_lo = fill_cur.col_hi = SENTINEL;

    const u32 wb = __ldg(work + 4ull * blockIdx.x + 0);
    const u32 we = __ldg(work + 4ull * blockIdx.x + 1);
    const u32 bb = __ldg(work + 4ull * blockIdx.x + 2);
    const u32 be = __ldg(work + 4ull * blockIdx.x + 3);
    u32 next_rwo = (wb < we) ? __ldg(rwo + wb + 1) : 0;

    Stage cur;
    Meta m_next;  // register variant: metadata of block blk + 1
    m_next.col_lo = SENTINEL;
    m_next.col_hi = SENTINEL;
    m_next.mask = 0;
    m_next.vo = 0;
    stage_zero(cur);

    // Prologue: metadata of blocks bb and bb + 1, B rows and values of block bb.
    if (SMEM) {
        if (bb < be) meta_issue(c, smeta, 0, bb);
        if (bb + 1 < be) meta_issue(c, smeta, 1, bb + 1);
        cp_async_wait_all();
        __syncthreads();
        if (bb < be && warp_on) stage_load<PAPER>(c, meta_shared(c, smeta, 0), cur);
    } else {
        if (bb < be && cached) {
            stage_load_cached(c, meta_global(c, bb), cur, rc, fill_cur);
        } else if (bb < be && warp_on) {
            stage_load(c, meta_global(c, bb), cur);
        }
        if (bb + 1 < be && warp_on) m_next = meta_global(c, bb + 1);
    }

    u32 blk = bb;
    u32 buf = 0;  // shared buffer holding block blk's metadata
    for (u32 w = wb; w < we; ++w) {
        const u32 wend = min(next_rwo, be);
        if (w + 1 < we) next_rwo = __ldg(rwo + w + 2);
        const bool touched = blk < wend;
        float acc[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[h][k] = 0.0f;

        for (; blk < wend; ++blk) {
            Stage nxt;
            stage_zero(nxt);
            if (SMEM) {
                // Block blk + 1's metadata is now in buffer buf ^ 1 for every thread, and every thread
                // is done with iteration blk - 1, so buffer buf (block blk, already consumed) is free.
                cp_async_wait_all();
                __syncthreads();
                if (blk + 2 < be) meta_issue(c, smeta, buf, blk + 2);
                if (blk + 1 < be && warp_on) {
                    stage_load<PAPER>(c, meta_shared(c, smeta, buf ^ 1), nxt);
                }
            } else if (cached) {
                fill_nxt.miss_lo = fill_nxt.miss_hi = false;
                if (blk + 1 < be) stage_load_cached(c, m_next, nxt, rc, fill_nxt);
                if (blk + 2 < be) m_next = meta_global(c, blk + 2);
            } else if (warp_on) {
                if (blk + 1 < be) stage_load(c, m_next, nxt);
                if (blk + 2 < be) m_next = meta_global(c, blk + 2);
            }
            if (warp_on) {
                const u32 b0 = to_tf32(cur.v0);
                const u32 b1 = to_tf32(cur.v1);
                mma_tf32(acc[0], cur.lo[0], cur.lo[1], cur.hi[0], cur.hi[1], b0, b1);
                if (second_on) mma_tf32(acc[1], cur.lo[2], cur.lo[3], cur.hi[2], cur.hi[3], b0, b1);
            }
            if (cached) {
                // Block blk + 1's lookups were issued above; order them before block blk's inserts,
                // and the inserts before block blk + 2's lookups.
                __syncwarp();
                cache_insert(c, cur, fill_cur, rc);
                __syncwarp();
                fill_cur = fill_nxt;
            }
            cur = nxt;
            buf ^= 1;
        }

        // Write the window: acc[h][0] -> (row 2t, q = 2h), [1] -> (2t + 1, 2h), [2] -> (2t, 2h + 1),
        // [3] -> (2t + 1, 2h + 1); feature f0 + 4g + q.
        if (!warp_on) continue;
        const bool split = window_split[w] != 0;
        if (split && !touched) continue;
        const u32 row0 = 8 * w + 2 * c.t;
        if (c.vec && !split) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const u32 row = row0 + r;
                if (row >= M) continue;
                float4* dst = reinterpret_cast<float4*>(C + (u64)row * ldc + c.f0 + 4 * c.g);
                store_c4<PAPER>(dst,
                                make_float4(alpha * acc[0][r], alpha * acc[0][r + 2],
                                            alpha * acc[1][r], alpha * acc[1][r + 2]),
                                beta);
            }
            continue;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const u32 row = row0 + (k & 1);
                const int q = 2 * h + (k >> 1);
                if (row >= M || !c.qok[q]) continue;
                float* dst = C + (u64)row * ldc + c.f0 + 4 * c.g + q;
                const float v = alpha * acc[h][k];
                if (split) {
                    atomicAdd(dst, v);
                } else {
                    store_c<PAPER>(dst, v, beta);
                }
            }
        }
    }
    if (SMEM) cp_async_wait_all();
}

// The parameters every main entry takes, and the call of acc_spmm_body forwarding them.
#define ACC_SPMM_PARAMS BITTCF_SPMM_PARAMS(a2b, bits)
#define ACC_SPMM_ARGS \
    rwo, bvo, a2b, bits, values, work, window_split, B, ldb, C, ldc, M, N, alpha, beta, flags

extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS) acc_spmm_tf32(ACC_SPMM_PARAMS) {
    acc_spmm_body<true, false>(ACC_SPMM_ARGS, 0);
}

extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS) acc_spmm_tf32_reg(ACC_SPMM_PARAMS) {
    acc_spmm_body<false, false>(ACC_SPMM_ARGS, 0);
}

// acc_spmm_tf32 with the paper's cache policy: B by ld.global.ca, C by st.global.wt.
extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS) acc_spmm_tf32_paper(ACC_SPMM_PARAMS) {
    acc_spmm_body<true, false, true>(ACC_SPMM_ARGS, 0);
}

// acc_spmm_tf32_reg with the per-warp B-row cache of 2^cache_log2 slots (dynamic shared memory:
// warps * 2^cache_log2 * 132 bytes).
extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS)
    acc_spmm_tf32_cache(ACC_SPMM_PARAMS, u32 cache_log2) {
    acc_spmm_body<false, true>(ACC_SPMM_ARGS, cache_log2);
}

#undef ACC_SPMM_PARAMS
#undef ACC_SPMM_ARGS

// Pre-scales the rows of split windows: C = beta * C (C = 0 when beta == 0, never reading C), so the
// atomic partial sums of acc_spmm_tf32 and the row-tile kernels land on the right base. Windows are
// window_rows rows high (8 for BitTCF, 16 or 32 for row-tile TCF). Grid-stride over the split
// windows (blockIdx.x) and their window_rows x N elements (threadIdx.x).
extern "C" __global__ void acc_spmm_prescale(const u32* __restrict__ split_windows, u32 count,
                                             float* __restrict__ C, u32 ldc, u32 M, u32 N,
                                             float beta, u32 window_rows) {
    for (u32 i = blockIdx.x; i < count; i += gridDim.x) {
        const u32 w = split_windows[i];
        for (u32 e = threadIdx.x; e < window_rows * N; e += blockDim.x) {
            const u32 row = window_rows * w + e / N;
            if (row >= M) break;
            float* dst = C + (u64)row * ldc + (e % N);
            *dst = (beta == 0.0f) ? 0.0f : beta * *dst;
        }
    }
}
