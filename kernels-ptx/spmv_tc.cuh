// The `tc` walk: the set-bit walk's x reuse on tensor cores (TF32 m16n8k8 or f16), 1..8
// right-hand sides.
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).

#ifndef TCSPARSE_SPMV_TC_CUH
#define TCSPARSE_SPMV_TC_CUH

// ---------------------------------------------------------------------------------------------
// "tc": the set-bit walk's x reuse on tensor cores, n = 1..8 right-hand sides (v5). One warp per
// work item (two halves: top and bottom of the MMA, as the MMA kernels in spmv_mma.cuh), but with
// the walk's lean bookkeeping: per step the warp multiplies the next tile T1 of its top half and T2 of its
// bottom half with two mma.sync.m16n8k8 (TF32) accumulating in C: A = [T1; 0] with B = the x
// segment of T1 (8 k-rows x 8 RHS), then [0; T2] with T2's segment. Each x element of a tile's
// segment is loaded once per tile (lane (g, t): x[8c + t][g] and x[8c + t + 4][g], 32 lanes = 256
// contiguous bytes at N = 8) instead of once per nonzero (the set-bit walk's 32-byte x row per
// nonzero, its L1/LSU bound). Decode per tile and lane: the lane's two A positions (g, t) and
// (g, t + 4) lie in row byte g, so one word select, one popc of the low word (rows g >= 4) and one
// popc per position give both value offsets (values are in bit order), a bit test each predicates
// the value load; no shuffles, no x16 pass (X read as f32, rounded with cvt.rna.tf32), tile records
// loaded directly (one address per warp, broadcast) one iteration ahead. F16 tiles: values converted
// to f32 (exact in TF32) and the tile-row scale applied at the flush. U = 2 steps per iteration,
// all loads of both before the first MMA. A zero tile (a half that has run out) loads nothing.
// Caveat shared with the MMA kernels: an inf/NaN in X multiplies the zeros of its tile column too.
// ---------------------------------------------------------------------------------------------

struct TcHalf {
    u32 row, rend, t, te, e, e_next, slot;
    bool split;
    float s, s_next;
};

template <int F16>
__device__ __forceinline__ void tc_init(TcHalf& h, uint4 w, const u32* __restrict__ ptr,
                                        const float* __restrict__ row_scale) {
    h.split = (w.y & SPLIT_BIT) != 0u;
    h.slot = w.y & ~SPLIT_BIT;
    h.rend = h.split ? w.x + 1u : w.y;
    h.row = w.x;
    h.t = w.z;
    h.te = w.w;
    row_cursor_init<F16>(h.row, h.rend, h.te, ptr, row_scale, h.e, h.s, h.e_next, h.s_next);
}

// Writes the rows of half h that end at its current tile (acc[0], acc[1] = row g, RHS 2t, 2t + 1).
template <int F16, int N>
__device__ __forceinline__ void tc_settle(TcHalf& h, float acc[2], const u32* __restrict__ ptr,
                                          const float* __restrict__ row_scale,
                                          float* __restrict__ y, float* __restrict__ partial,
                                          u32 rows, float alpha, float beta, u32 g, u32 t) {
    while (h.row < h.rend && h.t == h.e) {  // warp-uniform
        const float sc = alpha * h.s;
        const u64 yr = (u64)h.row * 8u + g;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const u32 j = 2u * t + q;
            const float v = sc * acc[q];
            acc[q] = 0.0f;
            if (j < (u32)N) {
                if (h.split) {
                    partial[((u64)h.slot * 8u + g) * N + j] = v;
                } else if (yr < rows) {
                    float* py = y + yr * N + j;
                    *py = beta == 0.0f ? v : fmaf(beta, *py, v);
                }
            }
        }
        row_cursor_next<F16>(h.row, h.rend, h.te, ptr, row_scale, h.e, h.s, h.e_next, h.s_next);
    }
}

// After the walk: a split half's row (h.rend - 1) was written to its slot; the row's last chunk
// writes y (lane (g, t): row g, RHS 2t and 2t + 1).
template <int N>
__device__ __forceinline__ void tc_finish(const TcHalf& h, const uint2* __restrict__ spl,
                                          u32* __restrict__ cnt, const float* __restrict__ partial,
                                          float* __restrict__ y, u32 rows, float beta, u32 g,
                                          u32 t) {
    uint2 fe;
    if (h.split && split_last(spl, cnt, h.slot, FULL_MASK, 0u, fe)) {  // warp-uniform
        const u64 yr = (u64)(h.rend - 1u) * 8u + g;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const u32 j = 2u * t + q;
            if (j < (u32)N && yr < rows) split_store(partial, fe, g * N + j, N, y, yr, j, beta);
        }
    }
}

// Lane constants of the decode: row g's word (hi: bitmap bits 32-63), the masks of the bits below
// positions (g, t) and (g, t + 4) inside that word, and their own bits.
struct TcLane {
    bool hi;
    u32 below0, below1, bit0, bit1;
};

