// Device helpers shared by the kernels (acc_spmm.cu: Acc-SpMM on BitTCF; row_tile_spmm.cu: the
// row-tile kernels; hrpb_spmm.cu: HRPB; csr_spmm.cu: CSR on CUDA cores; spmv.cu and spamm.cu: the
// conversions and the TF32 MMA step): types, the TF32 conversion and MMA step, the gather of two B
// rows, the guarded load of four features, the popcount decode of one tile value, the alpha/beta
// stores and the vector atomic add. Everything is __forceinline__, so a kernel compiles to the same
// code as with the helpers written in its own file.
#ifndef TCSPARSE_TC_COMMON_CUH
#define TCSPARSE_TC_COMMON_CUH

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;  // f16 / bf16 values as raw bits (see below)

#define SENTINEL 0xFFFFFFFFu
#define MAX_WARPS 8

__device__ __forceinline__ u32 to_tf32(float x) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// One m16n8k8 TF32 MMA with f32 accumulate, operands already in TF32: d += A * B with this lane's
// A fragments a0..a3 and B fragments b0, b1 (PTX ISA fragment layouts).
__device__ __forceinline__ void mma_m16n8k8_tf32(float d[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                                 u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// mma_m16n8k8_tf32 with the A fragments a[0..3] as one array.
__device__ __forceinline__ void mma_m16n8k8_tf32(float d[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_m16n8k8_tf32(d, a[0], a[1], a[2], a[3], b0, b1);
}

// mma_m16n8k8_tf32 with the A fragments given in f32 (rounded to TF32 here).
__device__ __forceinline__ void mma_tf32(float d[4], float a0, float a1, float a2, float a3, u32 b0,
                                         u32 b1) {
    mma_m16n8k8_tf32(d, to_tf32(a0), to_tf32(a1), to_tf32(a2), to_tf32(a3), b0, b1);
}

// The four-feature vector of load_b_rows per element type: f32 as one float4, 16-bit values (f16
// or bf16 bits) as one uint2 (8 bytes), lower feature in the lower half.
template <typename T>
struct Vec4;
template <>
struct Vec4<float> {
    typedef float4 V;
    __device__ __forceinline__ static V zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
    __device__ __forceinline__ static void unpack(const V& v, float out[4]) {
        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    }
};
template <>
struct Vec4<u16> {
    typedef uint2 V;
    __device__ __forceinline__ static V zero() { return make_uint2(0u, 0u); }
    __device__ __forceinline__ static void unpack(const V& v, u16 out[4]) {
        out[0] = (u16)(v.x & 0xFFFFu); out[1] = (u16)(v.x >> 16);
        out[2] = (u16)(v.y & 0xFFFFu); out[3] = (u16)(v.y >> 16);
    }
};

// The loads of load_b_rows: the read-only path (__ldg). acc_spmm.cu's paper entries pass their
// own (ld.global.ca).
struct LdgLoads {
    template <typename T>
    __device__ __forceinline__ static typename Vec4<T>::V vec(const T* p) {
        return __ldg(reinterpret_cast<const typename Vec4<T>::V*>(p));
    }
    template <typename T>
    __device__ __forceinline__ static T one(const T* p) {
        return __ldg(p);
    }
};

// Loads one lane's slice of two gathered B rows: features fl .. fl + 3 of rows col_lo and col_hi
// (one vector load each when vec: fl and ldb multiples of 4, B 16-byte aligned; else per-feature
// guarded by qok). Sentinel columns give a zero row (B is never read at u32::MAX); features >= N
// read nothing. T is float or u16 (f16 / bf16 bits); Ld the loads (LdgLoads or acc_spmm.cu's).
// Shared by every tensor-core kernel.
template <class Ld = LdgLoads, typename T>
__device__ __forceinline__ void load_b_rows(const T* __restrict__ B, u64 ldb, u32 fl, u32 col_lo,
                                            u32 col_hi, const bool qok[4], bool vec, T lo[4],
                                            T hi[4]) {
    const bool lo_ok = col_lo != SENTINEL;
    const bool hi_ok = col_hi != SENTINEL;
    const T* rlo = B + (lo_ok ? (u64)col_lo * ldb : 0) + fl;
    const T* rhi = B + (hi_ok ? (u64)col_hi * ldb : 0) + fl;
    if (vec) {
        typedef Vec4<T> W;
        const typename W::V z = W::zero();
        const typename W::V l = lo_ok ? Ld::vec(rlo) : z;
        const typename W::V h = hi_ok ? Ld::vec(rhi) : z;
        W::unpack(l, lo);
        W::unpack(h, hi);
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            lo[q] = (lo_ok && qok[q]) ? Ld::one(rlo + q) : (T)0;
            hi[q] = (hi_ok && qok[q]) ? Ld::one(rhi + q) : (T)0;
        }
    }
}

// Features col .. col + 3 at p, each read only when below n (zeros beyond n): the scalar B load of
// the CUDA-core CSR kernel (csr_spmm.cu) and of the HRPB kernels (hrpb_spmm.cu).
__device__ __forceinline__ float4 load4_below(const float* __restrict__ p, u64 col, u32 n) {
    float4 v;
    v.x = col < n ? __ldg(p) : 0.0f;
    v.y = col + 1 < n ? __ldg(p + 1) : 0.0f;
    v.z = col + 2 < n ? __ldg(p + 2) : 0.0f;
    v.w = col + 3 < n ? __ldg(p + 3) : 0.0f;
    return v;
}

// Value of bit p of mask m whose first value is at values[base] (0 when the bit is clear): the
// popcount decode of one tile element (below = the bits before p).
__device__ __forceinline__ float masked_value(const float* __restrict__ values, u32 base, u64 m,
                                              u32 p, u64 below) {
    return ((m >> p) & 1ull) ? __ldg(values + base + __popcll(m & below)) : 0.0f;
}

// v + beta * C for four features at an aligned address (C not read when beta == 0).
__device__ __forceinline__ float4 axpby4(const float4* dst, float4 v, float beta) {
    if (beta != 0.0f) {
        const float4 old = *dst;
        v.x += beta * old.x;
        v.y += beta * old.y;
        v.z += beta * old.z;
        v.w += beta * old.w;
    }
    return v;
}

// C = v + beta * C for four features at an aligned address (C not read when beta == 0).
__device__ __forceinline__ void store_axpby4(float4* dst, float4 v, float beta) {
    *dst = axpby4(dst, v, beta);
}

// C = v + beta * C for one feature (C not read when beta == 0).
__device__ __forceinline__ void store_axpby(float* dst, float v, float beta) {
    *dst = (beta == 0.0f) ? v : v + beta * *dst;
}

// d[0..3] += v[0..3] with one vector atomic (red.global.add.v4.f32, sm_90; d 16-byte aligned).
__device__ __forceinline__ void red_add_v4(float* d, const float (&v)[4]) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(d), "f"(v[0]), "f"(v[1]),
                 "f"(v[2]), "f"(v[3])
                 : "memory");
}

