// bitBSR SpMV on tensor cores, the Spaden kernels (spmv_f16_*, spmv_tf32_*), the x conversion
// to scaled f16 (spmv_x16) and the fix-up of split tile-rows (spmv_fixup).
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).
//
// One warp item = two "halves" (top, bottom of the MMA). A half is {row_begin, row_end | flags,
// tile_begin, tile_end}: either whole consecutive tile-rows (empty ones included) or one chunk of a
// tile-row too long for one half (SPLIT flag; the field then holds the half's partial slot instead
// of row_end, row_end = row_begin + 1). Halves are built over tiles, not tile-rows (balanced: a tile-row
// 1000x longer than the rest becomes many chunks in many warps).
//
// Per step a warp multiplies the next tile T1 of its top half and the next tile T2 of its bottom half:
//   F16:  one mma.sync.m16n8k16 with A = diag(T1, T2) (a0 = T1[g][2t..2t+1], a3 = T2[g][2t..2t+1],
//         a1 = a2 = 0) and B = (x-seg of T1 over k 0-7, x-seg of T2 over k 8-15), column j of B = RHS j.
//   TF32: two mma.sync.m16n8k8 (A = [T1; 0] with B = x-seg of T1, then A = [0; T2] with x-seg of T2).
// D rows 0-7 = T1 * x1, rows 8-15 = T2 * x2, column j = RHS j; lane (g, t) = (lane / 4, lane % 4)
// holds c0, c1 = rows g of the top half for RHS 2t, 2t+1 and c2, c3 = the same for the bottom half.
// A half that has run out of tiles contributes a zero tile (bitmap 0: no loads) -- never a stale one
// (the published code re-adds its last tile). When a half's tile-row ends, the half's accumulators
// are flushed: whole rows are written once with alpha * s_r * acc + beta * y (y not read when beta is
// 0, so NaN in y does not propagate); a split row's chunk writes alpha * s_r * acc to its partial slot
// and spmv_fixup sums the slots of each split row and writes y once (deterministic, no atomics).
//
// F16 x: spmv_x16 converts X once per call into f16 pairs scaled per (8-element segment, RHS) by a
// power of two (largest magnitude in [2^14, 2^15)), xs = the scale. The MMA runs with C = 0 and each
// step adds xs * D to f32 accumulators, so neither A nor X can overflow f16 (no NaN from range) and
// the only rounding is f16's 11-bit significand on A and X plus f32 accumulation.
// TF32: X is read as f32 and rounded with cvt.rna.tf32.f32; A was rounded on the host; the MMA
// accumulates directly.
//
// Pipeline: each half keeps a window of 32 tile records in registers (lane i holds tile base + i,
// one coalesced 512-byte load) and its row ends / row scales likewise (a half spans at most 32
// tile-rows, so row changes need no dependent global load); steps fetch their tile record by
// shuffle, and the values and X of U steps (8 or 4 per entry) are loaded before the first of them is
// multiplied (memory-level parallelism: one step alone is a few dozen instructions against a DRAM
// round trip).


#ifndef TCSPARSE_SPMV_MMA_CUH
#define TCSPARSE_SPMV_MMA_CUH

struct Half {
    u32 row;       // current tile-row
    u32 row_begin; // first tile-row (row window base)
    u32 row_end;   // one past the last tile-row
    u32 t;         // next tile
    u32 te;        // one past the last tile
    u32 e;         // one past the last tile of the current row (min(ptr[row + 1], te))
    u32 slot;      // partial slot (split halves) or 0xffffffff
    u32 base;      // first tile of the tile window
    uint4 win;     // tile record base + lane
    u32 rwin;      // ptr[row_begin + 1 + lane] (row ends; a half spans <= 32 rows)
    float swin;    // row_scale[row_begin + lane] (F16)
};

template <int MODE>
__device__ __forceinline__ void half_init(Half& h, uint4 w, const u32* __restrict__ ptr,
                                          const float* __restrict__ row_scale, u32 lane) {
    h.row = h.row_begin = w.x;
    if (w.y & SPLIT_BIT) {
        h.slot = w.y & ~SPLIT_BIT;
        h.row_end = w.x + 1;
    } else {
        h.slot = 0xffffffffu;
        h.row_end = w.y;
    }
    h.t = w.z;
    h.te = w.w;
    // One coalesced load of the half's row ends (and scales) instead of a dependent load per row.
    const bool in = h.row_begin + lane < h.row_end;
    h.rwin = in ? __ldg(ptr + h.row_begin + 1 + lane) : 0u;
    h.swin = (MODE == 0 && in) ? __ldg(row_scale + h.row_begin + lane) : 1.0f;
    const u32 r1 = __shfl_sync(FULL_MASK, h.rwin, 0);
    h.e = h.row < h.row_end ? min(r1, h.te) : h.te;
    h.base = 0xffffffffu;
    h.win = make_uint4(0, 0, 0, 0);
}

