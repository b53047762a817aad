// cuSpAMM on the GPU: norm maps and norm-gated dense products C = alpha * A~B + beta * C, where A~B
// keeps only the 32x32 tile products A(i,k) * B(k,j) with normA(i,k) * normB(k,j) >= tau (the same
// rule as formats::normmap::spamm_cpu and planner::spamm: products of f32 norms, >= everywhere).
//
// Matrices are dense row-major: A m x k (leading dimension lda), B k x n (ldb), C m x n (ldc).
// Norm tiles are 32 x 32 (LoNum = 32); edge tiles are partial. beta == 0 never reads C.
//
// Norm kernels (spamm_norms_f32 / _f16): one warp per 32x32 tile, lane L sums the squares of column
// L of the tile over its 32 rows in f32 (f16 inputs are converted to f32 before squaring: no
// overflow above |a| = 256), then a shuffle reduction. Block (32, 8): 8 tiles of one tile row, so
// each row of the block reads 1 KiB contiguous. Output is the tile_rows x tile_cols map, row-major,
// or its transpose (flag 1): the product kernels read B's map transposed so that the k's of one
// tile column are contiguous.
//
// Product kernels (spamm_mm_<prec>_b<64|128>): a thread block owns C blocks of BT x BT norm tiles
// (BT = 2: 64 x 64, 4 warps; BT = 4: 128 x 128, 16 warps); warp w owns the 32 x 32 tile
// (w / BT, w % BT) of the block. The blocks a thread block handles come from the strided assignment
// of planner::spamm (offsets / ids), so the heavy blocks near the diagonal of a decay matrix are
// spread over all thread blocks (balance parameter s). For each C block the k tiles are scanned in
// chunks of CHUNK: every thread tests BT*BT norm products of one k, the k's with any valid product
// are compacted (in ascending k, so sums are deterministic) into a shared list with the BT*BT-bit
// mask of valid sub-products. The list is walked with a two-stage cp.async pipeline (A's BT*32 x 32
// and B's 32 x BT*32 panels); warp w multiplies only when its bit is set, so exactly the products
// the rule admits are computed. Chunking makes any K work (no fixed-size list: the released code
// miscounted above K = 12288). Every C tile is written, also those with no valid product.
//
// Precisions: F32 (CUDA-core FMA, lane = column), TF32 (mma.m16n8k8, operands rounded with
// cvt.rna), 3xTF32 (a = a_hi + a_lo, a_hi*b_hi + a_hi*b_lo + a_lo*b_hi: f32-level accuracy on
// tensor cores), F16 (mma.m16n8k16, f16 operands, f32 accumulation). Optional valid counter: one
// atomicAdd per C block of the number of computed 32x32x32 tile products.
//
// Accuracy check (spamm_error_sums): for up to 64 sampled rows of A (gathered on the host, R x k)
// and the same rows of the computed C (R x n), the reference ref = A_rows * B in f64 and the two
// sums sum (c - ref)^2 and sum ref^2, one pair per thread block (the host adds them in block order:
// deterministic). Each ref element is accumulated in ascending k from 0.0, A values of 0 skipped,
// as tcsparse::spamm::measured_error does on the CPU; f32 * f32 is exact in f64, so fma and
// multiply-then-add round alike and every ref equals the CPU's bit for bit.

// Types, the TF32 conversion (to_tf32) and the m16n8k8 TF32 MMA step (mma_m16n8k8_tf32).
#include "tc_common.cuh"

typedef u16 f16;  // IEEE half, as raw bits (NVRTC here has no cuda_fp16.h)

#define TILE 32
#define CHUNK 512

// ---------------------------------------------------------------------------------------------
// Norm maps.

template <typename T>
__device__ __forceinline__ float to_f32(T x);
template <>
__device__ __forceinline__ float to_f32<float>(float x) {
    return x;
}
template <>
__device__ __forceinline__ float to_f32<f16>(f16 x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
}

