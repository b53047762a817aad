// Spaden-style bitBSR SpMV on tensor cores (ICPP'24), fixed and balanced: y = alpha * A * X + beta * y
// for 1 to 8 right-hand sides. X is K x n and y is M x n, both row-major f32 (n = 1: vectors).
//
// Layout (host side: crates/formats/src/bitbsr_device.rs, uploaded by crates/gpu/src/spmv/):
//   tiles[i] = {bitmap lo, bitmap hi, block column, value offset} (uint4) of 8x8 tile i, tiles of a
//              tile-row contiguous, tile-rows in order; bit (r % 8) * 8 + (c % 8), LSB = top-left.
//   ptr[r]   = first tile of tile-row r (brows + 1 entries).
//   values   = f16 (mode F16: scaled per tile-row by 1 / row_scale[r], a power of two, so that the
//              row's largest magnitude lies in [2^14, 2^15): no overflow, no subnormals for values
//              within 2^-24 of the row maximum) or f32 rounded to TF32 (mode TF32).
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

// Modules. This file compiled alone is spmv.ptx (SPMV_MODULE_N = 1): the MMA kernels, the x
// conversion, the fix-up and every walk for one right-hand side. kernels-ptx/spmv_n<N>.cu (N = 2..8)
// defines SPMV_MODULE_N = N and includes this file: spmv_n<N>.ptx holds only the walks for N
// right-hand sides, so the driver compiles (PTX JIT, ~3 s per MB on an H200 when its cache is cold)
// only the modules a call uses (crates/gpu: KernelModule::spmv_for_rhs).
#ifndef SPMV_MODULE_N
#define SPMV_MODULE_N 1
#endif

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
#define SPLIT_BIT 0x80000000u
#ifndef SPMV_WARPS
#define SPMV_WARPS 8
#endif

__device__ __forceinline__ u32 f32_to_tf32(float x) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ u16 f32_to_f16(float x) {
    u16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

// Popcount of the bits of (lo, hi) below position p (0..63).
__device__ __forceinline__ u32 rank_below(u32 lo, u32 hi, u32 p) {
    if (p < 32) return __popc(lo & ((1u << p) - 1u));
    return __popc(lo) + __popc(hi & ((1u << (p - 32)) - 1u));
}

__device__ __forceinline__ u32 bit_at(u32 lo, u32 hi, u32 p) {
    return ((p < 32 ? lo : hi) >> (p & 31)) & 1u;
}

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
        if (g < n && k0 < cols) b[0] = f32_to_tf32(__ldg(xf + (u64)k0 * n + g));
        if (g < n && k0 + 4 < cols) b[1] = f32_to_tf32(__ldg(xf + (u64)(k0 + 4) * n + g));
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

__device__ __forceinline__ void mma_tf32(float c[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                         u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
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
                mma_tf32(acc, cur.a_top[0], 0u, cur.a_top[1], 0u, cur.b_top[0], cur.b_top[1]);
                mma_tf32(acc, 0u, cur.a_bot[0], 0u, cur.a_bot[1], cur.b_bot[0], cur.b_bot[1]);
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
        const u32 lo = f32_to_f16(v[2 * p] * inv), hi = f32_to_f16(v[2 * p + 1] * inv);
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

// ---------------------------------------------------------------------------------------------
// CUDA-core bitBSR walk for one right-hand side ("8 lanes per tile-row"). At n = 1 the MMA uses
// 1/8 of its B columns and the kernels above are instruction-issue bound (~10 warp-instructions per
// nonzero); this walk spends ~1 per nonzero on banded matrices.
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

// ---------------------------------------------------------------------------------------------
// Set-bit walk for N = 1..8 right-hand sides ("bits"): the `core` layout (group q of warp w takes
// half 4w + q, lane r owns row r of the current tile-row), but per tile the lane visits only the set
// bits of its row byte (__ffs, two per iteration, their value and x-row loads issued before the
// FMAs) instead of all 8 positions: no predicated-off slots, no x segment, no K-tail path (a set bit
// is always a column < K: BitBsrSpmv::new checks the last segment's bits). X is K x N row-major, so
// the x row of column k is N contiguous floats (float4 / float2 loads when N allows and X is
// aligned); each nonzero costs one value load, one x-row load and N FMAs, and A is read once for all
// N right-hand sides. acc[N] per lane; y rows flushed as in `core` (N values per row, partial slots
// laid out as spmv_fixup expects for n = N). The missing second bit of an odd count is skipped, not
// multiplied by 0 (0 * inf would be NaN where CSR has no product).
// ---------------------------------------------------------------------------------------------

// The vector width of an X row of N floats: 4, 2 or 1 (the widest that divides N).
#define XROW_W(N) ((N) % 4 == 0 ? 4 : ((N) % 2 == 0 ? 2 : 1))

// The N values of X row k (p = x + k * N); W = vector width that divides N. `vec` is a constant
// of the walk's instantiation (v9: the set-bit walks are compiled once for 16-byte-aligned X and
// once for any X, the entry picks one; a runtime `vec` left both load paths in the set-bit loop,
// the scalar one predicated off but issued).
template <int N, int W>
__device__ __forceinline__ void bits_xrow(const float* __restrict__ p, bool vec, float o[N]) {
    if (W == 4 && vec) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            const float4 a = __ldg(reinterpret_cast<const float4*>(p) + i);
            o[4 * i] = a.x; o[4 * i + 1] = a.y; o[4 * i + 2] = a.z; o[4 * i + 3] = a.w;
        }
    } else if (W == 2 && vec) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            const float2 a = __ldg(reinterpret_cast<const float2*>(p) + i);
            o[2 * i] = a.x; o[2 * i + 1] = a.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = __ldg(p + i);
    }
}