// Makes the tile window cover tiles t .. t + U - 1 (warp-uniform).
template <int U>
__device__ __forceinline__ void half_window(Half& h, const uint4* __restrict__ tiles, u32 lane) {
    if (h.t < h.te && (h.t < h.base || h.t + U > h.base + 32u)) {
        h.base = h.t;
        h.win = h.base + lane < h.te ? __ldg(tiles + h.base + lane) : make_uint4(0, 0, 0, 0);
    }
}

// Tile record of tile t + u of the half (zeros beyond its end).
__device__ __forceinline__ uint4 half_tile(const Half& h, u32 u) {
    const u32 i = h.t + u;
    const u32 src = (i - h.base) & 31u;
    uint4 r;
    r.x = __shfl_sync(FULL_MASK, h.win.x, src);
    r.y = __shfl_sync(FULL_MASK, h.win.y, src);
    r.z = __shfl_sync(FULL_MASK, h.win.z, src);
    r.w = __shfl_sync(FULL_MASK, h.win.w, src);
    if (i >= h.te) r = make_uint4(0, 0, 0, 0);
    return r;
}

// Operands of one step.
struct Step {
    u32 a_top[2], a_bot[2];  // F16: [0] = packed pair; TF32: the two elements
    u32 b_top[2], b_bot[2];  // F16: [0] = packed pair (k 0-7 / 8-15); TF32: x[t], x[t + 4]
    float s_top[2], s_bot[2];  // F16: X scales of the output columns 2t, 2t + 1
};

template <int MODE>
__device__ __forceinline__ void load_tile_operands(uint4 m, const void* __restrict__ values,
                                                   const void* __restrict__ x,
                                                   const float* __restrict__ xs, u32 n, u32 cols,
                                                   u32 g, u32 t, u32 a[2], u32 b[2], float s[2]) {
    a[0] = a[1] = b[0] = b[1] = 0u;
    s[0] = s[1] = 0.0f;
    if ((m.x | m.y) == 0u) return;  // zero tile: run-out half
    const u32 col = m.z, off = m.w;
    if (MODE == 0) {
        const u16* v = reinterpret_cast<const u16*>(values);
        const u32 p = g * 8 + 2 * t;
        const u32 b0 = bit_at(m.x, m.y, p), b1 = bit_at(m.x, m.y, p + 1);
        const u32 idx = off + rank_below(m.x, m.y, p);
        const u32 lo = b0 ? __ldg(v + idx) : 0u;
        const u32 hi = b1 ? __ldg(v + idx + b0) : 0u;
        a[0] = lo | (hi << 16);
        const u32* xp = reinterpret_cast<const u32*>(x);
        if (g < n) b[0] = __ldg(xp + (u64)(col * 4 + t) * n + g);
        if (2 * t < n) s[0] = __ldg(xs + (u64)col * n + 2 * t);
        if (2 * t + 1 < n) s[1] = __ldg(xs + (u64)col * n + 2 * t + 1);
    } else {
        const float* v = reinterpret_cast<const float*>(values);
        const u32 p = g * 8 + t;
        const u32 b0 = bit_at(m.x, m.y, p), b1 = bit_at(m.x, m.y, p + 4);
        const u32 i0 = off + rank_below(m.x, m.y, p), i1 = off + rank_below(m.x, m.y, p + 4);
        a[0] = b0 ? __float_as_uint(__ldg(v + i0)) : 0u;
        a[1] = b1 ? __float_as_uint(__ldg(v + i1)) : 0u;
        const float* xf = reinterpret_cast<const float*>(x);
        // Columns beyond K only meet zero bits of A, but must not be read: K is not a multiple of 8.
        const u32 k0 = col * 8 + t;
        if (g < n && k0 < cols) b[0] = to_tf32(__ldg(xf + (u64)k0 * n + g));
        if (g < n && k0 + 4 < cols) b[1] = to_tf32(__ldg(xf + (u64)(k0 + 4) * n + g));
    }
}

__device__ __forceinline__ void mma_f16(float d[4], u32 a0, u32 a3, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(0u), "r"(0u), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f), "f"(0.0f), "f"(0.0f),
          "f"(0.0f));
}