template <typename T>
__device__ __forceinline__ void norms(const T* __restrict__ a, u32 rows, u32 cols, u64 ld,
                                      float* __restrict__ out, u32 transpose) {
    const u32 tr = (rows + TILE - 1) / TILE, tc = (cols + TILE - 1) / TILE;
    const u32 lane = threadIdx.x;
    const u32 tj = blockIdx.x * blockDim.y + threadIdx.y;
    for (u32 ti = blockIdx.y; ti < tr; ti += gridDim.y) {
        if (tj >= tc) return;
        const u32 col = tj * TILE + lane;
        const u32 r0 = ti * TILE;
        float s = 0.0f;
        if (col < cols) {
            const T* p = a + (u64)r0 * ld + col;
            const u32 nr = min(TILE, rows - r0);
            if (nr == TILE) {
#pragma unroll
                for (int r = 0; r < TILE; ++r) {
                    const float v = to_f32<T>(p[(u64)r * ld]);
                    s = fmaf(v, v, s);
                }
            } else {
                for (u32 r = 0; r < nr; ++r) {
                    const float v = to_f32<T>(p[(u64)r * ld]);
                    s = fmaf(v, v, s);
                }
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) out[transpose ? (u64)tj * tr + ti : (u64)ti * tc + tj] = sqrtf(s);
    }
}

extern "C" __global__ void __launch_bounds__(256) spamm_norms_f32(const float* __restrict__ a,
                                                                   u32 rows, u32 cols, u64 ld,
                                                                   float* __restrict__ out,
                                                                   u32 transpose) {
    norms<float>(a, rows, cols, ld, out, transpose);
}

extern "C" __global__ void __launch_bounds__(256) spamm_norms_f16(const f16* __restrict__ a,
                                                                   u32 rows, u32 cols, u64 ld,
                                                                   float* __restrict__ out,
                                                                   u32 transpose) {
    norms<f16>(a, rows, cols, ld, out, transpose);
}

// f32 -> f16 (round to nearest; beyond 65504 gives inf, as __float2half does).
extern "C" __global__ void spamm_f32_to_f16(const float* __restrict__ x, f16* __restrict__ y,
                                            u64 len) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < len;
         i += (u64)gridDim.x * blockDim.x) {
        f16 h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x[i]));
        y[i] = h;
    }
}

// ---------------------------------------------------------------------------------------------
// Primitives.