// Loads issued only where `p` holds, as one predicated instruction each (no branch: the set-bit
// loop's lanes diverge on their row bytes, and a branch around a lane's loads cost a BSSY/BSYNC
// pair per tile and iteration, v9). Where `p` is false the result is undefined: the caller's
// FMAs are predicated on the same condition.
__device__ __forceinline__ float ldg_if(const float* a, bool p) {
    float v;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q ld.global.nc.f32 %0, [%1];\n\t}"
        : "=f"(v)
        : "l"(a), "r"((u32)p));
    return v;
}

__device__ __forceinline__ float2 ldg2_if(const float* a, bool p) {
    float2 v;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %3, 0;\n\t@q ld.global.nc.v2.f32 {%0, %1}, [%2];\n\t}"
        : "=f"(v.x), "=f"(v.y)
        : "l"(a), "r"((u32)p));
    return v;
}

__device__ __forceinline__ float4 ldg4_if(const float* a, bool p) {
    float4 v;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %5, 0;\n\t@q ld.global.nc.v4.f32 {%0, %1, %2, "
        "%3}, [%4];\n\t}"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(a), "r"((u32)p));
    return v;
}

// Value i as f32 where `p` holds (core_val, predicated).
template <int F16>
__device__ __forceinline__ float core_val_if(const void* __restrict__ values, u32 i, bool p) {
    if (F16) {
        u16 b;
        asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %2, 0;\n\t@q ld.global.nc.u16 %0, [%1];\n\t}"
            : "=h"(b)
            : "l"(reinterpret_cast<const u16*>(values) + i), "r"((u32)p));
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
        return f;
    }
    return ldg_if(reinterpret_cast<const float*>(values) + i, p);
}

// bits_xrow where `p` holds.
template <int N, int W>
__device__ __forceinline__ void bits_xrow_if(const float* __restrict__ a, bool vec, bool p,
                                             float o[N]) {
    if (W == 4 && vec) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            const float4 v = ldg4_if(a + 4 * i, p);
            o[4 * i] = v.x; o[4 * i + 1] = v.y; o[4 * i + 2] = v.z; o[4 * i + 3] = v.w;
        }
    } else if (W == 2 && vec) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            const float2 v = ldg2_if(a + 2 * i, p);
            o[2 * i] = v.x; o[2 * i + 1] = v.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = ldg_if(a + i, p);
    }
}

// ---------------------------------------------------------------------------------------------
// "seg": the set-bit walk with the tile's x segment staged in shared memory. Per tile, lane r of
// the group loads x row 8c + r (N floats) when column r is used by any row of the tile (the OR of
// the 8 row bytes), stores it to the group's 8 x N slab, and the set-bit loop reads its x rows
// from there. The x bytes a tile moves from L2 are then the used rows once (<= 8 * 4N) instead of
// one row per nonzero (4N each: at N = 8 and ~2 nonzeros per tile row that is ~2x the traffic on
// banded matrices, ~6x on FEM-like ones); it pays two __syncwarp and a shared store per tile, so
// the tuning times it beside `bits` (tiles with 1-2 nonzeros gain nothing).
// ---------------------------------------------------------------------------------------------

// Columns used by tile record m: the OR of its 8 row bytes.
__device__ __forceinline__ u32 seg_cols(uint4 m) {
    u32 cm = m.x | m.y;
    cm |= cm >> 16;
    cm |= cm >> 8;
    return cm & 0xffu;
}

template <int N, int W>
__device__ __forceinline__ void seg_row(const float* p, float o[N]) {
    if (W == 4) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            const float4 a = reinterpret_cast<const float4*>(p)[i];
            o[4 * i] = a.x; o[4 * i + 1] = a.y; o[4 * i + 2] = a.z; o[4 * i + 3] = a.w;
        }
    } else if (W == 2) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            const float2 a = reinterpret_cast<const float2*>(p)[i];
            o[2 * i] = a.x; o[2 * i + 1] = a.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = p[i];
    }
}

template <int N, int W>
__device__ __forceinline__ void seg_store(float* p, const float v[N]) {
    if (W == 4) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i)
            reinterpret_cast<float4*>(p)[i] =
                make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    } else if (W == 2) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
            reinterpret_cast<float2*>(p)[i] = make_float2(v[2 * i], v[2 * i + 1]);
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) p[i] = v[i];
    }
}