// Writes the half's accumulators (acc[0], acc[1] = rows g of tile-row h.row, RHS 2t, 2t + 1) and
// zeroes them.
template <int MODE>
__device__ __forceinline__ void flush(const Half& h, float acc[2], float* __restrict__ y,
                                      float* __restrict__ partial, u32 rows, u32 n, float alpha,
                                      float beta, u32 g, u32 t) {
    const float rs = __shfl_sync(FULL_MASK, h.swin, (h.row - h.row_begin) & 31u);
    const float s = alpha * (MODE == 0 ? rs : 1.0f);
    const u64 r = (u64)h.row * 8 + g;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        const u32 j = 2 * t + q;
        if (j < n) {
            const float v = s * acc[q];
            if (h.slot != 0xffffffffu) {
                partial[((u64)h.slot * 8 + g) * n + j] = v;
            } else if (r < rows) {
                float* p = y + r * n + j;
                *p = beta == 0.0f ? v : fmaf(beta, *p, v);
            }
        }
        acc[q] = 0.0f;
    }
}

// Flushes every row of the half that ends at its current tile (empty rows included).
template <int MODE>
__device__ __forceinline__ void advance(Half& h, float acc[2], float* __restrict__ y,
                                        float* __restrict__ partial, u32 rows, u32 n, float alpha,
                                        float beta, u32 g, u32 t) {
    while (h.row < h.row_end && h.t == h.e) {
        flush<MODE>(h, acc, y, partial, rows, n, alpha, beta, g, t);
        ++h.row;
        const u32 re = __shfl_sync(FULL_MASK, h.rwin, (h.row - h.row_begin) & 31u);
        h.e = h.row < h.row_end ? min(re, h.te) : h.te;
    }
}

// U = steps per batch: all loads of a batch are issued before its MMAs (memory-level parallelism);
// per entry below, as large as fits without spills (ptxas -v).
template <int MODE, int NR, int U>
__device__ __forceinline__ void spmv_body(const uint4* __restrict__ tiles,
                                          const void* __restrict__ values,
                                          const float* __restrict__ row_scale,
                                          const u32* __restrict__ ptr,
                                          const uint4* __restrict__ work, u32 num_items,
                                          const void* __restrict__ x, const float* __restrict__ xs,
                                          float* __restrict__ y, float* __restrict__ partial,
                                          u32 rows, u32 cols, u32 n_arg, float alpha,
                                          float beta) {
    const u32 item = blockIdx.x * SPMV_WARPS + threadIdx.y;
    if (item >= num_items) return;  // whole warp
    const u32 n = NR == 1 ? 1u : n_arg;
    const u32 lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    Half h0, h1;
    half_init<MODE>(h0, __ldg(work + 2 * item), ptr, row_scale, lane);
    half_init<MODE>(h1, __ldg(work + 2 * item + 1), ptr, row_scale, lane);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    advance<MODE>(h0, acc, y, partial, rows, n, alpha, beta, g, t);
    advance<MODE>(h1, acc + 2, y, partial, rows, n, alpha, beta, g, t);
    while (h0.t < h0.te || h1.t < h1.te) {
        half_window<U>(h0, tiles, lane);
        half_window<U>(h1, tiles, lane);
        Step st[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const uint4 m0 = half_tile(h0, u), m1 = half_tile(h1, u);
            load_tile_operands<MODE>(m0, values, x, xs, n, cols, g, t, st[u].a_top, st[u].b_top,
                                     st[u].s_top);
            load_tile_operands<MODE>(m1, values, x, xs, n, cols, g, t, st[u].a_bot, st[u].b_bot,
                                     st[u].s_bot);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (!(h0.t < h0.te || h1.t < h1.te)) break;  // uniform
            const Step& cur = st[u];
            if (MODE == 0) {
                float d[4];
                mma_f16(d, cur.a_top[0], cur.a_bot[0], cur.b_top[0], cur.b_bot[0]);
                acc[0] = fmaf(cur.s_top[0], d[0], acc[0]);
                acc[1] = fmaf(cur.s_top[1], d[1], acc[1]);
                acc[2] = fmaf(cur.s_bot[0], d[2], acc[2]);
                acc[3] = fmaf(cur.s_bot[1], d[3], acc[3]);
            } else {
                // A = [T1; 0] (a0 = T1[g][t], a2 = T1[g][t + 4]) times x1, then [0; T2] times x2.
                mma_m16n8k8_tf32(acc, cur.a_top[0], 0u, cur.a_top[1], 0u, cur.b_top[0], cur.b_top[1]);
                mma_m16n8k8_tf32(acc, 0u, cur.a_bot[0], 0u, cur.a_bot[1], cur.b_bot[0], cur.b_bot[1]);
            }
            if (h0.t < h0.te) ++h0.t;
            if (h1.t < h1.te) ++h1.t;
            advance<MODE>(h0, acc, y, partial, rows, n, alpha, beta, g, t);
            advance<MODE>(h1, acc + 2, y, partial, rows, n, alpha, beta, g, t);
        }
    }
}