__device__ __forceinline__ u32 smem_addr(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
// 4 bytes, zero-filled when !in (nothing is read then).
__device__ __forceinline__ void cp_async_4z(void* smem, const void* gmem, bool in) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)),
                 "l"(gmem), "r"(in ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ __forceinline__ void cp_async_wait_0() { asm volatile("cp.async.wait_group 0;\n" ::); }

__device__ __forceinline__ void mma_f16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------------------------
// Product kernels.

enum Prec { P_F32 = 0, P_TF32 = 1, P_3XTF32 = 2, P_F16 = 3 };

template <int P>
struct Elem {
    typedef float T;
};
template <>
struct Elem<P_F16> {
    typedef f16 T;
};

// Shared layout of one pipeline stage: A panel (BT*32) x 32 with row pitch APITCH elements, B panel
// 32 x (BT*32) with pitch BPITCH. Pads keep the fragment reads free of bank conflicts and every
// row 16-byte aligned for cp.async.
template <int BT, int P>
struct Layout {
    typedef typename Elem<P>::T T;
    static const int EPC = 16 / sizeof(T);  // elements per 16-byte chunk
    static const int APITCH = TILE + (P == P_F16 ? 8 : 4);
    static const int BPITCH = BT * TILE + (P == P_F16 ? 8 : 8);
    static const int A_ELEMS = BT * TILE * APITCH;
    static const int B_ELEMS = TILE * BPITCH;
    static const int STAGE_BYTES = (A_ELEMS + B_ELEMS) * (int)sizeof(T);
    static const int LIST_OFF = 2 * STAGE_BYTES;
    static const int SMEM_BYTES = LIST_OFF + 2 * CHUNK * 4 + 32 * 4;
};

struct Params {
    const void* a;
    u64 lda;
    const void* b;
    u64 ldb;
    float* c;
    u64 ldc;
    u32 m, n, k;
    const float* na;   // tm x tk
    const float* nbt;  // tn x tk (B's map transposed)
    float tau, alpha, beta;
    const u32* assign_off;
    const u32* assign_ids;
    const u32* cand_off;  // per block row: candidate k tiles cand_k[cand_off[bi] .. cand_off[bi+1])
    const u32* cand_k;
    u32 flags;  // bits 0, 1, 2: rows of A, B, C 16-byte aligned
    u64* valid;  // may be null
};

// The body of load_stage for one panel: the ROWS x CH 16-byte chunks of row-major X (leading
// dimension LD, ROWS_LIM x COLS_LIM) at (R0, C0) into S (row pitch PITCH): a cp.async of 16 bytes
// where the rows are 16-byte aligned (ALIGNED) and the chunk is in bounds, else element by element
// (f32: cp.async of 4 bytes, zero-filled outside, BASE a valid address; f16: plain stores, 0
// outside). A macro rather than a function, so that the kernels compile to the same code as when
// it was written out twice.
#define SPAMM_LOAD_PANEL(X, BASE, LD, ROWS_LIM, COLS_LIM, R0, C0, ALIGNED, S, PITCH, ROWS, CH) \
    for (int c = threadIdx.x; c < (ROWS) * (CH); c += NT) {                                      \
        const int r = c / (CH), cc = (c % (CH)) * L::EPC;                                        \
        const u32 gr = (R0) + r, gc = (C0) + cc;                                                 \
        T* dst = (S) + r * (PITCH) + cc;                                                         \
        const T* src = (X) + (u64)gr * (LD) + gc;                                                \
        if ((ALIGNED) && gr < (ROWS_LIM) && gc + L::EPC <= (COLS_LIM)) {                         \
            cp_async_16(dst, src);                                                               \
        } else if (P != P_F16) {                                                                 \
            _Pragma("unroll") for (int e = 0; e < L::EPC; ++e) {                                 \
                const bool in = gr < (ROWS_LIM) && gc + e < (COLS_LIM);                          \
                cp_async_4z(dst + e, in ? (const void*)(src + e) : (BASE), in);                  \
            }                                                                                    \
        } else {                                                                                 \
            _Pragma("unroll") for (int e = 0; e < L::EPC; ++e) {                                 \
                const bool in = gr < (ROWS_LIM) && gc + e < (COLS_LIM);                          \
                dst[e] = in ? src[e] : (T)0;                                                     \
            }                                                                                    \
        }                                                                                        \
    }

// Issues the cp.async copies of k tile kt (A's columns / B's rows kt*32 ..) for the C block at
// tile (bi, bj) into stage buffers sa, sb.
template <int BT, int P>
__device__ __forceinline__ void load_stage(const Params& p, u32 row0, u32 col0, u32 kt,
                                           typename Elem<P>::T* sa, typename Elem<P>::T* sb) {
    typedef Layout<BT, P> L;
    typedef typename Elem<P>::T T;
    const int NT = 32 * BT * BT;
    const T* A = (const T*)p.a;
    const T* B = (const T*)p.b;
    const u32 k0 = kt * TILE;
    // A panel: BT*32 rows x 32 cols = BT*32 * (32/EPC) chunks.
    const int ACH = TILE / L::EPC;
    SPAMM_LOAD_PANEL(A, p.a, p.lda, p.m, p.k, row0, k0, p.flags & 1, sa, L::APITCH, BT * TILE, ACH)
    // B panel: 32 rows x BT*32 cols.
    const int BCH = BT * TILE / L::EPC;
    SPAMM_LOAD_PANEL(B, p.b, p.ldb, p.k, p.n, k0, col0, p.flags & 2, sb, L::BPITCH, TILE, BCH)
}

// A warp's 2 x 4 accumulator fragments of 4 (the m16n8 layout): set to 0, and acc += t.
__device__ __forceinline__ void tile_zero(float (&t)[2][4][4]) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) t[i][j][q] = 0.0f;
}

__device__ __forceinline__ void tile_add(float (&acc)[2][4][4], const float (&t)[2][4][4]) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] += t[i][j][q];
}

