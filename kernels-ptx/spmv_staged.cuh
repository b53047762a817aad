// The `staged` walk (one right-hand side): `corew`'s layout with cp.async copies of the next stage
// of tile records, values and x segments into shared memory.
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).

#ifndef TCSPARSE_SPMV_STAGED_CUH
#define TCSPARSE_SPMV_STAGED_CUH

// ---------------------------------------------------------------------------------------------
// Variant "staged" (v11, n = 1): `corew`'s layout (one half per warp; per step group q takes tile
// t + q of the current tile-row, lane r of the group sums row r) with A's tile records, its values
// and each tile's 8 x values copied into shared memory by cp.async one *stage* ahead of the
// multiply. The other walks keep a step's loads in registers (8 tiles per warp in flight at
// 64 registers: latency-bound at the occupancy limit, H200 ncu); here the copies of the next stage
// (up to 32 tiles) are in flight while this one is multiplied, without registers.
// A stage is up to TILES consecutive tiles of the half whose values fit VBYTES (values of
// consecutive tiles are contiguous: one 16-byte-aligned byte range, copied in 16-byte pieces, the
// last one cut at the range's end, so nothing past the value array is read). `staged`: 32 tiles,
// 1232 B; `staged16` (v11b): 16 tiles, 1984 B (a fem-like row of ~13 tiles of ~48 values fits),
// and the stage ends at the last tile-row end inside it when that keeps >= 3/4 of it, so a step of
// 4 tiles does not straddle two stages (rows of ~13 tiles: 4 steps, not ~5). Lane i
// holds the record of the stage's tile i in registers (loaded one stage ahead), stores it to shared
// memory and copies that tile's x segment (zeros beyond K). The half's <= 32 row ends and row
// scales are loaded once, one per lane, and shuffled at row changes (no load on a row change).
// Products and their order: `corew1`'s (per lane: row r's values of its group's tiles in tile
// order; at a row end the 4 groups added by two xor-shuffles), but only set bits multiply (corew
// adds 0 * x for the others: NaN where x is infinite).
// ---------------------------------------------------------------------------------------------
// Value bytes per stage: the largest tile (64 values, 256 B as f32) plus 15 bytes of alignment
// always fits; two stages per warp, 8 warps: 44288 B (`staged`: 77 x 16 B) or 44032 B
// (`staged16`: 124 x 16 B) per block, 5 blocks per SM.
template <u32 TILES, u32 VBYTES>
struct SpmvStage {
    uint4 rec[TILES];
    float4 x[TILES][2];
    uint4 val[VBYTES / 16u];
};

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}
// 16 bytes from global (L2 only), of which the first `src` (<= 16) are read, the rest zero-filled.
__device__ __forceinline__ void cp_async16_cg(void* dst, const void* src, u32 bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(bytes)
                 : "memory");
}
// The same through L1 (x segments: reused by neighbouring tiles).
__device__ __forceinline__ void cp_async16_ca(void* dst, const void* src, u32 bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async4_ca(void* dst, const void* src, u32 bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Queues the copies of the stage that starts at tile b (< te) into `st`: lane i < TILES holds tile
// b + i's record (zero beyond te); `row_end` is the lane's tile-row end (non-decreasing over the
// lanes), used when ROW_CUT. Returns the stage's tile count (>= 1: one tile always fits) and sets
// `vbase` to the low 32 bits of its values' 16-byte-aligned byte offset.
template <int F16, u32 TILES, u32 VBYTES, bool ROW_CUT>
__device__ __forceinline__ u32 stage_issue(SpmvStage<TILES, VBYTES>& st, uint4 m, u32 b, u32 te,
                                           u32 row_end,
                                           const void* __restrict__ values,
                                           const float* __restrict__ x, u32 cols, bool vec,
                                           u32 lane, u32& vbase) {
    const u64 vb = F16 ? 2u : 4u;
    const u32 vend_i = m.w + __popc(m.x) + __popc(m.y);  // one past the tile's last value
    const u64 base = ((u64)__shfl_sync(FULL_MASK, m.w, 0) * vb) & ~(u64)15u;
    // Value ends grow with the tile, so the tiles that fit are a prefix of the valid ones.
    const bool fits = lane < TILES && b + lane < te && (u64)vend_i * vb - base <= VBYTES;
    u32 len = __popc(__ballot_sync(FULL_MASK, fits));
    if (ROW_CUT && b + len < te) {  // (warp-uniform) end at the last row end inside, if any
        const u32 ends = __ballot_sync(FULL_MASK, row_end > b && row_end <= b + len);
        const u32 cut = ends != 0u ? __shfl_sync(FULL_MASK, row_end, 31 - __clz(ends)) - b : 0u;
        if (4u * cut >= 3u * len) len = cut;
    }
    const u64 vend = (u64)__shfl_sync(FULL_MASK, vend_i, len - 1u) * vb;
    if (lane < len) {
        st.rec[lane] = m;
        const u32 k0 = m.z * 8u;
        if (vec && k0 + 8u <= cols) {
            cp_async16_ca(&st.x[lane][0], x + k0, 16u);
            cp_async16_ca(&st.x[lane][1], x + k0 + 4u, 16u);
        } else {
            float* d = reinterpret_cast<float*>(st.x[lane]);
#pragma unroll
            for (u32 j = 0; j < 8u; ++j) {
                const bool in = k0 + j < cols;
                cp_async4_ca(d + j, in ? x + k0 + j : x, in ? 4u : 0u);
            }
        }
    }
    const u32 pieces = (u32)((vend - base + 15u) / 16u);
    const char* src = reinterpret_cast<const char*>(values) + base;
    for (u32 k = lane; k < pieces; k += 32u) {
        const u32 off = 16u * k;
        cp_async16_cg(&st.val[k], src + off, min(16u, (u32)(vend - base) - off));
    }
    cp_async_commit();
    vbase = (u32)base;
    return len;
}

template <int F16, u32 TILES, u32 VBYTES, bool ROW_CUT>
__device__ __forceinline__ void spmv_staged_body(SPMV_WALK_BODY_PARAMS) {
    __shared__ SpmvStage<TILES, VBYTES> stages[SPMV_WARPS][2];
    const u32 lane = threadIdx.x, r = lane & 7u, q = lane >> 3;
    const u32 hidx = blockIdx.x * SPMV_WARPS + threadIdx.y;
    SPMV_WALK_HALF(hidx);  // (returns for the whole warp)
    SpmvStage<TILES, VBYTES>* st = stages[threadIdx.y];
    const CoreLane cl = core_lane(r);
    const bool vec = (reinterpret_cast<size_t>(x) & 15u) == 0u;
    const u32 vb = F16 ? 2u : 4u;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    // Issued together: the first stage's records and the half's row ends / scales (lane i: row
    // w.x + i; a half spans at most 32 rows, MAX_ROWS_PER_HALF).
    uint4 m = lane < TILES && t + lane < te ? __ldg(tiles + t + lane) : zero;
    const u32 nrows = rend - w.x;
    const u32 row_end = lane < nrows ? min(__ldg(ptr + w.x + 1u + lane), te) : te;
    const float row_s = (F16 && lane < nrows) ? __ldg(row_scale + w.x + lane) : 1.0f;
    u32 e = __shfl_sync(FULL_MASK, row_end, 0);
    float acc = 0.0f;
    // Writes the current row and moves to the next (empty rows included) while it ends at t.
    auto settle = [&]() {
        while (row < rend && t == e) {  // warp-uniform
            acc += __shfl_xor_sync(FULL_MASK, acc, 8);
            acc += __shfl_xor_sync(FULL_MASK, acc, 16);
            const float s = __shfl_sync(FULL_MASK, row_s, row - w.x);
            if (q == 0u) row_store(partial, y, rows, beta, split, slot, row, r, (alpha * s) * acc);
            acc = 0.0f;
            ++row;
            const u32 ne = __shfl_sync(FULL_MASK, row_end, (row - w.x) & 31u);
            e = row < rend ? ne : te;
        }
    };
    settle();
    u32 b = t, len = 0u, vbase = 0u, buf = 0u;
    if (b < te) {
        len = stage_issue<F16, TILES, VBYTES, ROW_CUT>(st[0], m, b, te, row_end, values, x, cols,
                                                        vec, lane, vbase);
        m = lane < TILES && b + len + lane < te ? __ldg(tiles + b + len + lane) : zero;
    }
    while (b < te) {
        const u32 bn = b + len;
        u32 len_n = 0u, vbase_n = 0u;
        if (bn < te) {  // the next stage's copies, then the records of the one after it
            len_n = stage_issue<F16, TILES, VBYTES, ROW_CUT>(st[buf ^ 1u], m, bn, te, row_end,
                                                              values, x, cols, vec, lane, vbase_n);
            m = lane < TILES && bn + len_n + lane < te ? __ldg(tiles + bn + len_n + lane) : zero;
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        const SpmvStage<TILES, VBYTES>& s = st[buf];
        const char* sv = reinterpret_cast<const char*>(s.val);
        while (t < bn) {  // warp-uniform
            const u32 lim = min(e, bn);
            const u32 i = t + q;
            if (i < lim) {
                const uint4 mm = s.rec[i - b];
                const CoreTile c = core_decode(mm, cl);
                const float4 xa = s.x[i - b][0], xc = s.x[i - b][1];
                const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xc.x, xc.y, xc.z, xc.w};
                // The row's first value (mod 2^32: the true offset is < VBYTES); one
                // running address, advanced per set bit (v11b: no base + offset add per bit).
                const char* pv = sv + (c.idx * vb - vbase);
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    // Only set bits multiply (no 0 * inf = NaN from an x the row does not use).
                    if ((c.bits >> j) & 1u) {
                        float v;
                        if (F16) {
                            const u16 h = *reinterpret_cast<const u16*>(pv);
                            asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(h));
                        } else {
                            v = *reinterpret_cast<const float*>(pv);
                        }
                        pv += vb;
                        acc = fmaf(v, xv[j], acc);
                    }
                }
            }
            t = min(t + 4u, lim);
            settle();
        }
        __syncwarp();  // every lane is done with st[buf] before it is refilled
        b = bn;
        len = len_n;
        vbase = vbase_n;
        buf ^= 1u;
    }
    settle();  // rows after the half's last tile (empty)
    // A split half's row was written to its slot by group 0; the row's last chunk writes y.
    uint2 fe;
    if (split && q == 0u && split_last(spl, cnt, slot, 0xffu, 0u, fe)) {
        const u64 yr = (u64)w.x * 8u + r;
        if (yr < rows) split_store(partial, fe, r, 1u, y, yr, 0u, beta);
    }
}

// `SPMV_STAGED_ENTRY(name, body<template arguments>)`: 5 blocks per SM (48 registers).
#define SPMV_STAGED_ENTRY(NAME, ...)                                                               \
    SPMV_N1_WALK_ENTRY_LB(__launch_bounds__(32 * SPMV_WARPS, 5), NAME, __VA_ARGS__)
#if SPMV_MODULE_N == 1
SPMV_STAGED_ENTRY(spmv_staged_f16, spmv_staged_body<1, 32u, 1232u, false>)
SPMV_STAGED_ENTRY(spmv_staged_f32, spmv_staged_body<0, 32u, 1232u, false>)
SPMV_STAGED_ENTRY(spmv_staged16_f16, spmv_staged_body<1, 16u, 1984u, true>)
SPMV_STAGED_ENTRY(spmv_staged16_f32, spmv_staged_body<0, 16u, 1984u, true>)
#endif

#endif  // TCSPARSE_SPMV_STAGED_CUH