// Parameters of every main entry (the MMA kernels: MAIN_PARAMS in crates/gpu/src/spmv/mod.rs)
// and of the walks, which add the split table and its arrival counts (WALK_PARAMS).
#define SPMV_MAIN_PARAMS                                                                           \
    const uint4* __restrict__ tiles, const void* __restrict__ values,                              \
        const float* __restrict__ row_scale, const u32* __restrict__ ptr,                          \
        const uint4* __restrict__ work, u32 num_items, const void* __restrict__ x,                 \
        const float* __restrict__ xs, float* __restrict__ y, float* __restrict__ partial,          \
        u32 rows, u32 cols, u32 n, float alpha, float beta
#define SPMV_WALK_PARAMS SPMV_MAIN_PARAMS, const uint2* __restrict__ spl, u32* __restrict__ cnt

#define SPMV_ENTRY(NAME, MODE, NR, U)                                                              \
    extern "C" __global__ void __launch_bounds__(32 * SPMV_WARPS) NAME(SPMV_MAIN_PARAMS) {         \
        spmv_body<MODE, NR, U>(tiles, values, row_scale, ptr, work, num_items, x, xs, y, partial,  \
                            rows, cols, n, alpha, beta);                                           \
    }

#if SPMV_MODULE_N == 1
SPMV_ENTRY(spmv_f16_r1, 0, 1, 8)
SPMV_ENTRY(spmv_f16_r8, 0, 8, 4)
SPMV_ENTRY(spmv_tf32_r1, 1, 1, 4)
SPMV_ENTRY(spmv_tf32_r8, 1, 8, 4)
#endif

// X (K x n f32, row-major) to f16 pairs scaled per (8-row segment c, RHS j): one thread per (c, j).
// x16[(c * 4 + p) * n + j] = {X[8c + 2p][j], X[8c + 2p + 1][j]} / xs[c * n + j] (rows >= K are 0),
// xs a power of two putting the segment's largest magnitude in [2^14, 2^15) (1 when it is 0 or not
// finite: NaN and infinity in X propagate as they would in f32).
#if SPMV_MODULE_N == 1
extern "C" __global__ void __launch_bounds__(256)
    spmv_x16(const float* __restrict__ x, u32 k, u32 n, u32* __restrict__ x16,
             float* __restrict__ xs) {
    const u64 id = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 segs = (k + 7) / 8;
    if (id >= segs * n) return;
    const u32 c = (u32)(id / n), j = (u32)(id % n);
    float v[8];
    float mx = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const u32 r = c * 8 + q;
        v[q] = r < k ? __ldg(x + (u64)r * n + j) : 0.0f;
        mx = fmaxf(mx, fabsf(v[q]));
    }
    float s = 1.0f;
    if (mx > 0.0f && mx <= 3.0e38f) {
        // floor(log2(mx)) from the exponent field (subnormals: treat as 2^-126).
        int e = (int)((__float_as_uint(mx) >> 23) & 0xffu) - 127;
        if (e < -126) e = -126;
        int sh = e - 14;
        if (sh < -126) sh = -126;
        if (sh > 127) sh = 127;
        s = ldexpf(1.0f, sh);
    }
    const float inv = 1.0f / s;  // exact: s is a power of two
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        const u32 lo = f32_to_f16_rn(v[2 * p] * inv), hi = f32_to_f16_rn(v[2 * p + 1] * inv);
        x16[((u64)c * 4 + p) * n + j] = lo | (hi << 16);
    }
    xs[(u64)c * n + j] = s;
}
#endif

// Split tile-rows: fix[i] = {tile-row, first slot, end slot}; one thread per (split row, row g in
// the tile-row, RHS j): y = sum of the slots' partials (alpha and the row scale are applied) + beta*y.
#if SPMV_MODULE_N == 1
extern "C" __global__ void __launch_bounds__(256)
    spmv_fixup(const u32* __restrict__ fix, u32 num_fix, const float* __restrict__ partial,
               float* __restrict__ y, u32 rows, u32 n, float beta) {
    const u64 id = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (u64)num_fix * 8 * n) return;
    const u32 i = (u32)(id / (8 * n)), rem = (u32)(id % (8 * n));
    const u32 g = rem / n, j = rem % n;
    const u32 row = __ldg(fix + 3 * i), s0 = __ldg(fix + 3 * i + 1), s1 = __ldg(fix + 3 * i + 2);
    const u64 r = (u64)row * 8 + g;
    if (r >= rows) return;
    float sum = 0.0f;
    for (u32 s = s0; s < s1; ++s) sum += __ldg(partial + ((u64)s * 8 + g) * n + j);
    float* p = y + r * n + j;
    *p = beta == 0.0f ? sum : fmaf(beta, *p, sum);
}
#endif

#endif  // TCSPARSE_SPMV_MMA_CUH
