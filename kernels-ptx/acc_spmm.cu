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
// Generated PTX lives in acc_spmm.ptx (`cargo xtask ptx`). Host-side validation of every index array
// happens in crates/gpu/src/acc_spmm.rs before any launch.

typedef unsigned int u32;
typedef unsigned long long u64;

#define SENTINEL 0xFFFFFFFFu
#define MAX_WARPS 8

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

__device__ __forceinline__ u32 to_tf32(float x) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void mma_tf32(float d[4], float a0, float a1, float a2, float a3, u32 b0,
                                         u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(to_tf32(a0)), "r"(to_tf32(a1)), "r"(to_tf32(a2)), "r"(to_tf32(a3)), "r"(b0), "r"(b1));
}

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

// Loads one lane's slice of two gathered B rows: features fl .. fl + 3 of rows col_lo and col_hi
// (one float4 each when vec, else per-feature guarded by qok). Sentinel columns give a zero row (B is
// never read at u32::MAX); features >= N read nothing. Shared by every kernel of this file.
__device__ __forceinline__ void load_b_rows(const float* __restrict__ B, u64 ldb, u32 fl, u32 col_lo,
                                            u32 col_hi, const bool qok[4], bool vec, float lo[4],
                                            float hi[4]) {
    const bool lo_ok = col_lo != SENTINEL;
    const bool hi_ok = col_hi != SENTINEL;
    const float* rlo = B + (lo_ok ? (u64)col_lo * ldb : 0) + fl;
    const float* rhi = B + (hi_ok ? (u64)col_hi * ldb : 0) + fl;
    if (vec) {
        const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const float4 l = lo_ok ? __ldg(reinterpret_cast<const float4*>(rlo)) : z;
        const float4 h = hi_ok ? __ldg(reinterpret_cast<const float4*>(rhi)) : z;
        lo[0] = l.x; lo[1] = l.y; lo[2] = l.z; lo[3] = l.w;
        hi[0] = h.x; hi[1] = h.y; hi[2] = h.z; hi[3] = h.w;
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            lo[q] = (lo_ok && qok[q]) ? __ldg(rlo + q) : 0.0f;
            hi[q] = (hi_ok && qok[q]) ? __ldg(rhi + q) : 0.0f;
        }
    }
}

// The two elements of the 8x8 tile one lane needs (T[g][t], T[g][t + 4]), decoded from the mask.
__device__ __forceinline__ void tile_values(const Ctx& c, const Meta& m, Stage& s) {
    const u32 p0 = 8 * c.g + c.t;
    s.v0 = ((m.mask >> p0) & 1ull) ? __ldg(c.values + m.vo + __popcll(m.mask & c.lowmask0)) : 0.0f;
    s.v1 = ((m.mask >> (p0 + 4)) & 1ull) ? __ldg(c.values + m.vo + __popcll(m.mask & c.lowmask1))
                                          : 0.0f;
}

// Loads the B rows and the two tile values one lane needs for a block.
__device__ __forceinline__ void stage_load(const Ctx& c, const Meta& m, Stage& s) {
    load_b_rows(c.B, c.ldb, c.f0 + 4 * c.g, m.col_lo, m.col_hi, c.qok, c.vec, s.lo, s.hi);
    tile_values(c, m, s);
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

// C = v + beta * C for four features at an aligned address (C not read when beta == 0).
__device__ __forceinline__ void store_axpby4(float4* dst, float4 v, float beta) {
    if (beta != 0.0f) {
        const float4 old = *dst;
        v.x += beta * old.x;
        v.y += beta * old.y;
        v.z += beta * old.z;
        v.w += beta * old.w;
    }
    *dst = v;
}

// C = v + beta * C for one feature (C not read when beta == 0).
__device__ __forceinline__ void store_axpby(float* dst, float v, float beta) {
    *dst = (beta == 0.0f) ? v : v + beta * *dst;
}

template <bool SMEM, bool CACHE>
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
        if (bb < be && warp_on) stage_load(c, meta_shared(c, smeta, 0), cur);
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
                if (blk + 1 < be && warp_on) stage_load(c, meta_shared(c, smeta, buf ^ 1), nxt);
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
                store_axpby4(dst,
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
                    store_axpby(dst, v, beta);
                }
            }
        }
    }
    if (SMEM) cp_async_wait_all();
}

extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS)
    acc_spmm_tf32(const u32* __restrict__ rwo, const u32* __restrict__ bvo,
                  const u32* __restrict__ a2b, const u64* __restrict__ bits,
                  const float* __restrict__ values, const u32* __restrict__ work,
                  const unsigned char* __restrict__ window_split, const float* __restrict__ B,
                  u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N, float alpha, float beta,
                  u32 flags) {
    acc_spmm_body<true, false>(rwo, bvo, a2b, bits, values, work, window_split, B, ldb, C, ldc, M, N,
                               alpha, beta, flags, 0);
}

extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS)
    acc_spmm_tf32_reg(const u32* __restrict__ rwo, const u32* __restrict__ bvo,
                      const u32* __restrict__ a2b, const u64* __restrict__ bits,
                      const float* __restrict__ values, const u32* __restrict__ work,
                      const unsigned char* __restrict__ window_split, const float* __restrict__ B,
                      u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N, float alpha,
                      float beta, u32 flags) {
    acc_spmm_body<false, false>(rwo, bvo, a2b, bits, values, work, window_split, B, ldb, C, ldc, M, N,
                                alpha, beta, flags, 0);
}

// acc_spmm_tf32_reg with the per-warp B-row cache of 2^cache_log2 slots (dynamic shared memory:
// warps * 2^cache_log2 * 132 bytes).
extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS)
    acc_spmm_tf32_cache(const u32* __restrict__ rwo, const u32* __restrict__ bvo,
                        const u32* __restrict__ a2b, const u64* __restrict__ bits,
                        const float* __restrict__ values, const u32* __restrict__ work,
                        const unsigned char* __restrict__ window_split, const float* __restrict__ B,
                        u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N, float alpha,
                        float beta, u32 flags, u32 cache_log2) {
    acc_spmm_body<false, true>(rwo, bvo, a2b, bits, values, work, window_split, B, ldb, C, ldc, M, N,
                               alpha, beta, flags, cache_log2);
}

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

// ---------------------------------------------------------------------------------------------------
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
// Work: as acc_spmm_tf32's: thread block x executes work[x] = {window_begin, window_end, block_begin,
// block_end} (windows [window_begin, window_end), of their blocks only [block_begin, block_end)). A
// window whose window_split flag is 0 is owned by one thread block and written with plain stores
// (alpha * acc + beta * C, C not read when beta == 0); a split window's rows were pre-scaled by beta
// (acc_spmm_prescale) and every thread block that touched it adds alpha * acc with vector atomics
// (red.global.add.v4.f32, sm_90) where 4 features are aligned and in range, scalar atomicAdd else.

template <int MT>
struct MetaRT {
    u32 col_lo, col_hi;
    u64 m[2 * MT];
    u32 vo;
};

template <int MT>
struct StageRT {
    float blo[4];    // B[col[t]][f0 + 4g + q]
    float bhi[4];    // B[col[t + 4]][f0 + 4g + q]
    float a[MT][4];  // a0..a3 of every row tile
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

template <int MT>
__device__ __forceinline__ void stage_rt_zero(StageRT<MT>& s) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        s.blo[q] = 0.0f;
        s.bhi[q] = 0.0f;
#pragma unroll
        for (int i = 0; i < MT; ++i) s.a[i][q] = 0.0f;
    }
}