// ---------------------------------------------------------------------------------------------------
// Element types other than f32 and the 3xTF32 split (the row-tile kernels' f16, bf16 and 3xTF32
// entries). Half values travel as their raw 16 bits (u16), so no CUDA header is needed; the
// conversions are the PTX ones: f32 -> f16 / bf16 round to nearest even, beyond the range +-inf
// (no .satfinite), NaN stays NaN -- what the host's `half` crate does.

__device__ __forceinline__ u16 f32_to_f16_rn(float x) {
    u16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ u16 f32_to_bf16_rn(float x) {
    u16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ float f16_to_f32(u16 h) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
}

// Exact: a bf16 is the upper half of an f32.
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float((u32)h << 16); }

// A 16-bit value of f16 (BF false) or bf16 (BF true) in f32 (exact), and an f32 rounded to it to
// nearest (beyond its range ±inf, as a cast).
template <bool BF>
__device__ __forceinline__ float half_to_f32(u16 h) {
    return BF ? bf16_to_f32(h) : f16_to_f32(h);
}
template <bool BF>
__device__ __forceinline__ u16 f32_to_half_rn(float x) {
    return BF ? f32_to_bf16_rn(x) : f32_to_f16_rn(x);
}

// Two half values in one register: lo in bits 0-15 (the fragment element of the smaller index).
__device__ __forceinline__ u32 pack_half2(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

// d[j] += v[j] with atomics for the features f + j < n: one red.global.add.v4.f32 when vec (d
// 16-byte aligned, all four below n). The partial sums of the row-tile kernels' split windows and
// of the CSR kernel's split rows (I: their feature index type, u32 or u64).
template <typename I>
__device__ __forceinline__ void add4_atomic(float* d, const float (&v)[4], I f, u32 n, bool vec) {
    if (vec) {
        red_add_v4(d, v);
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (f + j < n) atomicAdd(d + j, v[j]);
    }
}

// d[j] = round(v[j] + beta * d[j]) for the features f + j < n (d read in the type, not when
// beta == 0), rounded to f16 (BF false) or bf16 (BF true) to nearest, beyond the range +-inf as a
// cast: one 8-byte access when vec (d 8-byte aligned, all four below n). The 16-bit C store of the
// row-tile and CSR kernels (I: their feature index type, u32 or u64).
template <bool BF, typename I>
__device__ __forceinline__ void store4_half(u16* d, const float (&v)[4], bool vec, I f, u32 n,
                                            float beta) {
    if (vec) {
        uint2* p = reinterpret_cast<uint2*>(d);
        float x[4] = {v[0], v[1], v[2], v[3]};
        if (beta != 0.0f) {
            const uint2 old = *p;
            x[0] += beta * half_to_f32<BF>((u16)(old.x & 0xFFFFu));
            x[1] += beta * half_to_f32<BF>((u16)(old.x >> 16));
            x[2] += beta * half_to_f32<BF>((u16)(old.y & 0xFFFFu));
            x[3] += beta * half_to_f32<BF>((u16)(old.y >> 16));
        }
        *p = make_uint2(pack_half2(f32_to_half_rn<BF>(x[0]), f32_to_half_rn<BF>(x[1])),
                        pack_half2(f32_to_half_rn<BF>(x[2]), f32_to_half_rn<BF>(x[3])));
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (f + j < n)
            d[j] = f32_to_half_rn<BF>(beta == 0.0f ? v[j] : v[j] + beta * half_to_f32<BF>(d[j]));
    }
}

// The f32 scratch rows of the f16 / bf16 kernels' split groups (a 16-bit C cannot take partial
// sums): split group ids[s] (ids ascending, `count` of them) owns scratch rows
// [group_rows * s, group_rows * (s + 1)), N floats each (row-major, leading dimension N), zeroed
// before the kernel, which adds into them; split_rows_finish adds beta * C and rounds them into C
// after it. The row-tile kernels' groups are their split windows (16 or 32 rows), the CSR kernel's
// its split rows (one row). Unused (count = 0) by the f32 entries.
struct SplitScratch {
    const u32* __restrict__ ids;
    u32 count;
    float* __restrict__ rows;
};

// Slot of split group w: its index in ids (w is one of them).
__device__ __forceinline__ u32 split_slot(const SplitScratch& ss, u32 w) {
    u32 lo = 0, hi = ss.count;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) / 2;
        if (__ldg(ss.ids + mid) <= w) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// After an f16 / bf16 kernel with split groups: C = round(scratch + beta * C) on their rows (C not
// read when beta == 0; rounded to nearest, beyond the range +-inf, as a cast). Thread block x takes
// the groups x, x + gridDim.x, ...: group ids[s] is rows [group_rows * ids[s], ...) of C (rows >= M
// skipped) and scratch rows [group_rows * s, ...), N floats each.
template <bool BF>
__device__ __forceinline__ void split_rows_finish(const u32* __restrict__ ids, u32 count,
                                                  const float* __restrict__ scratch,
                                                  u16* __restrict__ C, u32 ldc, u32 M, u32 N,
                                                  float beta, u32 group_rows) {
    for (u32 s = blockIdx.x; s < count; s += gridDim.x) {
        const u32 r0 = __ldg(ids + s) * group_rows;
        const u32 rows = min(group_rows, M - r0);
        const u64 total = (u64)rows * N;
        for (u64 i = threadIdx.x; i < total; i += blockDim.x) {
            const u32 r = (u32)(i / N), f = (u32)(i % N);
            float x = scratch[((u64)s * group_rows + r) * N + f];
            u16* d = C + (u64)(r0 + r) * ldc + f;
            if (beta != 0.0f) x += beta * half_to_f32<BF>(*d);
            *d = f32_to_half_rn<BF>(x);
        }
    }
}

// The entry NAME of split_rows_finish in f16 (BF false) or bf16 (BF true).
#define SPLIT_ROWS_FINISH_ENTRY(NAME, BF)                                                         \
    extern "C" __global__ void NAME(const u32* __restrict__ ids, u32 count,                     \
                                    const float* __restrict__ scratch, u16* __restrict__ C,     \
                                    u32 ldc, u32 M, u32 N, float beta, u32 group_rows) {        \
        split_rows_finish<BF>(ids, count, scratch, C, ldc, M, N, beta, group_rows);             \
    }

// One m16n8k8 MMA on f16 (mma_m16n8k8_f16) or bf16 (mma_m16n8k8_bf16) inputs with f32 accumulate:
// d += A * B with this lane's A fragments a01 = {A[g][2t], A[g][2t+1]}, a23 = {A[g+8][2t],
// A[g+8][2t+1]} and B fragment b01 = {B[2t][g], B[2t+1][g]} (PTX ISA m16n8k8 .f16 / .bf16 layouts;
// C as for TF32).
#define TC_MMA_M16N8K8_HALF(NAME, TYPE)                                                           \
    __device__ __forceinline__ void NAME(float d[4], u32 a01, u32 a23, u32 b01) {                 \
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32." TYPE "." TYPE                        \
                     ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"                        \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                             \
                     : "r"(a01), "r"(a23), "r"(b01));                                              \
    }
