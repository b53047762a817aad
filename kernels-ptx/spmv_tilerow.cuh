// The one-right-hand-side walks in per-tile-row layouts: `corew` (warp per half), `lane`,
// `blocklane` (thread block per half, for long rows of sparse tiles) and `blockw`.
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).

#ifndef TCSPARSE_SPMV_TILEROW_CUH
#define TCSPARSE_SPMV_TILEROW_CUH

// ---------------------------------------------------------------------------------------------
// Variant "warp per half": the warp walks one half's tile-rows; per step its 4 groups take U x 4
// consecutive tiles of the current tile-row (group q: tiles t + q, t + 4 + q, ...), so each load
// instruction touches 1-2 cache lines (records, values and, on banded matrices, x segments are
// contiguous) instead of 4. Lane r of group q accumulates row r over its group's tiles; at the end
// of a tile-row two xor-shuffles add the 4 groups and group 0 writes. The next step's records (the
// next tile-row's first ones at a row end) and the next row's end and scale are prefetched.
// ---------------------------------------------------------------------------------------------
template <int F16, int U>
__device__ __forceinline__ void spmv_corew_body(SPMV_WALK_BODY_PARAMS) {
    const u32 lane = threadIdx.x, r = lane & 7u, q = lane >> 3;
    const u32 hidx = blockIdx.x * SPMV_WARPS + threadIdx.y;
    SPMV_WALK_HALF(hidx);  // (returns for the whole warp)
    const CoreLane cl = core_lane(r);
    const bool vec = (reinterpret_cast<size_t>(x) & 15u) == 0u;
    u32 e = min(__ldg(ptr + row + 1), te);
    float s = F16 ? __ldg(row_scale + row) : 1.0f;
    u32 e_next = row + 1u < rend ? min(__ldg(ptr + row + 2), te) : te;
    float s_next = (F16 && row + 1u < rend) ? __ldg(row_scale + row + 1) : 1.0f;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 m[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        // Loaded within the half (te) before the row end e arrives, then cut at e.
        const u32 i = t + 4u * u + q;
        const uint4 r = i < te ? __ldg(tiles + i) : zero;
        m[u] = i < e ? r : zero;
    }
    float acc = 0.0f;
    while (row < rend) {
        // Next step: the rest of this tile-row, or the next tile-row's first tiles.
        const bool row_end = t + 4u * U >= e;
        const u32 nt = row_end ? e : t + 4u * U;
        const u32 ne = row_end ? (row + 1u < rend ? e_next : nt) : e;
        uint4 mn[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const u32 i = nt + 4u * u + q;
            mn[u] = i < ne ? __ldg(tiles + i) : zero;
        }
        float xv[U][8], v[U][8];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const CoreTile c = core_decode(m[u], cl);
            if ((m[u].x | m[u].y) != 0u) {
                core_x(x, m[u].z, cols, vec, xv[u]);
            } else {
#pragma unroll
                for (int j = 0; j < 8; ++j) xv[u][j] = 0.0f;
            }
            core_load<F16>(values, c, v[u]);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
            for (int j = 0; j < 8; ++j) acc = fmaf(v[u][j], xv[u][j], acc);
        }
        if (row_end) {  // warp-uniform
            acc += __shfl_xor_sync(FULL_MASK, acc, 8);
            acc += __shfl_xor_sync(FULL_MASK, acc, 16);
            if (q == 0u) {
                row_store(partial, y, rows, beta, split, slot, row, r, (alpha * s) * acc);
            }
            acc = 0.0f;
            row_cursor_step<F16>(row, rend, te, ptr, row_scale, ne, e, s, e_next, s_next);
        }
        t = nt;
#pragma unroll
        for (int u = 0; u < U; ++u) m[u] = mn[u];
    }
    // A split half's row was written to its slot by group 0; the row's last chunk writes y.
    uint2 fe;
    if (split && q == 0u && split_last(spl, cnt, slot, 0xffu, 0u, fe)) {
        const u64 yr = (u64)w.x * 8u + r;
        if (yr < rows) split_store(partial, fe, r, 1u, y, yr, 0u, beta);
    }
}

#if SPMV_MODULE_N == 1
SPMV_N1_WALK_ENTRY(spmv_corew1_f16, spmv_corew_body<1, 1>)
SPMV_N1_WALK_ENTRY(spmv_corew1_f32, spmv_corew_body<0, 1>)
SPMV_N1_WALK_ENTRY(spmv_corew2_f16, spmv_corew_body<1, 2>)
SPMV_N1_WALK_ENTRY(spmv_corew2_f32, spmv_corew_body<0, 2>)
#endif