// Value of bit p of mask m whose first value is at values[base] (0 when the bit is clear).
__device__ __forceinline__ float masked_value(const float* __restrict__ values, u32 base, u64 m,
                                              u32 p, u64 below) {
    return ((m >> p) & 1ull) ? __ldg(values + base + __popcll(m & below)) : 0.0f;
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
            asm volatile(
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b0[j]), "r"(b1[j]));
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
template <int MT, typename F>
__device__ __forceinline__ void visit_row_tiles(const float (&acc)[MT][4][4],
                                                float* __restrict__ C, u32 ldc, u32 M, u32 N,
                                                u32 w, u32 g, u32 t, u32 f0, float alpha,
                                                u32 flags, F&& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const u32 row = 16 * MT * w + 16 * i + g + 8 * half;
            if (row >= M) continue;
            float* dst = C + (u64)row * ldc + f0 + 8 * t;
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
                            if (vec) {
                                asm volatile(
                                    "red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(d),
                                    "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                                    : "memory");
                                return;
                            }
#pragma unroll
                            for (int j = 0; j < 4; ++j) {
                                if (fb + j < N) atomicAdd(d + j, v[j]);
                            }
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
// atomic adds when it is split (nothing when this thread block had none of its blocks).
template <int MT>
__device__ __forceinline__ void write_row_tiles(const float (&acc)[MT][4][4],
                                                const unsigned char* __restrict__ window_split,
                                                bool touched, float* __restrict__ C, u32 ldc, u32 M,
                                                u32 N, u32 w, u32 g, u32 t, u32 f0, float alpha,
                                                float beta, u32 flags) {
    if (__ldg(window_split + w) == 0) {
        store_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, beta, flags);
    } else if (touched) {
        add_row_tiles<MT>(acc, C, ldc, M, N, w, g, t, f0, alpha, flags);
    }
}

// Walks thread block wk's windows: per window w, acc is zeroed, step(acc, blk) runs for each of
// its blocks in [bb, be), and the window's rows are written (write_row_tiles). The masked and the
// dense kernels differ only in their step (software pipeline of loads and MMAs).
template <int MT, typename Step>
__device__ __forceinline__ void walk_row_tile_windows(const u32* __restrict__ rwo,
                                                      const RowTileWork& wk, Step&& step,
                                                      const unsigned char* __restrict__ window_split,
                                                      float* __restrict__ C, u32 ldc, u32 M, u32 N,
                                                      u32 g, u32 t, u32 f0, float alpha, float beta,
                                                      u32 flags) {
    u32 blk = wk.bb;
    u32 next_rwo = __ldg(rwo + wk.wb + 1);
    for (u32 w = wk.wb; w < wk.we; ++w) {
        const u32 wend = min(next_rwo, wk.be);
        if (w + 1 < wk.we) next_rwo = __ldg(rwo + w + 2);
        const bool touched = blk < wend;
        float acc[MT][4][4];
        zero_acc<MT>(acc);
        for (; blk < wend; ++blk) step(acc, blk);
        write_row_tiles<MT>(acc, window_split, touched, C, ldc, M, N, w, g, t, f0, alpha, beta,
                            flags);
    }
}

template <int MT>
__device__ __forceinline__ void row_tile_spmm(const u32* __restrict__ rwo,
                                              const u32* __restrict__ bvo,
                                              const u32* __restrict__ a2x,
                                              const u64* __restrict__ masks,
                                              const float* __restrict__ values,
                                              const u32* __restrict__ work,
                                              const unsigned char* __restrict__ window_split,
                                              const float* __restrict__ B,
                                              u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N,
                                              float alpha, float beta, u32 flags) {
    const u32 lane = threadIdx.x & 31;
    const u32 warp = threadIdx.x >> 5;
    const u32 g = lane >> 2;
    const u32 t = lane & 3;
    const u32 f0 = blockIdx.y * blockDim.x + warp * 32;
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

    auto load = [&](const MetaRT<MT>& m, StageRT<MT>& s) {
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

    StageRT<MT> cur;
    stage_rt_zero(cur);
    MetaRT<MT> m_next;
    m_next.col_lo = m_next.col_hi = SENTINEL;
#pragma unroll
    for (int i = 0; i < 2 * MT; ++i) m_next.m[i] = 0;
    m_next.vo = 0;
    if (bb < be) load(meta_rt<MT>(a2x, masks, bvo, bb, t), cur);
    if (bb + 1 < be) m_next = meta_rt<MT>(a2x, masks, bvo, bb + 1, t);

    auto step = [&](float (&acc)[MT][4][4], u32 blk) {
        StageRT<MT> nxt;
        stage_rt_zero(nxt);
        if (blk + 1 < be) load(m_next, nxt);
        if (blk + 2 < be) m_next = meta_rt<MT>(a2x, masks, bvo, blk + 2, t);
        u32 a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int q = 0; q < 4; ++q) a[i][q] = to_tf32(cur.a[i][q]);
        mma_row_tiles<MT>(acc, a, cur.blo, cur.bhi);
        cur = nxt;
    };
    walk_row_tile_windows<MT>(rwo, wk, step, window_split, C, ldc, M, N, g, t, f0, alpha, beta,
                              flags);
}

#define ROW_TILE_PARAMS                                                                          \
    const u32 *__restrict__ rwo, const u32 *__restrict__ bvo, const u32 *__restrict__ a2x,      \
        const u64 *__restrict__ masks, const float *__restrict__ values,                        \
        const u32 *__restrict__ work, const unsigned char *__restrict__ window_split,           \
        const float *__restrict__ B, u32 ldb, float *__restrict__ C, u32 ldc, u32 M, u32 N,     \
        float alpha, float beta, u32 flags
#define ROW_TILE_ARGS \
    rwo, bvo, a2x, masks, values, work, window_split, B, ldb, C, ldc, M, N, alpha, beta, flags

// At most 64 registers (4 resident blocks of 256 threads): 32 warps per SM, as for acc_spmm_tf32_reg.
extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, 4) tc16_spmm_tf32(ROW_TILE_PARAMS) {
    row_tile_spmm<1>(ROW_TILE_ARGS);
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
    row_tile_spmm<2>(ROW_TILE_ARGS);
}

