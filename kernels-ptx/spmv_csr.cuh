// The CSR walks for 2..8 right-hand sides on the shared DeviceCsr (`csr`: 8 lanes per nonzero;
// `csrrows`: lane groups owning whole rows) and the fix-up of their split rows (spmv_csr_fixup).
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).

#ifndef TCSPARSE_SPMV_CSR_CUH
#define TCSPARSE_SPMV_CSR_CUH

// ---------------------------------------------------------------------------------------------
// CSR walk for 2..8 right-hand sides (`csr`, spmv.md v14): y = alpha * A * X + beta * y on A's CSR
// arrays (the cuSPARSE baseline's, u32 indices), X `K x N` and y `M x N` row-major. Where bitBSR's
// tiles hold 1-5 nonzeros (graphs), a tile walk reads a 16-byte record per 1-5 products and its
// set-bit loops idle most lanes; this walk spends its lanes on the products. Work: warp items of
// crates/gpu csr_work ({row_begin, row_end, nnz_begin, nnz_end}: up to 32 whole rows within a
// nonzero budget, or one chunk of a longer row). Per step of 32 nonzeros the warp loads their
// (column, value) pairs coalesced, one per lane (the next step's while this one is summed), and
// lane i finds the item row of nonzero i by a branch-free binary search of the row ends (shared
// memory, padded to 32). Lane (g, j) = (lane / 8, lane % 8): slot g takes the step's nonzeros
// 8g .. 8g + 7 (pairs and rows shuffled from their lanes), lane j multiplies RHS j (j < N; one
// 4-byte X load per lane, so a slot reads one 32-byte X row per nonzero; the 8 X loads are issued
// before any FMA). Along its 8 consecutive nonzeros the lane sums runs of one row in a register
// and, at a run's end, adds the run to sums[warp][g][row][j] (zeroed per item; no branch: the adds
// are predicated). The warp then adds the 4 slots' sums of each row in slot order (deterministic)
// and writes y once (beta = 0 never reads y). A chunk of a split row writes its alpha-scaled sum to
// partial[item * N + j] instead, and spmv_csr_fixup (a second graph node) adds a split row's
// chunks in item order and writes y once. (v3; v1 and v2 walked each slot's nonzeros 4 apart and
// crossed rows in a divergent loop: 9.6-19 warp-instructions per nonzero under ncu.)
// ---------------------------------------------------------------------------------------------
#define SPMV_CSR_MAX_ROWS 32
template <int N>
__device__ __forceinline__ void spmv_csr_body(const u32* __restrict__ indptr,
                                              const u32* __restrict__ indices,
                                              const float* __restrict__ values,
                                              const uint4* __restrict__ work, u32 items,
                                              const float* __restrict__ x, float* __restrict__ y,
                                              float* __restrict__ partial, float alpha,
                                              float beta) {
    __shared__ __align__(16) float sums[SPMV_WARPS][4][SPMV_CSR_MAX_ROWS][N];
    __shared__ u32 ends[SPMV_WARPS][SPMV_CSR_MAX_ROWS];
    const u32 lane = threadIdx.x, wid = threadIdx.y;
    const u32 item = blockIdx.x * SPMV_WARPS + wid;
    if (item >= items) return;  // (whole warp)
    const uint4 w = __ldg(work + item);
    const u32 nrows = w.y - w.x;  // 1..32 (csr_work)
    const u32 g = lane >> 3, j = lane & 7u;
    const bool rhs = j < (u32)N;
    // The first 32 (column, value) pairs, one per lane, issued with the row ends.
    u32 cl = w.z + lane < w.w ? __ldg(indices + w.z + lane) : 0u;
    float vl = w.z + lane < w.w ? __ldg(values + w.z + lane) : 0.0f;
    // Row ends within the item, clamped to its nonzeros (a split chunk's one row ends at
    // nnz_end), padded with ~0 for the binary search.
    ends[wid][lane] = lane < nrows ? min(__ldg(indptr + w.x + lane + 1u), w.w) : 0xffffffffu;
    // A chunk of a row longer than the budget (csr_work's only single-row items that miss some of
    // their row's nonzeros).
    const bool split =
        nrows == 1u && (__ldg(indptr + w.x) < w.z || w.w < __ldg(indptr + w.x + 1u));
    // Zero the warp's sums (4 slots x 32 rows x N floats, as float4).
    float4* zero4 = reinterpret_cast<float4*>(&sums[wid][0][0][0]);
#pragma unroll
    for (u32 i = lane; i < 4u * SPMV_CSR_MAX_ROWS * N / 4u; i += 32u)
        zero4[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncwarp();
    const u32* e = ends[wid];
    float(*my)[N] = sums[wid][g];
    for (u32 k0 = w.z; k0 < w.w; k0 += 32u) {  // warp-uniform
        // Lane i: the item row of nonzero k0 + i (the number of row ends <= it; the last row
        // past the item's nonzeros, where the pair is 0).
        const u32 kl = min(k0 + lane, w.w - 1u);
        u32 rl = 0;
#pragma unroll
        for (u32 step = 16; step > 0; step >>= 1) rl += e[rl + step - 1u] <= kl ? step : 0u;
        // Slot g, sub-step q: nonzero k0 + 8g + q; its pair and row from lane 8g + q.
        float v[8], xv[8];
        u32 row[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const int src = 8 * (int)g + q;
            const u32 c = __shfl_sync(FULL_MASK, cl, src);
            v[q] = __shfl_sync(FULL_MASK, vl, src);
            row[q] = __shfl_sync(FULL_MASK, rl, src);
            xv[q] = (k0 + (u32)src < w.w && rhs) ? __ldg(x + (u64)c * N + j) : 0.0f;
        }
        // The next 32 pairs, in flight while these are summed.
        const u32 kn = k0 + 32u + lane;
        cl = kn < w.w ? __ldg(indices + kn) : 0u;
        vl = kn < w.w ? __ldg(values + kn) : 0.0f;
        // Runs of one row along the slot's 8 nonzeros (rows never decrease): the run's sum is added
        // to the slot's sum of that row where the next nonzero has another row, and at q = 7.
        float a = 0.0f;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            a = fmaf(v[q], xv[q], a);
            const bool run_end = q == 7 || row[q + (q < 7 ? 1 : 0)] != row[q];
            if (run_end && rhs) my[row[q]][j] += a;
            a = run_end ? 0.0f : a;
        }
    }
    __syncwarp();
    // Slot g writes rows g, g + 4, ...: the 4 slots' sums in slot order.
    for (u32 rr = g; rr < nrows; rr += 4u) {
        if (!rhs) continue;
        const float sum = ((sums[wid][0][rr][j] + sums[wid][1][rr][j]) + sums[wid][2][rr][j]) +
                          sums[wid][3][rr][j];
        if (split) {
            partial[(u64)item * N + j] = alpha * sum;
        } else {
            float* p = y + (u64)(w.x + rr) * N + j;
            *p = beta == 0.0f ? alpha * sum : fmaf(beta, *p, alpha * sum);
        }
    }
}