// The set-bit walks' shared x slab (`seg`: 8 x N floats per group), one per entry whichever of
// the entry's two instantiations (VEC) runs.
template <int N, bool SEG>
__device__ __forceinline__ float* setbit_slab() {
    __shared__ __align__(16) float slab[SPMV_WARPS * 4][SEG ? 8 * N : 1];
    return &slab[0][0];
}

// Both set-bit walks: SEG = false reads each nonzero's x row from global memory (`bits`); SEG =
// true first stages the tile's used x rows in the group's shared slab (`seg`, below). VEC: X is
// aligned for W-wide loads (the entry checks it; a constant here, see bits_xrow).
template <int F16, int N, bool SEG, bool VEC>
__device__ __forceinline__ void spmv_setbit_body(SPMV_WALK_BODY_PARAMS) {
    (void)cols;
    constexpr int W = XROW_W(N);
    const u32 lane = threadIdx.x, r = lane & 7u;
    const u32 hidx = (blockIdx.x * SPMV_WARPS + threadIdx.y) * 4u + (lane >> 3);
    SPMV_WALK_HALF(hidx);  // (returns for whole groups: SEG's barriers below are per group)
    float* seg = setbit_slab<N, SEG>() + (threadIdx.y * 4u + (lane >> 3)) * (SEG ? 8u * N : 1u);
    const u32 gmask = 0xffu << (lane & 24u);
    const CoreLane cl = core_lane(r);
    constexpr bool vec = VEC;
    u32 e, e_next;
    float s, s_next;
    row_cursor_init<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
    float acc[N];
#pragma unroll
    for (int q = 0; q < N; ++q) acc[q] = 0.0f;
    auto settle = [&]() {
        while (row < rend && t == e) {
            const float sc = alpha * s;
            const u64 yr = (u64)row * 8u + r;
#pragma unroll
            for (int q = 0; q < N; ++q) {
                const float v = sc * acc[q];
                acc[q] = 0.0f;
                if (split) {
                    partial[((u64)slot * 8u + r) * N + q] = v;
                } else if (yr < rows) {
                    float* py = y + yr * N + q;
                    *py = beta == 0.0f ? v : fmaf(beta, *py, v);
                }
            }
            row_cursor_next<F16>(row, rend, te, ptr, row_scale, e, s, e_next, s_next);
        }
    };
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 m = t < te ? __ldg(tiles + t) : zero;  // before the row end arrives (bounded by te)
    settle();
    while (t < te) {  // group-uniform
        const uint4 p = t + 1u < te ? __ldg(tiles + t + 1) : zero;  // next record, prefetched
        const CoreTile c = core_decode(m, cl);
        const float* xseg = x + (u64)m.z * 8u * N;
        if (SEG) {
            u32 cm = m.x | m.y;
            cm |= cm >> 16;
            cm |= cm >> 8;
            const bool use = (cm >> r) & 1u;  // column r used: 8c + r < K (checked at upload)
            float xr[N];
            if (use) bits_xrow<N, W>(xseg + r * N, vec, xr);
            __syncwarp(gmask);  // the previous tile's reads of the slab are done
            if (use) seg_store<N, W>(seg + r * N, xr);
            __syncwarp(gmask);
        }
        u32 bits = c.bits, idx = c.idx;
        while (bits != 0u) {
            const u32 j0 = __ffs(bits) - 1u;
            bits &= bits - 1u;
            const bool two = bits != 0u;
            const u32 j1 = two ? __ffs(bits) - 1u : j0;
            bits &= bits - 1u;
            float x0[N], x1[N];
            const float v0 = core_val<F16>(values, idx);
            float v1;
            if (SEG) {
                v1 = two ? core_val<F16>(values, idx + 1u) : 0.0f;
                seg_row<N, W>(seg + j0 * N, x0);
                seg_row<N, W>(seg + j1 * N, x1);
            } else if (N < 8) {  // (n = 2-7 took 8 more registers with the predicated loads)
                v1 = two ? core_val<F16>(values, idx + 1u) : 0.0f;
                bits_xrow<N, W>(xseg + j0 * N, vec, x0);
                bits_xrow<N, W>(xseg + j1 * N, vec, x1);
            } else {
                // (v10) A row byte's odd last bit loads no second value or x row: predicated
                // loads (bitsw's), the second FMAs predicated on the same `two`.
                v1 = core_val_if<F16>(values, idx + 1u, two);
                bits_xrow<N, W>(xseg + j0 * N, vec, x0);
                bits_xrow_if<N, W>(xseg + j1 * N, vec, two, x1);
            }
            idx += 2u;
#pragma unroll
            for (int q = 0; q < N; ++q) acc[q] = fmaf(v0, x0[q], acc[q]);
            if (two) {
#pragma unroll
                for (int q = 0; q < N; ++q) acc[q] = fmaf(v1, x1[q], acc[q]);
            }
        }
        ++t;
        settle();
        m = p;
    }
    // A split half's row was written to its slot by the last settle; the row's last chunk writes y.
    uint2 fe;
    if (split && split_last(spl, cnt, slot, gmask, lane & 24u, fe)) {
        const u64 yr = (u64)w.x * 8u + r;
        if (yr < rows) {
#pragma unroll
            for (int q = 0; q < N; ++q) split_store(partial, fe, r * N + q, N, y, yr, q, beta);
        }
    }
}