TC_MMA_M16N8K8_HALF(mma_m16n8k8_f16, "f16")
TC_MMA_M16N8K8_HALF(mma_m16n8k8_bf16, "bf16")
#undef TC_MMA_M16N8K8_HALF

// The 3xTF32 split of x (SpAMM's, kernels-ptx/spamm.cu): big = tf32(x), small = tf32(x - big),
// so x = big + small to about 2^-22 |x|. A non-finite x keeps small = 0 (x - big would be NaN
// for an infinite x), so an infinity propagates as one and NaN through big.
__device__ __forceinline__ void split_tf32(float x, u32& big, u32& small) {
    big = to_tf32(x);
    const float d = x - __uint_as_float(big);
    small = (d == d) ? to_tf32(d) : 0u;
}

// masked_value for 16-bit values (0 bits, +0 in f16 and bf16, when the bit is clear).
__device__ __forceinline__ u16 masked_value(const u16* __restrict__ values, u32 base, u64 m, u32 p,
                                            u64 below) {
    return ((m >> p) & 1ull) ? __ldg(values + base + __popcll(m & below)) : (u16)0;
}

// The parameter list of the f32 SpMM entries on BitTCF tiles (acc_spmm.cu, row_tile_spmm.cu), in
// the order of the launch code (crates/gpu signature tables); A2X and MASKS name the block-to-column
// map and the tile masks as each kernel does.
#define BITTCF_SPMM_PARAMS(A2X, MASKS)                                                             \
    const u32* __restrict__ rwo, const u32* __restrict__ bvo, const u32* __restrict__ A2X,        \
        const u64* __restrict__ MASKS, const float* __restrict__ values,                          \
        const u32* __restrict__ work, const unsigned char* __restrict__ window_split,             \
        const float* __restrict__ B, u32 ldb, float* __restrict__ C, u32 ldc, u32 M, u32 N,       \
        float alpha, float beta, u32 flags

#endif  // TCSPARSE_TC_COMMON_CUH
