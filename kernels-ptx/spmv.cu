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
// The kernels, by concept (each header relies on what is included before it):
//   spmv_mma.cuh      the tensor-core kernels (f16 m16n8k16 / TF32), the x16 conversion, spmv_fixup
//   spmv_walk.cuh     what the CUDA-core walks share (split rows, row store, cursor) and `core`
//   spmv_tilerow.cuh  one-RHS walks per tile-row: `corew`, `lane`, `blocklane`, `blockw`
//   spmv_staged.cuh   the one-RHS `staged` walk (cp.async stages)
//   spmv_setbit.cuh   set-bit walks for 1..8 RHS: `bits`, `seg`, `bitsw`, `segw`, `blockbw`
//   spmv_tc.cuh       the `tc` walk for 1..8 RHS on tensor cores
//   spmv_csr.cuh      the CSR walks for 2..8 RHS and spmv_csr_fixup
// and, at the end of this file, the entries of the walks for N right-hand sides per module.

// Modules. This file compiled alone is spmv.ptx (SPMV_MODULE_N = 1): the MMA kernels, the x
// conversion, the fix-up and every walk for one right-hand side. kernels-ptx/spmv_n<N>.cu (N = 2..8)
// defines SPMV_MODULE_N = N and includes this file: spmv_n<N>.ptx holds only the walks for N
// right-hand sides, so the driver compiles (PTX JIT, ~3 s per MB on an H200 when its cache is cold)
// only the modules a call uses (crates/gpu: KernelModule::spmv_for_rhs).
#ifndef SPMV_MODULE_N
#define SPMV_MODULE_N 1
#endif

// Types, the TF32 / f16 conversions and the m16n8k8 TF32 MMA step shared with the SpMM kernels.
#include "tc_common.cuh"

#define FULL_MASK 0xffffffffu
#define SPLIT_BIT 0x80000000u
#ifndef SPMV_WARPS
#define SPMV_WARPS 8
#endif

// Popcount of the bits of (lo, hi) below position p (0..63).
__device__ __forceinline__ u32 rank_below(u32 lo, u32 hi, u32 p) {
    if (p < 32) return __popc(lo & ((1u << p) - 1u));
    return __popc(lo) + __popc(hi & ((1u << (p - 32)) - 1u));
}

__device__ __forceinline__ u32 bit_at(u32 lo, u32 hi, u32 p) {
    return ((p < 32 ? lo : hi) >> (p & 31)) & 1u;
}

#include "spmv_mma.cuh"
#include "spmv_walk.cuh"
#include "spmv_tilerow.cuh"
#include "spmv_staged.cuh"
#include "spmv_setbit.cuh"
#include "spmv_tc.cuh"
#include "spmv_csr.cuh"

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
