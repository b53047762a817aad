// Dense-tile row-tile kernels on a TMA pipeline (sm_90): tc16d_tma_spmm_tf32 / tc32d_tma_spmm_tf32.
// Layout, work list, MMAs and stores are those of tc16d / tc32d (row_tile_spmm.cu); what differs is
// how the bytes reach the MMAs. A thread block is W consumer warps (32 features each, the feature
// tile blockIdx.y of FT = 32 W features) and one producer warp (the last). The producer walks the
// thread block's blocks and, per block, waits until a shared-memory stage is free, then lanes 0-7
// each issue one bulk copy (cp.async.bulk, the TMA engine's non-tensor copy) of one gathered B row's
// features of this tile into the stage, lane 8 one of the block's fragment-order tile (512 MT bytes),
// and lane 0 arms the stage's "full" mbarrier with the bytes to expect. Consumers wait on "full",
// read their B values and fragments from shared memory, release the stage (one arrive per warp on
// its "empty" mbarrier) and run the block's MMAs. The S stages hold up to S blocks in flight per
// thread block (S = 2..8, from the dynamic shared memory the host gives), where the register
// pipeline of tc16d holds one per warp.
//
// Stage s: 8 B rows of FT + TMA_ROW_PAD floats (row slot l = block column l; the pad makes the
// float4 reads of a warp conflict-free: lane (g, t) reads row t at word 4g of its warp's 32 features,
// and (FT + 8) = 8 mod 32 words puts the 8 lanes of a quarter warp on 8 distinct 4-word groups), then
// the fragment tile. After the stages: S "full" and S "empty" mbarriers (u64) and S valid masks
// (u32: bit l set when block column l is a column, clear for the sentinel, whose row is not copied
// and reads as zero).
//
// The bulk copies need flag bit 0 (ldb a multiple of 4, B 16-byte aligned) and N a multiple of 4,
// so that every copied row starts 16-byte aligned and is a multiple of 16 bytes long; without them
// the producer copies through registers (correct, slower). The host gives dynamic shared memory for
// at least 2 stages (RowTileDevice).

#define TMA_ROW_PAD 8u

#include "async_copy.cuh"