// X aligned for an X row's W-wide loads (warp-uniform: the entries' choice of instantiation).
#define SPMV_XROW_VEC(N) (XROW_W(N) > 1 && (reinterpret_cast<size_t>(x) & (4u * XROW_W(N) - 1u)) == 0u)

// One entry of a set-bit walk (SEG: x rows staged in shared memory, `seg`; else `bits`).
// (N = 8: 5 blocks per SM asked, i.e. <= 48 registers as before v9; left alone the entry took
// 58-59 with its aligned instantiation, a fifth fewer resident warps. Other N: as before.)
#define SPMV_SETBIT_LB_1 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_2 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_3 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_4 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_5 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_6 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_7 __launch_bounds__(32 * SPMV_WARPS)
#define SPMV_SETBIT_LB_8 __launch_bounds__(32 * SPMV_WARPS, 5)
// A set-bit walk's entry: `BODY` instantiated for 16-byte-aligned X rows and for any X, picked
// at the start (v9: a runtime test inside the loop left both load paths in it).
#define SPMV_XROW_ENTRY(LB, NAME, BODY, F16, N, SEG)                                               \
    extern "C" __global__ void LB NAME(SPMV_WALK_PARAMS) {                                         \
        (void)xs;                                                                                  \
        (void)n;                                                                                   \
        if (SPMV_XROW_VEC(N))                                                                      \
            BODY<F16, N, SEG, true>(SPMV_WALK_BODY_ARGS);                                          \
        else                                                                                       \
            BODY<F16, N, SEG, false>(SPMV_WALK_BODY_ARGS);                                         \
    }
#define SPMV_SETBIT_ENTRY(NAME, F16, N, SEG) \
    SPMV_XROW_ENTRY(SPMV_SETBIT_LB_##N, NAME, spmv_setbit_body, F16, N, SEG)
#define SPMV_BITS_ENTRY(NAME, F16, N) SPMV_SETBIT_ENTRY(NAME, F16, N, false)
#define SPMV_SEG_ENTRY(NAME, F16, N) SPMV_SETBIT_ENTRY(NAME, F16, N, true)

// ---------------------------------------------------------------------------------------------
// "bitsw" (v8): the set-bit walk in `corew2`'s layout, N = 1..8 right-hand sides. One half per
// warp; per step group q takes tiles t + q and t + 4 + q of the current tile-row (8 consecutive
// tiles per step), lane r of each group owns row r and keeps N sums over the group's tiles; per
// iteration it takes the lowest set bit of its row byte in each of its two tiles (value and x-row
// loads of both before the FMAs; a tile whose byte has run out contributes nothing, never a
// product with 0, so 0 * inf cannot make NaN). At the end of a tile-row two xor-shuffles per RHS
// add the 4 groups and group 0 writes the row (y or the split half's partial slot; a split row's
// last chunk sums the slots itself at n = 1, spmv_fixup does at n >= 2, as for `bits`). The next
// step's records (the next tile-row's first ones at a row end) and the next row's end and scale
// are prefetched. Against `bits` (a group walks its own half tile by tile): a half's tiles are
// walked 8 at a time, so a warp's dependent chain is ~8x shorter per tile-row -- for the
// small and mid-size matrices that fill less than one wave of warps, where the chain, not the
// bytes, sets the time -- and the 4 groups' loads touch neighbouring tiles.
// "segw" (v8b, SEG = true): per step, before the set-bit loop, lane r of group q loads x row
// 8c + r of each of its two tiles (when column r is used by the tile: the OR of its row bytes) and
// its first two values of each tile, stores the x rows in the group's 16 x N shared slab, and the
// loop reads x rows there (values from the third bit of a row byte on are loaded in the loop). So a
// step waits for one global round trip (records prefetched -> x rows and values) instead of one
// per loop iteration (`bitsw`: each iteration's x-row and value loads feed its FMAs).
// ---------------------------------------------------------------------------------------------
// `segw`'s shared x slabs (16 x N floats per group), one per entry (as setbit_slab).
template <int N, bool SEG>
__device__ __forceinline__ float* bitsw_slab() {
    __shared__ __align__(16) float wslab[SPMV_WARPS][SEG ? 4 * 16 * N : 1];
    return &wslab[0][0];
}

// The end of one iteration of `bitsw`'s set-bit loop (and `blockbw`'s): each tile whose byte had a
// bit (h) adds its value times its x row to the N sums and moves to its next value.
template <int N>
__device__ __forceinline__ void bits_pair_fma(float acc[N], bool h0, float v0, const float x0[N],
                                              u32& i0, bool h1, float v1, const float x1[N],
                                              u32& i1) {
    i0 += h0 ? 1u : 0u;
    i1 += h1 ? 1u : 0u;
    if (h0) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(v0, x0[k], acc[k]);
    }
    if (h1) {
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = fmaf(v1, x1[k], acc[k]);
    }
}