// 5 blocks (40 warps) per SM: at N = 8 ptxas would take 58 registers (4 blocks) without the bound.
#define SPMV_CSR_ENTRY(N)                                                                          \
    extern "C" __global__ void __launch_bounds__(32 * SPMV_WARPS, 5)                               \
        spmv_csr##N(const u32* __restrict__ indptr, const u32* __restrict__ indices,               \
                    const float* __restrict__ values, const uint4* __restrict__ work, u32 items,   \
                    const float* __restrict__ x, float* __restrict__ y,                            \
                    float* __restrict__ partial, float alpha, float beta) {                        \
        spmv_csr_body<N>(indptr, indices, values, work, items, x, y, partial, alpha, beta);        \
    }

// ---------------------------------------------------------------------------------------------
// CSR row walk for 2..8 right-hand sides (`csrrows`, spmv.md v15): the CSR walk's items, arrays and
// fix-up, but each row summed by one lane group from its own registers. Under ncu (H100, 2026-11-28,
// 46db4ef) the step walk above ran 8.3 (clustered1m) to 15.4 (REDDIT) warp-instructions per nonzero:
// per 32 nonzeros a 5-level binary search of the row ends in shared memory and a predicated
// shared-memory add per run. Here an item of several whole rows is cut at row ends into four
// row-aligned runs of about a quarter of its nonzeros each (three ballots over the row ends, one
// per lane), group g (lane (g, j) = (lane / 8, lane % 8), lane j multiplying RHS j) walks run g:
// per step 8 consecutive nonzeros (one coalesced (column, value) load per lane, shuffled to the
// group, the 8 X loads issued before the FMAs, the next step's pairs loaded while these are
// summed), one register sum per lane; where a row ends (a compare with the current row's end,
// branch taken by that group only) the sum is written to y once and the walk moves to the next
// non-empty row (a mask of the item's non-empty rows; their ends in shared memory). Empty rows are
// written first (beta * y, 0 when beta = 0: y never read then). A one-row item (a row longer than
// the budget, or one chunk of it) is summed by the whole warp: group g takes nonzeros 8g..8g + 7 of
// each 32, the four group sums added by two xor shuffles (a fixed order); a split chunk writes its
// alpha-scaled sum to partial[item * N + j] for spmv_csr_fixup, as the step walk does. Every row is
// summed in a fixed order and written once per call.
// ---------------------------------------------------------------------------------------------
template <int N>
__device__ __forceinline__ void csr_row_write(float* __restrict__ y, u64 row, u32 j, float v,
                                              float beta) {
    float* p = y + row * N + j;
    *p = beta == 0.0f ? v : fmaf(beta, *p, v);
}