// ---------------------------------------------------------------------------------------------
// Variant "lane per tile" (v7, n = 1): the warp walks one half's tile-rows; per step lane i takes
// tile t + i of the current tile-row (32 tiles per step, the next step's records loaded one step
// ahead) and visits the set bits of the tile's whole 64-bit bitmap in value order (two per
// iteration, their value and x loads before the FMAs: a set bit's column is < K, `BitBsrSpmv::new`
// checks it), adding value * x[8c + column] to its own sum of the bit's row in shared memory
// (acc[row][lane], lane-private until the row's end). At the end of a tile-row the warp adds the
// 32 lanes' 8 sums (lane l: row l & 7 over 8 lanes' slots, two xor-shuffles) and lanes 0-7 write.
// For sparse tiles (1-3 nonzeros: social graphs, R-MAT), where `core` spends 8 lanes and 8 bit
// positions per tile on 1-2 values.
// ---------------------------------------------------------------------------------------------
// `lane`'s per-tile work: adds tile record m's set bits (value order, two per iteration, their
// value and x loads before the FMAs; a set bit's column is < K: `BitBsrSpmv::new` checks it) to
// acc[row][lane], the lane's sum of each row of the tile-row in shared memory.
template <int F16>
__device__ __forceinline__ void lane_tile(uint4 m, const void* __restrict__ values,
                                          const float* __restrict__ x, float (*acc)[33], u32 lane) {
    u64 b = ((u64)m.y << 32) | m.x;
    u32 idx = m.w;
    const u32 xb = m.z * 8u;
    while (b != 0u) {
        const u32 p0 = (u32)__ffsll((long long)b) - 1u;
        b &= b - 1u;
        const bool two = b != 0u;
        const u32 p1 = two ? (u32)__ffsll((long long)b) - 1u : p0;
        b &= two ? b - 1u : b;
        const float v0 = core_val<F16>(values, idx);
        const float x0 = __ldg(x + xb + (p0 & 7u));
        const float v1 = two ? core_val<F16>(values, idx + 1u) : 0.0f;
        const float x1 = two ? __ldg(x + xb + (p1 & 7u)) : 0.0f;
        idx += 2u;
        float* a0 = &acc[p0 >> 3][lane];
        *a0 = fmaf(v0, x0, *a0);
        if (two) {  // an odd count's second bit is skipped, not multiplied by 0
            float* a1 = &acc[p1 >> 3][lane];
            *a1 = fmaf(v1, x1, *a1);
        }
    }
}

// At a row end of `lane` / `blocklane`: the warp's sum of row lane & 7 (lane l adds the sums of
// lanes 8(l >> 3) .. +7, two xor-shuffles add the 4 groups), and the 32 lanes' sums reset to 0.
__device__ __forceinline__ float lane_row_sum(float (*acc)[33], u32 lane) {
    const u32 rr = lane & 7u, qq = lane >> 3;
    __syncwarp();
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) sum += acc[rr][qq * 8u + k];
    sum += __shfl_xor_sync(FULL_MASK, sum, 8);
    sum += __shfl_xor_sync(FULL_MASK, sum, 16);
    __syncwarp();
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q][lane] = 0.0f;
    return sum;
}

template <int F16>
__device__ __forceinline__ void spmv_lane_body(SPMV_WALK_BODY_PARAMS) {
    __shared__ float lane_acc[SPMV_WARPS][8][33];  // 33: conflict-free row-end reads
    const u32 lane = threadIdx.x;
    const u32 hidx = blockIdx.x * SPMV_WARPS + threadIdx.y;
    SPMV_WALK_HALF(hidx);  // (returns for the whole warp)
    float(*acc)[33] = lane_acc[threadIdx.y];
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q][lane] = 0.0f;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    // The first records are bounded by the half, not the row: issued before the row end arrives.
    uint4 m = t + lane < te ? __ldg(tiles + t + lane) : zero;
    u32 e, e_next;
    float s, s_next;
    row_cursor_init<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
    while (row < rend) {
        for (u32 i = t + lane; i < e; i += 32u) {  // m holds tile i's record
            const u32 nx = i + 32u;
            const uint4 mn = nx < e ? __ldg(tiles + nx) : zero;
            lane_tile<F16>(m, values, x, acc, lane);
            m = mn;
        }
        // Row end (warp-uniform). The next tile-row's first records first (its end is the cursor's
        // e_next), then add the 32 lanes' sums of each row, reset them, lanes 0-7 write.
        const u32 ne = row + 1u < rend ? min(e_next, te) : e;
        m = e + lane < ne ? __ldg(tiles + e + lane) : zero;
        const float sum = lane_row_sum(acc, lane);
        if (lane < 8u) {
            row_store(partial, y, rows, beta, split, slot, row, lane, (alpha * s) * sum);
        }
        t = e;
        row_cursor_next<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
    }
    // A split half's row was written to its slot by lanes 0-7; the row's last chunk writes y.
    uint2 fe;
    if (split && lane < 8u && split_last(spl, cnt, slot, 0xffu, 0u, fe)) {
        const u64 yr = (u64)w.x * 8u + lane;
        if (yr < rows) split_store(partial, fe, lane, 1u, y, yr, 0u, beta);
    }
}