// A fragment (a0 = T[g][t], a2 = T[g][t + 4], TF32 bits) and B fragment (b0 = x[8c + t][g],
// b1 = x[8c + t + 4][g], TF32) of tile record m; zeros for a zero record.
template <int F16, int N>
__device__ __forceinline__ void tc_operands(uint4 m, const void* __restrict__ values,
                                            const float* __restrict__ x, u32 cols, TcLane L,
                                            u32 g, u32 t, u32 a[2], u32 b[2]) {
    const u32 w = L.hi ? m.y : m.x;
    const u32 base = m.w + (L.hi ? __popc(m.x) : 0u);
    const u32 i0 = base + __popc(w & L.below0), i1 = base + __popc(w & L.below1);
    a[0] = (w & L.bit0) ? __float_as_uint(core_val<F16>(values, i0)) : 0u;
    a[1] = (w & L.bit1) ? __float_as_uint(core_val<F16>(values, i1)) : 0u;
    const u32 k0 = m.z * 8u + t;
    const bool live = (m.x | m.y) != 0u && (N >= 8 || g < (u32)N);  // (g < 8: lane < 32)
    if (N >= 2) {  // (v10: row k0 + 4 at an immediate offset; n = 1's SASS left as it was)
        const float* xp = x + (u64)k0 * N + g;
        b[0] = (live && k0 < cols) ? to_tf32(__ldg(xp)) : 0u;
        b[1] = (live && k0 + 4u < cols) ? to_tf32(__ldg(xp + 4 * N)) : 0u;
    } else {
        b[0] = (live && k0 < cols) ? to_tf32(__ldg(x + (u64)k0 * N + g)) : 0u;
        b[1] = (live && k0 + 4u < cols) ? to_tf32(__ldg(x + (u64)(k0 + 4u) * N + g)) : 0u;
    }
}

template <int F16, int N, int U>
__device__ __forceinline__ void spmv_tc_body(SPMV_WALK_BODY_PARAMS) {
    const u32 item = blockIdx.x * SPMV_WARPS + threadIdx.y;
    if (item >= num_items) return;  // whole warp
    const u32 lane = threadIdx.x, g = lane >> 2, t = lane & 3u;
    TcLane L;
    L.hi = g >= 4u;
    const u32 p0 = 8u * (g & 3u) + t;  // position (g, t) inside row g's word
    L.below0 = (1u << p0) - 1u;
    L.below1 = (1u << (p0 + 4u)) - 1u;
    L.bit0 = 1u << p0;
    L.bit1 = 1u << (p0 + 4u);
    TcHalf h0, h1;
    tc_init<F16>(h0, __ldg(work + 2 * item), ptr, row_scale);
    tc_init<F16>(h1, __ldg(work + 2 * item + 1), ptr, row_scale);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The first records (bounded by the halves, not their rows) before the row ends arrive.
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 m0[U], m1[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        m0[u] = h0.t + u < h0.te ? __ldg(tiles + h0.t + u) : zero;
        m1[u] = h1.t + u < h1.te ? __ldg(tiles + h1.t + u) : zero;
    }
    tc_settle<F16, N>(h0, acc, ptr, row_scale, y, partial, rows, alpha, beta, g, t);
    tc_settle<F16, N>(h1, acc + 2, ptr, row_scale, y, partial, rows, alpha, beta, g, t);
    while (h0.t < h0.te || h1.t < h1.te) {  // warp-uniform
        // Next iteration's records (tiles t + U .. t + 2U - 1 of each half), prefetched.
        uint4 n0[U], n1[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            n0[u] = h0.t + U + u < h0.te ? __ldg(tiles + h0.t + U + u) : zero;
            n1[u] = h1.t + U + u < h1.te ? __ldg(tiles + h1.t + U + u) : zero;
        }
        u32 a0[U][2], a1[U][2], b0[U][2], b1[U][2];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            tc_operands<F16, N>(m0[u], values, x, cols, L, g, t, a0[u], b0[u]);
            tc_operands<F16, N>(m1[u], values, x, cols, L, g, t, a1[u], b1[u]);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (!(h0.t < h0.te || h1.t < h1.te)) break;  // warp-uniform
            // [T1; 0] x1 (rows 0-7: a0, a2), then [0; T2] x2 (rows 8-15: a1, a3).
            mma_m16n8k8_tf32(acc, a0[u][0], 0u, a0[u][1], 0u, b0[u][0], b0[u][1]);
            mma_m16n8k8_tf32(acc, 0u, a1[u][0], 0u, a1[u][1], b1[u][0], b1[u][1]);
            if (h0.t < h0.te) ++h0.t;
            if (h1.t < h1.te) ++h1.t;
            tc_settle<F16, N>(h0, acc, ptr, row_scale, y, partial, rows, alpha, beta, g, t);
            tc_settle<F16, N>(h1, acc + 2, ptr, row_scale, y, partial, rows, alpha, beta, g, t);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            m0[u] = n0[u];
            m1[u] = n1[u];
        }
    }
    tc_finish<N>(h0, spl, cnt, partial, y, rows, beta, g, t);
    tc_finish<N>(h1, spl, cnt, partial, y, rows, beta, g, t);
}

#ifndef SPMV_TC_U
#define SPMV_TC_U 2
#endif

// MINB = blocks per SM asked of ptxas: 4 (64 registers, 32 warps per SM) where that does not
// spill (f32 values, n >= 2), else 3 (f16 values spill 16-48 bytes at 64 registers).
#define SPMV_TC_ENTRY(NAME, F16, N, MINB)                                                          \
    extern "C" __global__ void __launch_bounds__(32 * SPMV_WARPS, MINB) NAME(SPMV_WALK_PARAMS) {   \
        (void)xs;                                                                                  \
        (void)n;                                                                                   \
        spmv_tc_body<F16, N, SPMV_TC_U>(SPMV_WALK_BODY_ARGS);                                      \
    }

#endif  // TCSPARSE_SPMV_TC_CUH