// Warp's 32x32 += A(32x32) * B(32x32) from the stage buffers; ar, bc: the warp's offsets.
// acc[mt][nt][4] in the m16n8 accumulator layout (F32 path: acc viewed as 32 rows of column lane).
template <int BT, int P>
__device__ __forceinline__ void warp_mma(float (&acc)[2][4][4], const typename Elem<P>::T* sa,
                                         const typename Elem<P>::T* sb, int ar, int bc) {
    typedef Layout<BT, P> L;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (P == P_F32) {
        const float* A = (const float*)sa + ar * L::APITCH;
        const float* B = (const float*)sb + bc + lane;
        float* x = &acc[0][0][0];
#pragma unroll 2
        for (int kk = 0; kk < TILE; kk += 4) {
            const float b0 = B[(kk + 0) * L::BPITCH], b1 = B[(kk + 1) * L::BPITCH];
            const float b2 = B[(kk + 2) * L::BPITCH], b3 = B[(kk + 3) * L::BPITCH];
#pragma unroll
            for (int r = 0; r < 32; ++r) {
                const float4 a4 = *reinterpret_cast<const float4*>(A + r * L::APITCH + kk);
                float v = x[r];
                v = fmaf(a4.x, b0, v);
                v = fmaf(a4.y, b1, v);
                v = fmaf(a4.z, b2, v);
                v = fmaf(a4.w, b3, v);
                x[r] = v;
            }
        }
    } else if (P == P_TF32 || P == P_3XTF32) {
        const float* A = (const float*)sa + ar * L::APITCH;
        const float* B = (const float*)sb + bc;
        // The tensor cores' f32 accumulation truncates: accumulate one k tile (4 steps) apart
        // and add it with a rounded f32 add, so the bias does not grow with K.
        float t4[2][4][4];
        tile_zero(t4);
#pragma unroll
        for (int kk = 0; kk < TILE; kk += 8) {
            u32 ah[2][4], bh[4][2];
            u32 al[2][4], bl[4][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                const float* q = A + (mt * 16 + g) * L::APITCH + kk + t;
                const float v[4] = {q[0], q[8 * L::APITCH], q[4], q[8 * L::APITCH + 4]};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    ah[mt][e] = to_tf32(v[e]);
                    if (P == P_3XTF32) al[mt][e] = to_tf32(v[e] - __uint_as_float(ah[mt][e]));
                }
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const float* q = B + (kk + t) * L::BPITCH + nt * 8 + g;
                const float v[2] = {q[0], q[4 * L::BPITCH]};
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    bh[nt][e] = to_tf32(v[e]);
                    if (P == P_3XTF32) bl[nt][e] = to_tf32(v[e] - __uint_as_float(bh[nt][e]));
                }
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    if (P == P_3XTF32) {
                        mma_m16n8k8_tf32(t4[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                        mma_m16n8k8_tf32(t4[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
                    }
                    mma_m16n8k8_tf32(t4[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
                }
        }
        tile_add(acc, t4);
    } else {  // F16
        const f16* A = (const f16*)sa + ar * L::APITCH;
        const f16* B = (const f16*)sb + bc;
        float t4[2][4][4];  // one k tile apart, as above
        tile_zero(t4);
#pragma unroll
        for (int kk = 0; kk < TILE; kk += 16) {
            u32 a[2][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                const f16* q = A + (mt * 16 + g) * L::APITCH + kk + 2 * t;
                a[mt][0] = *reinterpret_cast<const u32*>(q);
                a[mt][1] = *reinterpret_cast<const u32*>(q + 8 * L::APITCH);
                a[mt][2] = *reinterpret_cast<const u32*>(q + 8);
                a[mt][3] = *reinterpret_cast<const u32*>(q + 8 * L::APITCH + 8);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const f16* q = B + (kk + 2 * t) * L::BPITCH + nt * 8 + g;
                b[nt][0] = (u32)q[0] | ((u32)q[L::BPITCH] << 16);
                b[nt][1] = (u32)q[8 * L::BPITCH] | ((u32)q[9 * L::BPITCH] << 16);
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) mma_f16(t4[mt][nt], a[mt], b[nt][0], b[nt][1]);
        }
        tile_add(acc, t4);
    }
}

__device__ __forceinline__ float axpby(float alpha, float acc, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : fmaf(beta, *c, alpha * acc);
}

// Writes the warp's 32x32 tile at (r0, c0) of C. A tile with no valid product and beta == 0 is
// all zeros: written with 16-byte stores, 4 full 128-byte rows per instruction (most of C at low
// valid ratios, so the product runs at C's write bandwidth).
template <int P>
__device__ __forceinline__ void store_tile(const Params& p, const float (&acc)[2][4][4], u32 r0,
                                           u32 c0, bool empty) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (empty && p.beta == 0.0f && (p.flags & 4) && r0 + 32 <= p.m && c0 + 32 <= p.n) {
        const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int r = lane >> 3; r < 32; r += 4)
            *reinterpret_cast<float4*>(p.c + (u64)(r0 + r) * p.ldc + c0 + 4 * (lane & 7)) = z;
        return;
    }
    if (P == P_F32) {
        const float* x = &acc[0][0][0];
        const u32 col = c0 + lane;
        if (col >= p.n) return;
#pragma unroll
        for (int r = 0; r < 32; ++r) {
            const u32 row = r0 + r;
            if (row >= p.m) continue;
            float* q = p.c + (u64)row * p.ldc + col;
            *q = axpby(p.alpha, x[r], p.beta, q);
        }
        return;
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32 row = r0 + mt * 16 + g + 8 * h;
            if (row >= p.m) continue;
            float* crow = p.c + (u64)row * p.ldc;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const u32 col = c0 + nt * 8 + 2 * t;
                const float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
                if (col < p.n) crow[col] = axpby(p.alpha, v0, p.beta, crow + col);
                if (col + 1 < p.n) crow[col + 1] = axpby(p.alpha, v1, p.beta, crow + col + 1);
            }
        }
}

template <int BT, int P>
__device__ __forceinline__ void spamm_mm(const Params& p) {
    typedef Layout<BT, P> L;
    typedef typename Elem<P>::T T;
    const int NT = 32 * BT * BT;
    extern __shared__ __align__(16) unsigned char smem[];
    // Stage buffers: A of stage s at smem + s * STAGE_BYTES, B right after it.
#define SA(s) ((T*)(smem + (s) * L::STAGE_BYTES))
#define SB(s) (SA(s) + L::A_ELEMS)
    u32* list_k = (u32*)(smem + L::LIST_OFF);  // k tile of each list entry
    u32* list_m = list_k + CHUNK;               // its BT*BT-bit mask of valid sub-products
    u32* wcnt = list_m + CHUNK;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wa = warp / BT, wb = warp % BT;
    const u32 tm = (p.m + TILE - 1) / TILE, tn = (p.n + TILE - 1) / TILE, tk = (p.k + TILE - 1) / TILE;
    const u32 bn = (tn + BT - 1) / BT;

    for (u32 e = p.assign_off[blockIdx.x]; e < p.assign_off[blockIdx.x + 1]; ++e) {
        const u32 id = p.assign_ids[e];
        const u32 bi = id / bn, bj = id % bn;
        const u32 ti0 = bi * BT, tj0 = bj * BT;
        float acc[2][4][4];
        tile_zero(acc);
        u32 computed = 0;  // valid products this warp computed (lane 0's count is used)

        // Candidate k tiles of this block row (a superset of the valid ones, built on the host
        // from the row maxima of the norm maps; all k tiles when tau = 0).
        const u32 c0 = p.cand_off[bi], nc = p.cand_off[bi + 1] - c0;
        for (u32 kc = 0; kc < nc; kc += CHUNK) {
            // Compaction of this chunk's k tiles with any valid sub-product.
            u32 base = 0;
            for (u32 r = 0; r < CHUNK && kc + r < nc; r += NT) {
                const u32 idx = kc + r + threadIdx.x;
                u32 mask = 0, kt = 0;
                if (idx < nc) {
                    kt = p.cand_k[c0 + idx];
#pragma unroll
                    for (int a = 0; a < BT; ++a) {
                        const u32 ti = ti0 + a;
                        const float x = ti < tm ? __ldg(p.na + (u64)ti * tk + kt) : 0.0f;
#pragma unroll
                        for (int b = 0; b < BT; ++b) {
                            const u32 tj = tj0 + b;
                            const float y = tj < tn ? __ldg(p.nbt + (u64)tj * tk + kt) : 0.0f;
                            if (ti < tm && tj < tn && x * y >= p.tau) mask |= 1u << (a * BT + b);
                        }
                    }
                }
                const u32 bal = __ballot_sync(0xffffffffu, mask != 0);
                if (lane == 0) wcnt[warp] = __popc(bal);
                __syncthreads();
                u32 off = base, total = 0;
                for (int w = 0; w < NT / 32; ++w) {
                    const u32 c = wcnt[w];
                    if (w < warp) off += c;
                    total += c;
                }
                if (mask) {
                    const u32 pos = off + __popc(bal & ((1u << lane) - 1));
                    list_k[pos] = kt;
                    list_m[pos] = mask;
                }
                base += total;
                __syncthreads();
            }
            const u32 cnt = base;
            if (cnt == 0) continue;
            const u32 row0 = ti0 * TILE, col0 = tj0 * TILE;
            load_stage<BT, P>(p, row0, col0, list_k[0], SA(0), SB(0));
            cp_async_commit();
            for (u32 i = 0; i < cnt; ++i) {
                const u32 cur = i & 1;
                if (i + 1 < cnt) {
                    load_stage<BT, P>(p, row0, col0, list_k[i + 1], SA(cur ^ 1), SB(cur ^ 1));
                    cp_async_commit();
                    cp_async_wait_1();
                } else {
                    cp_async_wait_0();
                }
                __syncthreads();
                const u32 mask = list_m[i];
                if ((mask >> warp) & 1) {
                    warp_mma<BT, P>(acc, SA(cur), SB(cur), wa * TILE, wb * TILE);
                    ++computed;
                }
                __syncthreads();
            }
        }
        store_tile<P>(p, acc, (ti0 + wa) * TILE, (tj0 + wb) * TILE, computed == 0);
        if (p.valid != nullptr && lane == 0 && computed != 0)
            atomicAdd(p.valid, (u64)computed);
    }
#undef SA
#undef SB
}

#define SPAMM_ENTRY(NAME, BT, P)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * BT * BT, 1) NAME(                                     \
        const void* a, u64 lda, const void* b, u64 ldb, float* c, u64 ldc, u32 m, u32 n, u32 k,    \
        const float* na, const float* nbt, float tau, float alpha, float beta,                     \
        const u32* assign_off, const u32* assign_ids, const u32* cand_off, const u32* cand_k,      \
        u32 flags, u64* valid) {                                                                   \
        Params p = {a,   lda,   b,    ldb,        c,          ldc,      m,      n,     k,  na,     \
                    nbt, tau,   alpha, beta,      assign_off, assign_ids, cand_off, cand_k, flags, \
                    valid};                                                                        \
        spamm_mm<BT, P>(p);                                                                        \
    }