#if SPMV_MODULE_N == 1
SPMV_N1_WALK_ENTRY(spmv_lane_f16, spmv_lane_body<1>)
SPMV_N1_WALK_ENTRY(spmv_lane_f32, spmv_lane_body<0>)
#endif

// The block walks' end of a split half at n = 1 (one row, block-row `row`, whose slot warp 0's
// lanes 0-7 wrote): those lanes count the chunk, and the row's last chunk writes y (split_last).
__device__ __forceinline__ void block_split_finish(bool split, u32 slot, u32 row,
                                                   const uint2* __restrict__ spl,
                                                   u32* __restrict__ cnt,
                                                   const float* __restrict__ partial,
                                                   float* __restrict__ y, u32 rows, float beta) {
    const u32 lane = threadIdx.x;
    uint2 fe;
    if (split && threadIdx.y == 0u && lane < 8u && split_last(spl, cnt, slot, 0xffu, 0u, fe)) {
        const u64 yr = (u64)row * 8u + lane;
        if (yr < rows) split_store(partial, fe, lane, 1u, y, yr, 0u, beta);
    }
}

// ---------------------------------------------------------------------------------------------
// Variant "block lane" (v12, n = 1): `lane`'s per-tile work with one half per *thread block*
// (8 warps, 256 threads) instead of one per warp. Per tile-row of the half, thread k takes tiles
// t + k, t + k + 256, ... (the next one's record loaded one step ahead) and sums its set bits per
// row in shared memory as `lane` does; at the row end each warp adds its 32 lanes' 8 sums (two
// xor-shuffles), lanes 0-7 of each warp put theirs in `red`, and after one barrier warp 0 adds
// the 8 warps' sums in warp order and writes the row (two `red` buffers, alternating per row, so
// one barrier per row suffices). So a tile-row of up to the tile budget (256-1024 tiles) is summed
// inside one block -- no partial slots, fences or atomics, the chain `lane` pays per chunk when
// budgets of ~32 tiles split every row (sparse-tile matrices of a few hundred tiles per row:
// BlogCatalog); longer rows are split as in `lane` (warp 0 writes the chunk's slot, the row's last
// chunk sums the slots).
// ---------------------------------------------------------------------------------------------
template <int F16>
__device__ __forceinline__ void spmv_blocklane_body(SPMV_WALK_BODY_PARAMS) {
    __shared__ float lane_acc[SPMV_WARPS][8][33];  // 33: conflict-free row-end reads
    __shared__ float red[2][SPMV_WARPS][8];
    const u32 lane = threadIdx.x, wid = threadIdx.y, tid = wid * 32u + lane;
    constexpr u32 STRIDE = 32u * SPMV_WARPS;
    SPMV_WALK_HALF(blockIdx.x);  // (returns for the whole block: uniform)
    float(*acc)[33] = lane_acc[wid];
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q][lane] = 0.0f;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    // The first records are bounded by the half, not the row: issued before the row end arrives.
    uint4 m = t + tid < te ? __ldg(tiles + t + tid) : zero;
    u32 e, e_next;
    float s, s_next;
    row_cursor_init<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
    u32 parity = 0u;
    while (row < rend) {  // block-uniform
        for (u32 i = t + tid; i < e; i += STRIDE) {  // m holds tile i's record
            const u32 nx = i + STRIDE;
            const uint4 mn = nx < e ? __ldg(tiles + nx) : zero;
            lane_tile<F16>(m, values, x, acc, lane);
            m = mn;
        }
        // Row end (block-uniform). The next tile-row's first records first, then the warp's sums.
        const u32 ne = row + 1u < rend ? min(e_next, te) : e;
        m = e + tid < ne ? __ldg(tiles + e + tid) : zero;
        const float sum = lane_row_sum(acc, lane);
        if (lane < 8u) red[parity][wid][lane] = sum;
        // One barrier per row: red[parity] is rewritten two rows later, after the next barrier,
        // which warp 0 reaches only once it has read this row's sums.
        __syncthreads();
        if (wid == 0u && lane < 8u) {
            float total = 0.0f;
#pragma unroll
            for (int k = 0; k < SPMV_WARPS; ++k) total += red[parity][k][lane];
            row_store(partial, y, rows, beta, split, slot, row, lane, (alpha * s) * total);
        }
        parity ^= 1u;
        t = e;
        row_cursor_next<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
    }
    // A split half's row was written to its slot by warp 0's lanes 0-7.
    block_split_finish(split, slot, w.x, spl, cnt, partial, y, rows, beta);
}