template <int N>
__device__ __forceinline__ void spmv_csrrows_body(const u32* __restrict__ indptr,
                                                  const u32* __restrict__ indices,
                                                  const float* __restrict__ values,
                                                  const uint4* __restrict__ work, u32 items,
                                                  const float* __restrict__ x,
                                                  float* __restrict__ y,
                                                  float* __restrict__ partial, float alpha,
                                                  float beta) {
    __shared__ u32 ends[SPMV_WARPS][SPMV_CSR_MAX_ROWS];
    const u32 lane = threadIdx.x, wid = threadIdx.y;
    const u32 item = blockIdx.x * SPMV_WARPS + wid;
    if (item >= items) return;  // (whole warp)
    const uint4 w = __ldg(work + item);
    const u32 nrows = w.y - w.x;  // 1..32 (csr_work)
    const u32 g = lane >> 3, j = lane & 7u;
    const bool rhs = j < (u32)N;
    if (nrows == 1u) {
        // One row (whole, or a chunk of a row longer than the budget): the whole warp.
        u32 cl = w.z + lane < w.w ? __ldg(indices + w.z + lane) : 0u;
        float vl = w.z + lane < w.w ? __ldg(values + w.z + lane) : 0.0f;
        const bool split =
            __ldg(indptr + w.x) < w.z || w.w < __ldg(indptr + w.x + 1u);
        float acc = 0.0f;
        for (u32 k0 = w.z; k0 < w.w; k0 += 32u) {  // warp-uniform
            float v[8], xv[8];
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int src = 8 * (int)g + q;
                const u32 c = __shfl_sync(FULL_MASK, cl, src);
                v[q] = __shfl_sync(FULL_MASK, vl, src);
                xv[q] = (k0 + (u32)src < w.w && rhs) ? __ldg(x + (u64)c * N + j) : 0.0f;
            }
            const u32 kn = k0 + 32u + lane;
            cl = kn < w.w ? __ldg(indices + kn) : 0u;
            vl = kn < w.w ? __ldg(values + kn) : 0.0f;
#pragma unroll
            for (int q = 0; q < 8; ++q) acc = fmaf(v[q], xv[q], acc);
        }
        acc += __shfl_xor_sync(FULL_MASK, acc, 8);
        acc += __shfl_xor_sync(FULL_MASK, acc, 16);
        if (g == 0u && rhs) {
            if (split) {
                partial[(u64)item * N + j] = alpha * acc;
            } else {
                csr_row_write<N>(y, w.x, j, alpha * acc, beta);
            }
        }
        return;
    }
    // Several whole rows: their nonzeros are w.z .. w.w. The item's pairs on their way to L2 while
    // the row ends arrive (the runs' first loads need the ends).
    const u32 nnz = w.w - w.z;
    if (lane * 32u < nnz) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(indices + w.z + lane * 32u));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(values + w.z + lane * 32u));
    }
    const bool in = lane < nrows;
    const u32 rend = in ? __ldg(indptr + w.x + lane + 1u) : w.w;
    const u32 up = __shfl_up_sync(FULL_MASK, rend, 1);
    const u32 rbeg = lane == 0u ? w.z : up;
    ends[wid][lane] = rend;
    const u32 nonempty = __ballot_sync(FULL_MASK, in && rend > rbeg);
    // Empty rows: y = beta * y (0 when beta = 0), written by group (row % 4).
    for (u32 empty = __ballot_sync(FULL_MASK, in && rend == rbeg); empty != 0u;
         empty &= empty - 1u) {  // warp-uniform
        const u32 r = __ffs(empty) - 1u;
        if ((r & 3u) == g && rhs) csr_row_write<N>(y, w.x + r, j, 0.0f, beta);
    }
    // Run g: rows first_g .. first_{g+1} - 1, first_g = the rows ending at or before the item's
    // g-th nonzero quarter (first_0 = 0, first_4 = nrows).
    const u32 f1 = __popc(__ballot_sync(FULL_MASK, in && rend <= w.z + nnz / 4u));
    const u32 f2 = __popc(__ballot_sync(FULL_MASK, in && rend <= w.z + nnz / 2u));
    const u32 f3 = __popc(__ballot_sync(FULL_MASK, in && rend <= w.z + nnz - nnz / 4u));
    const u32 r0 = g == 0u ? 0u : (g == 1u ? f1 : (g == 2u ? f2 : f3));
    const u32 r1 = g == 0u ? f1 : (g == 1u ? f2 : (g == 2u ? f3 : nrows));
    const u32 s0 = __shfl_sync(FULL_MASK, rend, (r0 - 1u) & 31u);
    const u32 s1 = __shfl_sync(FULL_MASK, rend, (r1 - 1u) & 31u);
    const u32 gb = r0 == 0u ? w.z : s0;  // run g's nonzeros: gb .. ge - 1
    const u32 ge = r1 == 0u ? w.z : s1;
    // The run's current row (its first non-empty one; none when the run has no nonzeros) and end.
    u32 rr = r0 < 32u ? __ffs(nonempty & (0xffffffffu << r0)) - 1u : 0xffffffffu;
    __syncwarp();
    u32 e = gb < ge ? ends[wid][rr] : 0u;
    float acc = 0.0f;
    u32 cl = gb + j < ge ? __ldg(indices + gb + j) : 0u;
    float vl = gb + j < ge ? __ldg(values + gb + j) : 0.0f;
    for (u32 k = gb; __any_sync(FULL_MASK, k < ge); k += 8u) {
        float v[8], xv[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const int src = 8 * (int)g + q;
            const u32 c = __shfl_sync(FULL_MASK, cl, src);
            v[q] = __shfl_sync(FULL_MASK, vl, src);
            xv[q] = (k + (u32)q < ge && rhs) ? __ldg(x + (u64)c * N + j) : 0.0f;
        }
        const u32 kn = k + 8u + j;
        cl = kn < ge ? __ldg(indices + kn) : 0u;
        vl = kn < ge ? __ldg(values + kn) : 0.0f;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            acc = fmaf(v[q], xv[q], acc);
            if (k + (u32)q + 1u == e && k + (u32)q < ge) {  // run g's row rr ends here
                if (rhs) csr_row_write<N>(y, w.x + rr, j, alpha * acc, beta);
                acc = 0.0f;
                rr = rr < 31u ? __ffs(nonempty & (0xfffffffeu << rr)) - 1u : 0xffffffffu;
                e = rr < 32u ? ends[wid][rr] : 0u;
            }
        }
    }
}