SPAMM_ENTRY(spamm_mm_f32_b64, 2, P_F32)
SPAMM_ENTRY(spamm_mm_tf32_b64, 2, P_TF32)
SPAMM_ENTRY(spamm_mm_3xtf32_b64, 2, P_3XTF32)
SPAMM_ENTRY(spamm_mm_f16_b64, 2, P_F16)
SPAMM_ENTRY(spamm_mm_f32_b128, 4, P_F32)
SPAMM_ENTRY(spamm_mm_tf32_b128, 4, P_TF32)
SPAMM_ENTRY(spamm_mm_3xtf32_b128, 4, P_3XTF32)
SPAMM_ENTRY(spamm_mm_f16_b128, 4, P_F16)

// ---------------------------------------------------------------------------------------------
// Accuracy check: sampled rows of A*B in f64 against the computed C.
//
// A thread block owns ERR_COLS columns of B and all ERR_ROWS rows; warp w owns rows 8w..8w+7, lane L
// columns 2L, 2L+1, 64+2L, 64+2L+1 of the block (32 f64 accumulators). B streams through shared
// memory in stages of ERR_KT k steps, converted to f64 once per element; the next stage is loaded
// into registers while the current one is multiplied, so its latency hides behind the FMAs. A's
// stage sits transposed (k step major) so that a warp reads its 8 values as broadcasts; each warp
// loads its own 8 rows and knows from ballots which k steps have a non-zero among them: the others
// are skipped (the CPU skips each zero of A). A stage with a non-finite B value tests each A value
// instead of the plain fma, so that 0 * inf is skipped as on the CPU and never becomes NaN.
// B is read once per launch.