// 40 registers (6 blocks, 48 warps per SM): at the 32 that full occupancy allows the f16 entry
// spilled.
#if SPMV_MODULE_N == 1
SPMV_N1_WALK_ENTRY_LB(__launch_bounds__(32 * SPMV_WARPS, 6), spmv_blocklane_f16,
                      spmv_blocklane_body<1>)
SPMV_N1_WALK_ENTRY_LB(__launch_bounds__(32 * SPMV_WARPS, 6), spmv_blocklane_f32,
                      spmv_blocklane_body<0>)
#endif

// The block walks' (`blockw`, `blockbw`) warp ranges: lane i holds row_end = the end of the
// half's row i (cut at te); the local row holding tile `from` is the first whose end is past it
// (empty rows skipped; from < te, and the half's last row ends at te).
__device__ __forceinline__ u32 range_row_of(u32 row_end, u32 nrows, u32 lane, u32 from) {
    const u32 past = __ballot_sync(FULL_MASK, lane < nrows && row_end > from);
    return (u32)__ffs(past) - 1u;
}

// The step after the one at tile tt of local row rl (which ends at e, cut at the range end b), 8
// tiles per step (`corew2`'s): its first tile nt, whether this step ends the row (or the range),
// the next step's row and its end, and group q's two records of it (the rest of this row, or the
// next row's first tiles; zero past them), loaded before this step multiplies.
struct RangeStep {
    u32 nt, nrl, ne;
    bool ends;
    uint4 n0, n1;
};

__device__ __forceinline__ RangeStep range_step(const uint4* __restrict__ tiles, u32 tt, u32 rl,
                                                u32 e, u32 b, u32 row_end, u32 nrows, u32 lane,
                                                u32 q) {
    RangeStep st;
    st.nt = min(tt + 8u, e);
    st.ends = st.nt == e;
    st.nrl = rl;
    st.ne = e;
    if (st.ends && e < b) {  // warp-uniform
        st.nrl = range_row_of(row_end, nrows, lane, e);
        st.ne = min(__shfl_sync(FULL_MASK, row_end, st.nrl), b);
    }
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    st.n0 = st.nt < b && st.nt + q < st.ne ? __ldg(tiles + st.nt + q) : zero;
    st.n1 = st.nt < b && st.nt + 4u + q < st.ne ? __ldg(tiles + st.nt + 4u + q) : zero;
    return st;
}