template <int MT>
__device__ __forceinline__ void row_tile_dense_tma_spmm(ROW_TILE_DENSE_PARAMS) {
    extern __shared__ __align__(128) unsigned char tma_smem[];
    const u32 consumers = blockDim.x / 32 - 1;
    const u32 ft = 32 * consumers;  // features per tile
    const u32 tile_f0 = blockIdx.y * ft;
    if (tile_f0 >= N) return;  // uniform over the thread block, before any barrier
    const u32 tile_n = min(ft, N - tile_f0);
    const u32 active = (tile_n + 31) / 32;  // consumer warps with features
    const u32 row_floats = ft + TMA_ROW_PAD;
    const u32 b_bytes = 8 * row_floats * 4;
    const u32 stage_bytes = b_bytes + 512 * MT;
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    const u32 stages = dyn / (stage_bytes + 20);
    u64* full = reinterpret_cast<u64*>(tma_smem + stages * stage_bytes);
    u64* empty = full + stages;
    u32* valid = reinterpret_cast<u32*>(empty + stages);
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (u32 s = 0; s < stages; ++s) {
            mbar_init(full + s, 1);
            mbar_init(empty + s, active);
        }
        mbar_init_fence();
    }
    __syncthreads();

    const RowTileWork wk = row_tile_work(work);
    if (wk.wb >= wk.we) return;
    const u32 bb = wk.bb, be = wk.be;

    if (warp == consumers) {
        // Producer warp: one block per stage, in block order. Without the bulk copies'
        // alignment (flag bit 0 clear or N not a multiple of 4: uniform over the launch) the warp
        // copies with loads and stores instead and arrives without a byte count.
        const bool bulk = (flags & 1u) && N % 4u == 0u;
        const u32 row_bytes = 4 * tile_n;
        // Column ids four blocks at a time (lane l: column l % 8 of block base + l / 8, one
        // 128-byte load), two groups ahead: a group's load has the issue of the four blocks
        // before it to land, so the producer does not wait on a load to arm a stage.
        auto group_cols = [&](u32 base) -> u32 {
            return base + lane / 8 < be ? __ldg(a2x + 8ull * base + lane) : SENTINEL;
        };
        u32 cols = group_cols(bb), next = group_cols(bb + 4);
#pragma unroll 1
        for (u32 blk = bb; blk < be; ++blk) {
            const u32 i = blk - bb, s = i % stages, j = i % 4;
            const u32 c = __shfl_sync(0xffffffffu, cols, 8 * j + (lane & 7));
            if (j == 3) {
                cols = next;
                next = group_cols(blk + 5);
            }
            const u32 col = lane < 8 ? c : SENTINEL;
            mbar_wait(empty + s, ((i / stages) & 1u) ^ 1u);
            const u32 ok = __ballot_sync(0xffffffffu, col != SENTINEL);
            unsigned char* st = tma_smem + s * stage_bytes;
            if (bulk) {
                if (lane == 0) {
                    valid[s] = ok;
                    mbar_arrive_expect_tx(full + s, __popc(ok) * row_bytes + 512u * MT);
                }
                __syncwarp();
                if (col != SENTINEL) {
                    bulk_g2s(st + lane * row_floats * 4,
                                        B + (u64)col * ldb + tile_f0, row_bytes, full + s);
                }
                if (lane == 8) {
                    bulk_g2s(st + b_bytes, frag + (u64)blk * (32 * MT), 512u * MT,
                                        full + s);
                }
            } else {
                float* rows = reinterpret_cast<float*>(st);
#pragma unroll 1
                for (u32 r = 0; r < 8; ++r) {
                    const u32 c = __shfl_sync(0xffffffffu, col, r);
                    if (c == SENTINEL) continue;
                    const float* src = B + (u64)c * ldb + tile_f0;
                    for (u32 f = lane; f < tile_n; f += 32) rows[r * row_floats + f] = __ldg(src + f);
                }
                const float* tile = reinterpret_cast<const float*>(frag + (u64)blk * (32 * MT));
                float* dst = reinterpret_cast<float*>(st + b_bytes);
                for (u32 k = lane; k < 128u * MT; k += 32) dst[k] = __ldg(tile + k);
                if (lane == 0) valid[s] = ok;
                __syncwarp();
                if (lane == 0) mbar_arrive(full + s);
            }
        }
        return;
    }
    if (warp >= active) return;  // no features; not counted by the "empty" barriers

    const u32 g = lane >> 2, t = lane & 3;
    const u32 f0 = tile_f0 + 32 * warp;
    const u32 fl = f0 + 4 * g;
    bool qok[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) qok[q] = fl + q < N;
    const u32 b_lo = t * row_floats + 32 * warp + 4 * g;  // float offset of row t, this lane
    const u32 b_hi = b_lo + 4 * row_floats;               // row t + 4
    u32 i = 0;

    auto step = [&](float (&acc)[MT][4][4], u32) {
        const u32 s = i % stages;
        mbar_wait(full + s, (i / stages) & 1u);
        ++i;
        const unsigned char* st = tma_smem + s * stage_bytes;
        const float* rows = reinterpret_cast<const float*>(st);
        const u32 ok = valid[s];
        const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const float4 lo = ((ok >> t) & 1u) ? *reinterpret_cast<const float4*>(rows + b_lo) : zero4;
        const float4 hi =
            ((ok >> (t + 4)) & 1u) ? *reinterpret_cast<const float4*>(rows + b_hi) : zero4;
        const float4* fr = reinterpret_cast<const float4*>(st + b_bytes) + lane * MT;
        u32 a[MT][4];
#pragma unroll
        for (int r = 0; r < MT; ++r) {
            const float4 v = fr[r];
            a[r][0] = __float_as_uint(v.x);
            a[r][1] = __float_as_uint(v.y);
            a[r][2] = __float_as_uint(v.z);
            a[r][3] = __float_as_uint(v.w);
        }
        // Features >= N were never copied into this tile's rows: zero, not stale.
        const float blo[4] = {qok[0] ? lo.x : 0.0f, qok[1] ? lo.y : 0.0f, qok[2] ? lo.z : 0.0f,
                              qok[3] ? lo.w : 0.0f};
        const float bhi[4] = {qok[0] ? hi.x : 0.0f, qok[1] ? hi.y : 0.0f, qok[2] ? hi.z : 0.0f,
                              qok[3] ? hi.w : 0.0f};
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + s);
        mma_row_tiles<MT>(acc, a, blo, bhi);
    };
    walk_row_tile_windows<MT>(rwo, wk, step, window_split, C, ldc, M, N, g, t, f0, alpha, beta,
                              flags, NO_SPLIT_SCRATCH);
}

// The TMA entries: at most MAX_WARPS consumer warps and the producer warp per thread block.
ROW_TILE_DENSE_ENTRY_OF(tc16d_tma_spmm_tf32, 32 * (MAX_WARPS + 1), 3, row_tile_dense_tma_spmm<1>)
ROW_TILE_DENSE_ENTRY_OF(tc32d_tma_spmm_tf32, 32 * (MAX_WARPS + 1), 2, row_tile_dense_tma_spmm<2>)