#define ERR_ROWS 64
#define ERR_COLS 128
#define ERR_KT 16        // k steps per stage: lane L loads k step L % 16 of A
#define ERR_THREADS 256  // 8 warps of 8 rows: the launch's block size
#define ERR_APITCH (ERR_ROWS + 2)  // 16-byte rows: double2 loads
#define ERR_BQ (ERR_KT * ERR_COLS / ERR_THREADS)  // B values per thread and stage

// One stage's values of this thread, from k step t0 on: A rows 8*warp + lane/16 + 2q (q < 4) at k
// step lane % 16, B element i = tid + ERR_THREADS*q (q < ERR_BQ) of the ERR_KT x ERR_COLS panel.
// Zero outside the operands.
__device__ __forceinline__ void err_load(const float* __restrict__ a, const float* __restrict__ b,
                                         u32 rows, u32 n, u32 k, u64 t0, u32 j0, u32 tid,
                                         float (&an)[4], float (&bn)[ERR_BQ]) {
    const u32 lane = tid & 31, warp = tid >> 5;
    const u64 t = t0 + lane % ERR_KT;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const u32 r = warp * 8 + lane / ERR_KT + 2 * q;
        an[q] = (r < rows && t < k) ? __ldg(a + (u64)r * k + t) : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < ERR_BQ; ++q) {
        const u32 i = tid + ERR_THREADS * q;
        const u64 tb = t0 + i / ERR_COLS;
        const u32 j = j0 + i % ERR_COLS;
        bn[q] = (tb < k && j < n) ? __ldg(b + tb * n + j) : 0.0f;
    }
}

