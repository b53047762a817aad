// The set-bit walks for 1..8 right-hand sides: `bits` / `seg` (the `core` layout), `bitsw` / `segw`
// (one half per warp) and `blockbw` (a thread block per half), with their x-row loads.
// Included by spmv.cu after the types and bit helpers at its top (one translation unit; the
// headers are in the order spmv.cu includes them, each relying on those before it).

#ifndef TCSPARSE_SPMV_SETBIT_CUH
#define TCSPARSE_SPMV_SETBIT_CUH

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
                const float a = take_group_sum(acc[k]);
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
                    const float v = take_group_sum(acc[k]);
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

#endif  // TCSPARSE_SPMV_SETBIT_CUH