// ---------------------------------------------------------------------------------------------
// Variant "block warps" (v12b, n = 1): `corew2`'s per-warp walk with one half per thread block.
// The half's tiles are cut into 8 contiguous ranges, one per warp; a warp walks its range as
// `corew2` does (per step its 4 groups take 8 consecutive tiles of the current tile-row, lane r of
// group q sums row r; the next step's records are loaded before this step multiplies) and at each
// tile-row end inside its range adds the 4 groups (two xor-shuffles) into part[warp][row][r]
// (zero for rows it does not reach). After one barrier, thread (row, r) adds the 8 warps' sums in
// warp order and writes the row once. So rows up to the tile budget (32-256 tiles) are summed inside
// the block -- no split slots, fences or atomics (`corew2` at budget 8 splits every tile-row longer
// than 8 tiles: bcsstk17, mbeacxc) -- and the result does not depend on scheduling. Longer rows are
// split as in the other walks (the chunk's sum goes to its slot, the row's last chunk adds them).
// ---------------------------------------------------------------------------------------------
template <int F16>
__device__ __forceinline__ void spmv_blockw_body(SPMV_WALK_BODY_PARAMS) {
    constexpr u32 MAXR = 32u;  // MAX_ROWS_PER_HALF (crates/formats/src/bitbsr_device.rs)
    __shared__ float part[SPMV_WARPS][MAXR][8];
    const u32 lane = threadIdx.x, wid = threadIdx.y, tid = wid * 32u + lane;
    const u32 r = lane & 7u, q = lane >> 3;
    SPMV_WALK_HALF(blockIdx.x);  // (returns for the whole block: uniform)
    const u32 nrows = rend - w.x;  // <= MAXR (SpmvWork::check)
    // This thread's output row and its scale, loaded before the walk.
    const u32 out_row = tid >> 3, out_r = tid & 7u;
    const float out_s = (F16 && out_row < nrows) ? __ldg(row_scale + w.x + out_row) : 1.0f;
    // Lane i: the end of the half's row i (cut at te), as in `staged`.
    const u32 row_end = lane < nrows ? min(__ldg(ptr + w.x + 1u + lane), te) : te;
    const u32 per = (te - t + SPMV_WARPS - 1u) / SPMV_WARPS;
    const u32 a = min(t + wid * per, te), b = min(a + per, te);
    // The first step's records, bounded by the range (issued with the row ends, not after them)
    // and cut at the first row's end below.
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 m0 = a + q < b ? __ldg(tiles + a + q) : zero;
    uint4 m1 = a + 4u + q < b ? __ldg(tiles + a + 4u + q) : zero;
    for (u32 k = lane; k < nrows * 8u; k += 32u) part[wid][k >> 3][k & 7u] = 0.0f;
    __syncwarp();  // the zeros before this warp's lanes 0-7 write its row sums
    if (a < b) {  // warp-uniform
        const CoreLane cl = core_lane(r);
        const bool vec = (reinterpret_cast<size_t>(x) & 15u) == 0u;
        auto row_of = [&](u32 from) { return range_row_of(row_end, nrows, lane, from); };
        u32 rl = row_of(a);
        u32 e = min(__shfl_sync(FULL_MASK, row_end, rl), b);
        u32 tt = a;
        m0 = a + q < e ? m0 : zero;
        m1 = a + 4u + q < e ? m1 : zero;
        float acc = 0.0f;
        while (tt < b) {  // warp-uniform
            const RangeStep ns = range_step(tiles, tt, rl, e, b, row_end, nrows, lane, q);
            const u32 nt = ns.nt, nrl = ns.nrl, ne = ns.ne;
            const bool ends = ns.ends;
            const uint4 n0 = ns.n0, n1 = ns.n1;
            float x0[8], x1[8], v0[8], v1[8];
            const CoreTile c0 = core_decode(m0, cl), c1 = core_decode(m1, cl);
            core_x(x, m0.z, cols, vec, x0);  // a zero record: column 0, in bounds, unused
            core_x(x, m1.z, cols, vec, x1);
            core_load<F16>(values, c0, v0);
            core_load<F16>(values, c1, v1);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                // Only set bits multiply (no 0 * inf = NaN from an x the row does not use).
                if ((c0.bits >> j) & 1u) acc = fmaf(v0[j], x0[j], acc);
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                if ((c1.bits >> j) & 1u) acc = fmaf(v1[j], x1[j], acc);
            }
            if (ends) {  // row end or the range's end: this warp's sum of the row
                acc += __shfl_xor_sync(FULL_MASK, acc, 8);
                acc += __shfl_xor_sync(FULL_MASK, acc, 16);
                if (q == 0u) part[wid][rl][r] = acc;
                acc = 0.0f;
            }
            tt = nt;
            rl = nrl;
            e = ne;
            m0 = n0;
            m1 = n1;
        }
    }
    __syncthreads();
    if (out_row < nrows) {  // every row of the half written once (empty ones: 0 + beta * y)
        float total = 0.0f;
#pragma unroll
        for (int k = 0; k < SPMV_WARPS; ++k) total += part[k][out_row][out_r];
        row_store(partial, y, rows, beta, split, slot, w.x + out_row, out_r,
                  (alpha * out_s) * total);
    }
    // A split half (one row) was written to its slot by threads 0-7 (warp 0).
    block_split_finish(split, slot, w.x, spl, cnt, partial, y, rows, beta);
}

// 64 registers (4 blocks, 32 warps per SM): at 40 the two tiles' loads in flight spilled ~100 B.
#if SPMV_MODULE_N == 1
SPMV_N1_WALK_ENTRY_LB(__launch_bounds__(32 * SPMV_WARPS, 4), spmv_blockw_f16, spmv_blockw_body<1>)
SPMV_N1_WALK_ENTRY_LB(__launch_bounds__(32 * SPMV_WARPS, 4), spmv_blockw_f32, spmv_blockw_body<0>)
#endif

#endif  // TCSPARSE_SPMV_TILEROW_CUH