template <int F16, int N, bool SEG, bool VEC>
__device__ __forceinline__ void spmv_bitsw_body(SPMV_WALK_BODY_PARAMS) {
    (void)cols;
    constexpr int W = XROW_W(N);
    const u32 lane = threadIdx.x, r = lane & 7u, q = lane >> 3;
    // group q: tile 0 rows, then 1
    float* sx = bitsw_slab<N, SEG>() + (SEG ? (threadIdx.y * 4u + q) * 16u * N : 0u);
    const u32 hidx = blockIdx.x * SPMV_WARPS + threadIdx.y;
    SPMV_WALK_HALF(hidx);  // (returns for the whole warp)
    const CoreLane cl = core_lane(r);
    constexpr bool vec = VEC;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    // The first records, bounded by the half (te), issued before the row end arrives.
    uint4 m0 = t + q < te ? __ldg(tiles + t + q) : zero;
    uint4 m1 = t + 4u + q < te ? __ldg(tiles + t + 4u + q) : zero;
    u32 e = min(__ldg(ptr + row + 1), te);
    float s = F16 ? __ldg(row_scale + row) : 1.0f;
    u32 e_next = row + 1u < rend ? min(__ldg(ptr + row + 2), te) : te;
    float s_next = (F16 && row + 1u < rend) ? __ldg(row_scale + row + 1) : 1.0f;
    m0 = t + q < e ? m0 : zero;  // cut at the row end
    m1 = t + 4u + q < e ? m1 : zero;
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = 0.0f;
    while (row < rend) {  // warp-uniform
        // Next step: the rest of this tile-row, or the next tile-row's first tiles.
        const bool row_end = t + 8u >= e;
        const u32 nt = row_end ? e : t + 8u;
        const u32 ne = row_end ? (row + 1u < rend ? e_next : nt) : e;
        const uint4 n0 = nt + q < ne ? __ldg(tiles + nt + q) : zero;
        const uint4 n1 = nt + 4u + q < ne ? __ldg(tiles + nt + 4u + q) : zero;
        const CoreTile c0 = core_decode(m0, cl);
        const CoreTile c1 = core_decode(m1, cl);
        const float* xs0 = x + (u64)m0.z * 8u * N;
        const float* xs1 = x + (u64)m1.z * 8u * N;
        u32 b0 = c0.bits, b1 = c1.bits, i0 = c0.idx, i1 = c1.idx;
        // SEG: the tiles' used x rows to the slab, the first two values of each row byte loaded.
        float p00 = 0.0f, p01 = 0.0f, p10 = 0.0f, p11 = 0.0f;
        if (SEG) {
            const bool u0 = (seg_cols(m0) >> r) & 1u, u1 = (seg_cols(m1) >> r) & 1u;
            float xa[N], xb[N];
            if (u0) bits_xrow<N, W>(xs0 + r * N, vec, xa);  // column 8c + r < K (checked at upload)
            if (u1) bits_xrow<N, W>(xs1 + r * N, vec, xb);
            if (b0 != 0u) p00 = core_val<F16>(values, i0);
            if ((b0 & (b0 - 1u)) != 0u) p01 = core_val<F16>(values, i0 + 1u);
            if (b1 != 0u) p10 = core_val<F16>(values, i1);
            if ((b1 & (b1 - 1u)) != 0u) p11 = core_val<F16>(values, i1 + 1u);
            __syncwarp();  // the previous step's reads of the slab are done
            if (u0) seg_store<N, W>(sx + r * N, xa);
            if (u1) seg_store<N, W>(sx + (8u + r) * N, xb);
            __syncwarp();
        }
        u32 it = 0;  // SEG: loop iteration (values 0 and 1 preloaded)
        // (v9: no branch around a lane's loads: they are predicated on h0 / h1, as the FMAs.)
        while ((b0 | b1) != 0u) {
            const bool h0 = b0 != 0u, h1 = b1 != 0u;
            // (b == 0: __ffs - 1 = ~0, an address nothing loads from; SEG masks it into the slab)
            const u32 j0 = __ffs(b0) - 1u;
            const u32 j1 = __ffs(b1) - 1u;
            b0 &= b0 - 1u;  // (0 stays 0)
            b1 &= b1 - 1u;
            float x0[N], x1[N];
            float v0, v1;
            if (SEG) {
                const float l0 = core_val_if<F16>(values, i0, h0 && it >= 2u);
                const float l1 = core_val_if<F16>(values, i1, h1 && it >= 2u);
                v0 = it == 0u ? p00 : (it == 1u ? p01 : l0);
                v1 = it == 0u ? p10 : (it == 1u ? p11 : l1);
                seg_row<N, W>(sx + (j0 & 7u) * N, x0);
                seg_row<N, W>(sx + (8u + (j1 & 7u)) * N, x1);
                ++it;
            } else {
                v0 = core_val_if<F16>(values, i0, h0);
                v1 = core_val_if<F16>(values, i1, h1);
                bits_xrow_if<N, W>(xs0 + j0 * N, vec, h0, x0);
                bits_xrow_if<N, W>(xs1 + j1 * N, vec, h1, x1);
            }
            bits_pair_fma<N>(acc, h0, v0, x0, i0, h1, v1, x1, i1);
        }
        if (row_end) {  // warp-uniform
            const float sc = alpha * s;
            const u64 yr = (u64)row * 8u + r;
#pragma unroll
            for (int k = 0; k < N; ++k) {
                float a = acc[k];
                a += __shfl_xor_sync(FULL_MASK, a, 8);
                a += __shfl_xor_sync(FULL_MASK, a, 16);
                acc[k] = 0.0f;
                if (q == 0u) {
                    const float v = sc * a;
                    if (split) {
                        partial[((u64)slot * 8u + r) * N + k] = v;
                    } else if (yr < rows) {
                        float* py = y + yr * N + k;
                        *py = beta == 0.0f ? v : fmaf(beta, *py, v);
                    }
                }
            }
            row_cursor_step<F16>(row, rend, te, ptr, row_scale, ne, e, s, e_next, s_next);
        }
        t = nt;
        m0 = n0;
        m1 = n1;
    }
    // A split half's row was written to its slot by group 0; the row's last chunk writes y (n = 1:
    // the host passes a null count for n >= 2, and spmv_fixup sums those rows).
    uint2 fe;
    if (split && q == 0u && split_last(spl, cnt, slot, 0xffu, 0u, fe)) {
        const u64 yr = (u64)w.x * 8u + r;
        if (yr < rows) {
#pragma unroll
            for (int k = 0; k < N; ++k) split_store(partial, fe, r * N + k, N, y, yr, k, beta);
        }
    }
}