template <bool CHECK_ZERO>
__device__ __forceinline__ void err_step(double (&acc)[8][4], const double* __restrict__ arow,
                                         const double* __restrict__ brow, u32 lane) {
    double av[8];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const double2 x = reinterpret_cast<const double2*>(arow)[q];
        av[2 * q] = x.x;
        av[2 * q + 1] = x.y;
    }
    const double2 b0 = reinterpret_cast<const double2*>(brow)[lane];
    const double2 b1 = reinterpret_cast<const double2*>(brow + 64)[lane];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if (CHECK_ZERO && av[r] == 0.0) continue;
        acc[r][0] = fma(av[r], b0.x, acc[r][0]);
        acc[r][1] = fma(av[r], b0.y, acc[r][1]);
        acc[r][2] = fma(av[r], b1.x, acc[r][2]);
        acc[r][3] = fma(av[r], b1.y, acc[r][3]);
    }
}

extern "C" __global__ void __launch_bounds__(ERR_THREADS, 2)
    spamm_error_sums(const float* __restrict__ a, const float* __restrict__ b,
                     const float* __restrict__ c, u32 rows, u32 n, u32 k,
                     double* __restrict__ out) {
    __shared__ __align__(16) double as[ERR_KT][ERR_APITCH];
    __shared__ __align__(16) double bs[ERR_KT][ERR_COLS];
    __shared__ double red[2][8];
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u32 j0 = blockIdx.x * ERR_COLS;
    double acc[8][4];
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[r][q] = 0.0;

    float an[4], bn[ERR_BQ];
    err_load(a, b, rows, n, k, 0, j0, tid, an, bn);
    for (u64 t0 = 0; t0 < k; t0 += ERR_KT) {
        u32 nzm = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            as[lane % ERR_KT][warp * 8 + lane / ERR_KT + 2 * q] = (double)an[q];
            nzm |= __ballot_sync(0xffffffffu, an[q] != 0.0f);
        }
        nzm = (nzm | (nzm >> 16)) & 0xffffu;  // bit tt: a non-zero among the warp's rows at t0 + tt
        int bad = 0;
#pragma unroll
        for (int q = 0; q < ERR_BQ; ++q) {
            const u32 i = tid + ERR_THREADS * q;
            bad |= (__float_as_uint(bn[q]) & 0x7f800000u) == 0x7f800000u;
            bs[i / ERR_COLS][i % ERR_COLS] = (double)bn[q];
        }
        const int any_bad = __syncthreads_or(bad);
        if (t0 + ERR_KT < k) err_load(a, b, rows, n, k, t0 + ERR_KT, j0, tid, an, bn);
        if (any_bad) {
            for (int tt = 0; tt < ERR_KT; ++tt)
                if ((nzm >> tt) & 1) err_step<true>(acc, &as[tt][warp * 8], bs[tt], lane);
        } else {
#pragma unroll 4
            for (int tt = 0; tt < ERR_KT; ++tt)
                if ((nzm >> tt) & 1) err_step<false>(acc, &as[tt][warp * 8], bs[tt], lane);
        }
        __syncthreads();
    }

    double e = 0.0, s = 0.0;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const u32 row = warp * 8 + r;
        if (row >= rows) continue;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const u32 j = j0 + (q < 2 ? 2 * lane + q : 64 + 2 * lane + (q - 2));
            if (j >= n) continue;
            const double ref = acc[r][q];
            const double d = (double)__ldg(c + (u64)row * n + j) - ref;
            e += d * d;
            s += ref * ref;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        e += __shfl_down_sync(0xffffffffu, e, o);
        s += __shfl_down_sync(0xffffffffu, s, o);
    }
    if (lane == 0) {
        red[0][warp] = e;
        red[1][warp] = s;
    }
    __syncthreads();
    if (tid == 0) {
        double te = 0.0, ts = 0.0;
        for (int w = 0; w < 8; ++w) {
            te += red[0][w];
            ts += red[1][w];
        }
        out[2 * (u64)blockIdx.x] = te;
        out[2 * (u64)blockIdx.x + 1] = ts;
    }
}