// ---------------------------------------------------------------------------------------------------
// Dense-tile row-tile kernels tc16d_spmm_tf32 / tc32d_spmm_tf32: the same MMAs, windows and B gathers
// as tc16 / tc32, but each block's 16 * MT x 8 tile is stored dense (zeros included), in MMA
// fragment order and already rounded to TF32 on the host: lane L of row tile i finds its
// a0..a3 = T[16i+g][t], T[16i+g+8][t], T[16i+g][t+4], T[16i+g+8][t+4] as float4 frag[(32 blk + L) MT
// + i], so a warp reads a block's tile as 512 * MT contiguous bytes and needs no masks, no value
// offsets and no popcounts. It moves 4 B per tile slot instead of 4 B per nonzero plus the masks: the
// host offers it only where tiles are dense enough (RowTileKernel docs in crates/gpu).

template <int MT>
__device__ __forceinline__ void row_tile_dense_spmm(const u32* __restrict__ rwo,
                                                    const u32* __restrict__ a2x,
                                                    const float4* __restrict__ frag,
                                                    const u32* __restrict__ work,
                                                    const unsigned char* __restrict__ window_split,
                                                    const float* __restrict__ B, u32 ldb,
                                                    float* __restrict__ C, u32 ldc, u32 M, u32 N,
                                                    float alpha, float beta, u32 flags) {
    const u32 lane = threadIdx.x & 31;
    const u32 warp = threadIdx.x >> 5;
    const u32 g = lane >> 2;
    const u32 t = lane & 3;
    const u32 f0 = blockIdx.y * blockDim.x + warp * 32;
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
                              flags);
}

extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, 4)
    tc16d_spmm_tf32(const u32* __restrict__ rwo, const u32* __restrict__ a2x,
                    const float4* __restrict__ frag, const u32* __restrict__ work,
                    const unsigned char* __restrict__ window_split, const float* __restrict__ B,
                    u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N, float alpha, float beta,
                    u32 flags) {
    row_tile_dense_spmm<1>(rwo, a2x, frag, work, window_split, B, ldb, C, ldc, M, N, alpha,
                           beta, flags);
}

extern "C" __global__ void __launch_bounds__(32 * MAX_WARPS, TC32D_MIN_BLOCKS)
    tc32d_spmm_tf32(const u32* __restrict__ rwo, const u32* __restrict__ a2x,
                    const float4* __restrict__ frag, const u32* __restrict__ work,
                    const unsigned char* __restrict__ window_split, const float* __restrict__ B,
                    u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N, float alpha, float beta,
                    u32 flags) {
    row_tile_dense_spmm<2>(rwo, a2x, frag, work, window_split, B, ldb, C, ldc, M, N, alpha,
                           beta, flags);
}