// `bitsw` leaves the registers to ptxas (40-64, no spills at n = 8); `segw` asks for 3 blocks per
// SM (<= 85 registers; left alone it took 94 at n = 8, at 4 blocks it spilled 92-112 bytes).
#define SPMV_BITSW_ENTRY(NAME, F16, N) \
    SPMV_XROW_ENTRY(__launch_bounds__(32 * SPMV_WARPS), NAME, spmv_bitsw_body, F16, N, false)
#define SPMV_SEGW_ENTRY(NAME, F16, N) \
    SPMV_XROW_ENTRY(__launch_bounds__(32 * SPMV_WARPS, 3), NAME, spmv_bitsw_body, F16, N, true)

// ---------------------------------------------------------------------------------------------
// "blockbw" (v12c): `bitsw` with one half per thread block, N = 1..8 right-hand sides. The half's
// tiles are cut into 8 contiguous ranges, one per warp, each walked as `bitsw` walks a half. A
// row that lies inside one warp's range is finished by that warp, which writes it (y, or the
// split half's slot); only the first and the last row of each range can be shared with other
// warps: their sums go to part[warp][first / last][r][k], and after one barrier the block writes
// every row no warp wrote (shared rows: the warps' sums added in warp order; empty rows: 0), so
// each row of the half is written once and the result does not depend on scheduling. Rows of up
// to the tile budget are thereby summed without split slots -- at N >= 2 without the spmv_fixup
// node, which a half of `bitsw` needs for every tile-row longer than its budget.
// ---------------------------------------------------------------------------------------------
template <int F16, int N, bool SEG, bool VEC>
__device__ __forceinline__ void spmv_blockbw_body(SPMV_WALK_BODY_PARAMS) {
    (void)cols;
    static_assert(!SEG, "blockbw reads x rows from global memory");
    constexpr int W = XROW_W(N);
    constexpr u32 NONE = 0xffffffffu;
    __shared__ float part[SPMV_WARPS][2][8][N];  // [warp][first row, last row][r][k]
    __shared__ u32 range_rows[SPMV_WARPS][3];    // first row, last row, rows written (bits)
    const u32 lane = threadIdx.x, wid = threadIdx.y, tid = wid * 32u + lane;
    const u32 r = lane & 7u, q = lane >> 3;
    SPMV_WALK_HALF(blockIdx.x);  // (returns for the whole block: uniform)
    const u32 nrows = rend - w.x;  // <= 32 (SpmvWork::check)
    // Lane i: the end of the half's row i (cut at te) and its scale.
    const u32 row_end = lane < nrows ? min(__ldg(ptr + w.x + 1u + lane), te) : te;
    const float row_s = (F16 && lane < nrows) ? __ldg(row_scale + w.x + lane) : 1.0f;
    const u32 per = (te - t + SPMV_WARPS - 1u) / SPMV_WARPS;
    const u32 a = min(t + wid * per, te), b = min(a + per, te);
    // The first step's records, bounded by the range and cut at the first row's end below.
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 m0 = a + q < b ? __ldg(tiles + a + q) : zero;
    uint4 m1 = a + 4u + q < b ? __ldg(tiles + a + 4u + q) : zero;
    u32 first = NONE, last = NONE, written = 0u;
    if (a < b) {  // warp-uniform
        const CoreLane cl = core_lane(r);
        constexpr bool vec = VEC;
        auto row_of = [&](u32 from) { return range_row_of(row_end, nrows, lane, from); };
        u32 rl = row_of(a);
        first = rl;
        last = row_of(b - 1u);
        u32 e = min(__shfl_sync(FULL_MASK, row_end, rl), b);
        m0 = a + q < e ? m0 : zero;
        m1 = a + 4u + q < e ? m1 : zero;
        float acc[N];
#pragma unroll
        for (int k = 0; k < N; ++k) acc[k] = 0.0f;
        u32 tt = a;
        while (tt < b) {  // warp-uniform
            const RangeStep ns = range_step(tiles, tt, rl, e, b, row_end, nrows, lane, q);
            const u32 nt = ns.nt, nrl = ns.nrl, ne = ns.ne;
            const bool ends = ns.ends;
            const uint4 n0 = ns.n0, n1 = ns.n1;
            const CoreTile c0 = core_decode(m0, cl);
            const CoreTile c1 = core_decode(m1, cl);
            const float* xs0 = x + (u64)m0.z * 8u * N;
            const float* xs1 = x + (u64)m1.z * 8u * N;
            u32 b0 = c0.bits, b1 = c1.bits, i0 = c0.idx, i1 = c1.idx;
            while ((b0 | b1) != 0u) {  // `bitsw`'s loop (a spent byte adds nothing)
                const bool h0 = b0 != 0u, h1 = b1 != 0u;
                const u32 j0 = __ffs(b0) - 1u;
                const u32 j1 = __ffs(b1) - 1u;
                b0 &= b0 - 1u;
                b1 &= b1 - 1u;
                float x0[N], x1[N];
                const float v0 = core_val_if<F16>(values, i0, h0);
                const float v1 = core_val_if<F16>(values, i1, h1);
                bits_xrow_if<N, W>(xs0 + j0 * N, vec, h0, x0);
                bits_xrow_if<N, W>(xs1 + j1 * N, vec, h1, x1);
                bits_pair_fma<N>(acc, h0, v0, x0, i0, h1, v1, x1, i1);
            }
            if (ends) {  // row end or the range's end: this warp's sum of row rl
                const bool shared_row = rl == first || rl == last;
                const float sc = alpha * __shfl_sync(FULL_MASK, row_s, rl);
                const u64 yr = (u64)(w.x + rl) * 8u + r;
#pragma unroll
                for (int k = 0; k < N; ++k) {
                    float v = acc[k];
                    v += __shfl_xor_sync(FULL_MASK, v, 8);
                    v += __shfl_xor_sync(FULL_MASK, v, 16);
                    acc[k] = 0.0f;
                    if (q == 0u) {
                        if (shared_row) {
                            part[wid][rl == first ? 0 : 1][r][k] = v;
                        } else if (split) {  // (never: a split half is one row, shared)
                            partial[((u64)slot * 8u + r) * N + k] = sc * v;
                        } else if (yr < rows) {
                            float* py = y + yr * N + k;
                            *py = beta == 0.0f ? sc * v : fmaf(beta, *py, sc * v);
                        }
                    }
                }
                if (!shared_row) written |= 1u << rl;
            }
            tt = nt;
            rl = nrl;
            e = ne;
            m0 = n0;
            m1 = n1;
        }
    }
    if (lane == 0u) {
        range_rows[wid][0] = first;
        range_rows[wid][1] = last;
        range_rows[wid][2] = written;
    }
    __syncthreads();
    u32 done = 0u;
#pragma unroll
    for (int k = 0; k < SPMV_WARPS; ++k) done |= range_rows[k][2];
    // Every row no warp wrote: the first / last sums of the warps that reached it, in warp order.
    for (u32 i = tid; i < nrows * 8u * N; i += 32u * SPMV_WARPS) {
        const u32 row_l = i / (8u * N), rem = i % (8u * N), rr = rem / N, k = rem % N;
        if ((done >> row_l) & 1u) continue;
        float total = 0.0f;
#pragma unroll
        for (int v = 0; v < SPMV_WARPS; ++v) {
            const u32 f = range_rows[v][0], l = range_rows[v][1];
            if (f == row_l) total += part[v][0][rr][k];
            if (l == row_l && l != f) total += part[v][1][rr][k];
        }
        const float sc = alpha * (F16 ? __ldg(row_scale + w.x + row_l) : 1.0f);
        if (split) {
            partial[((u64)slot * 8u + rr) * N + k] = sc * total;
        } else {
            const u64 yr = (u64)(w.x + row_l) * 8u + rr;
            if (yr < rows) {
                float* py = y + yr * N + k;
                *py = beta == 0.0f ? sc * total : fmaf(beta, *py, sc * total);
            }
        }
    }
    // A split half (one row) wrote its slot from threads 0..8N-1; at N = 1 those are warp 0's
    // lanes 0-7 (N >= 2: spmv_fixup sums the row).
    if (N == 1) block_split_finish(split, slot, w.x, spl, cnt, partial, y, rows, beta);
}

