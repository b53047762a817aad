// Row permutation of a dense row-major matrix on the device (f32: permute_rows_f32; any 16-bit
// type, f16 or bf16, moved as its bits: permute_rows_u16), for products whose B and C stay in
// the caller's (original) row order while the prepared matrix is reordered:
//   scatter == 0 (gather):  dst[i][f] = src[idx[i]][f]
//   scatter == 1 (scatter): dst[idx[i]][f] = src[i][f]
// for i < rows and f < n; src and dst have leading dimensions lds and ldd (elements). idx is a
// permutation of 0..rows (validated on the host, crates/gpu/src/permute.rs), so a scatter writes
// every destination row once. Grid-stride over rows (blockIdx.x) and features (threadIdx.x).

typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" __global__ void permute_rows_f32(const u32* __restrict__ idx, u32 rows,
                                            const float* __restrict__ src, u32 lds,
                                            float* __restrict__ dst, u32 ldd, u32 n, u32 scatter) {
    for (u32 i = blockIdx.x; i < rows; i += gridDim.x) {
        const u64 r = idx[i];
        const float* s = src + (scatter ? (u64)i : r) * lds;
        float* d = dst + (scatter ? r : (u64)i) * ldd;
        for (u32 f = threadIdx.x; f < n; f += blockDim.x) d[f] = s[f];
    }
}

extern "C" __global__ void permute_rows_u16(const u32* __restrict__ idx, u32 rows,
                                            const unsigned short* __restrict__ src, u32 lds,
                                            unsigned short* __restrict__ dst, u32 ldd, u32 n,
                                            u32 scatter) {
    for (u32 i = blockIdx.x; i < rows; i += gridDim.x) {
        const u64 r = idx[i];
        const unsigned short* s = src + (scatter ? (u64)i : r) * lds;
        unsigned short* d = dst + (scatter ? r : (u64)i) * ldd;
        for (u32 f = threadIdx.x; f < n; f += blockDim.x) d[f] = s[f];
    }
}