// ---------------------------------------------------------------------------------------------
// Skipped-product bound (spamm_skipped_squares): for every C tile (i, j) of the norm maps,
// e_ij = sum over k, ascending, of the products na[i,k] * nb[k,j] whose f32 value is < tau (the
// rule of planner::spamm: a product below tau is skipped), each added in f64 (an f32 * f32
// product is exact in f64, so fma and multiply-then-add round alike, as the host's
// NormMaps::skipped_bound adds); out[block] = the block's sum of e_ij^2, which the host adds in
// block order (deterministic). na is tm x tk, nbt (B's map transposed) tn x tk, both row-major
// with pitch tk. tau = +inf sums every finite product: the norm-product bound of ||C||_F squared.
// Block (16, 16) owns SB_EDGE x SB_EDGE C tiles, each thread SB_R x SB_R of them interleaved by 16
// (thread (x, y) has rows y + 16 r and columns x + 16 c: conflict-free shared reads); the k's
// are staged SB_KT at a time, zeros beyond the maps' edges (a zero product adds nothing).

#define SB_R 2
#define SB_EDGE (16 * SB_R)
#define SB_KT 32
#define SB_THREADS 256

extern "C" __global__ void __launch_bounds__(SB_THREADS)
    spamm_skipped_squares(const float* __restrict__ na, const float* __restrict__ nbt, u32 tm,
                          u32 tk, u32 tn, float tau, double* __restrict__ out) {
    __shared__ float as[SB_KT][SB_EDGE + 1];
    __shared__ float bs[SB_KT][SB_EDGE + 1];
    __shared__ double red[SB_THREADS / 32];
    const u32 tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const u32 i0 = blockIdx.y * SB_EDGE, j0 = blockIdx.x * SB_EDGE;
    double e[SB_R][SB_R];
#pragma unroll
    for (int r = 0; r < SB_R; ++r)
#pragma unroll
        for (int c = 0; c < SB_R; ++c) e[r][c] = 0.0;

    for (u32 k0 = 0; k0 < tk; k0 += SB_KT) {
#pragma unroll
        for (int q = 0; q < SB_EDGE * SB_KT / SB_THREADS; ++q) {
            const u32 idx = tid + SB_THREADS * q;
            const u32 row = idx / SB_KT, kk = idx % SB_KT, k = k0 + kk;
            const bool kin = k < tk;
            as[kk][row] = (kin && i0 + row < tm) ? __ldg(na + (u64)(i0 + row) * tk + k) : 0.0f;
            bs[kk][row] = (kin && j0 + row < tn) ? __ldg(nbt + (u64)(j0 + row) * tk + k) : 0.0f;
        }
        __syncthreads();
#pragma unroll 4
        for (int kk = 0; kk < SB_KT; ++kk) {
            float a[SB_R], b[SB_R];
#pragma unroll
            for (int r = 0; r < SB_R; ++r) a[r] = as[kk][ty + 16 * r];
#pragma unroll
            for (int c = 0; c < SB_R; ++c) b[c] = bs[kk][tx + 16 * c];
#pragma unroll
            for (int r = 0; r < SB_R; ++r)
#pragma unroll
                for (int c = 0; c < SB_R; ++c)
                    if (__fmul_rn(a[r], b[c]) < tau)
                        e[r][c] = fma((double)a[r], (double)b[c], e[r][c]);
        }
        __syncthreads();
    }

    double s = 0.0;
#pragma unroll
    for (int r = 0; r < SB_R; ++r)
#pragma unroll
        for (int c = 0; c < SB_R; ++c) s = fma(e[r][c], e[r][c], s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((tid & 31) == 0) red[tid >> 5] = s;
    __syncthreads();
    if (tid == 0) {
        double t = 0.0;
        for (int w = 0; w < SB_THREADS / 32; ++w) t += red[w];
        out[(u64)blockIdx.y * gridDim.x + blockIdx.x] = t;
    }
}