#define SPMV_BLOCKBW_ENTRY(NAME, F16, N) \
    SPMV_XROW_ENTRY(__launch_bounds__(32 * SPMV_WARPS, 3), NAME, spmv_blockbw_body, F16, N, false)

// ---------------------------------------------------------------------------------------------
// "tc": the set-bit walk's x reuse on tensor cores, n = 1..8 right-hand sides (v5). One warp per
// work item (two halves: top and bottom of the MMA, as the MMA kernels above), but with the walk's
// lean bookkeeping: per step the warp multiplies the next tile T1 of its top half and T2 of its
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
        b[0] = (live && k0 < cols) ? f32_to_tf32(__ldg(xp)) : 0u;
        b[1] = (live && k0 + 4u < cols) ? f32_to_tf32(__ldg(xp + 4 * N)) : 0u;
    } else {
        b[0] = (live && k0 < cols) ? f32_to_tf32(__ldg(x + (u64)k0 * N + g)) : 0u;
        b[1] = (live && k0 + 4u < cols) ? f32_to_tf32(__ldg(x + (u64)(k0 + 4u) * N + g)) : 0u;
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
            mma_tf32(acc, a0[u][0], 0u, a0[u][1], 0u, b0[u][0], b0[u][1]);
            mma_tf32(acc, 0u, a1[u][0], 0u, a1[u][1], b1[u][0], b1[u][1]);
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

// ---------------------------------------------------------------------------------------------
// The walks for 1..8 right-hand sides (`bits`, `seg`, `bitsw`, `segw`, `blockbw`, `tc`), grouped
// by N: the N = 1 entries in spmv.ptx with everything above, those for N = 2..8 each in its own
// module spmv_n<N>.ptx (see SPMV_MODULE_N at the top).
// ---------------------------------------------------------------------------------------------
// `SPMV_RHS_ENTRIES(N, tc f32 blocks per SM)`: the 12 walks for N right-hand sides, f16 before
// f32 (`tc`'s f16 entries ask for 3 blocks per SM, its f32 ones for 4 at N >= 2).
#define SPMV_RHS_ENTRIES(N, TC_F32_MINB)                                                           \
    SPMV_BITS_ENTRY(spmv_bits##N##_f16, 1, N)                                                      \
    SPMV_BITS_ENTRY(spmv_bits##N##_f32, 0, N)                                                      \
    SPMV_SEG_ENTRY(spmv_seg##N##_f16, 1, N)                                                        \
    SPMV_SEG_ENTRY(spmv_seg##N##_f32, 0, N)                                                        \
    SPMV_BITSW_ENTRY(spmv_bitsw##N##_f16, 1, N)                                                    \
    SPMV_BITSW_ENTRY(spmv_bitsw##N##_f32, 0, N)                                                    \
    SPMV_SEGW_ENTRY(spmv_segw##N##_f16, 1, N)                                                      \
    SPMV_SEGW_ENTRY(spmv_segw##N##_f32, 0, N)                                                      \
    SPMV_BLOCKBW_ENTRY(spmv_blockbw##N##_f16, 1, N)                                                \
    SPMV_BLOCKBW_ENTRY(spmv_blockbw##N##_f32, 0, N)                                                \
    SPMV_TC_ENTRY(spmv_tc##N##_f16, 1, N, 3)                                                       \
    SPMV_TC_ENTRY(spmv_tc##N##_f32, 0, N, TC_F32_MINB)

#if SPMV_MODULE_N == 1
SPMV_RHS_ENTRIES(1, 3)
#elif SPMV_MODULE_N == 2
SPMV_RHS_ENTRIES(2, 4)
SPMV_CSR_ENTRY(2)
SPMV_CSRROWS_ENTRY(2)
#elif SPMV_MODULE_N == 3
SPMV_RHS_ENTRIES(3, 4)
SPMV_CSR_ENTRY(3)
SPMV_CSRROWS_ENTRY(3)
#elif SPMV_MODULE_N == 4
SPMV_RHS_ENTRIES(4, 4)
SPMV_CSR_ENTRY(4)
SPMV_CSRROWS_ENTRY(4)
#elif SPMV_MODULE_N == 5
SPMV_RHS_ENTRIES(5, 4)
SPMV_CSR_ENTRY(5)
SPMV_CSRROWS_ENTRY(5)
#elif SPMV_MODULE_N == 6
SPMV_RHS_ENTRIES(6, 4)
SPMV_CSR_ENTRY(6)
SPMV_CSRROWS_ENTRY(6)
#elif SPMV_MODULE_N == 7
SPMV_RHS_ENTRIES(7, 4)
SPMV_CSR_ENTRY(7)
SPMV_CSRROWS_ENTRY(7)
#elif SPMV_MODULE_N == 8
SPMV_RHS_ENTRIES(8, 4)
SPMV_CSR_ENTRY(8)
SPMV_CSRROWS_ENTRY(8)
#else
#error "SPMV_MODULE_N must be 1 to 8"
#endif