// 5 blocks (40 warps) per SM, as the step walk.
#define SPMV_CSRROWS_ENTRY(N)                                                                      \
    extern "C" __global__ void __launch_bounds__(32 * SPMV_WARPS, 5)                               \
        spmv_csrrows##N(const u32* __restrict__ indptr, const u32* __restrict__ indices,           \
                        const float* __restrict__ values, const uint4* __restrict__ work,          \
                        u32 items, const float* __restrict__ x, float* __restrict__ y,             \
                        float* __restrict__ partial, float alpha, float beta) {                    \
        spmv_csrrows_body<N>(indptr, indices, values, work, items, x, y, partial, alpha, beta);    \
    }

// Split rows of the CSR walk: fix[i] = {row, first item, end item}; one thread per (split row,
// RHS j): y = the items' partials (alpha applied) in item order + beta * y.
#if SPMV_MODULE_N == 1
extern "C" __global__ void __launch_bounds__(256)
    spmv_csr_fixup(const u32* __restrict__ fix, u32 num_fix, const float* __restrict__ partial,
                   float* __restrict__ y, u32 n, float beta) {
    const u64 id = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (u64)num_fix * n) return;
    const u32 i = (u32)(id / n), j = (u32)(id % n);
    const u32 row = __ldg(fix + 3 * i), s0 = __ldg(fix + 3 * i + 1), s1 = __ldg(fix + 3 * i + 2);
    float sum = 0.0f;
    for (u32 s = s0; s < s1; ++s) sum += __ldg(partial + (u64)s * n + j);
    float* p = y + (u64)row * n + j;
    *p = beta == 0.0f ? sum : fmaf(beta, *p, sum);
}
#endif

#endif  // TCSPARSE_SPMV_CSR_CUH
