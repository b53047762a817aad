//! GPU descriptions the planner models against, and an occupancy estimate.

use serde::{Deserialize, Serialize};

/// What the planner needs to know about one GPU. Plain data; [`DeviceSpec::validate`] checks it.
///
/// Units are in the field names' docs. "Measured" presets come from the H200 test machine
/// (ARCHITECTURE.md), the others from NVIDIA datasheets (dense rates, no 2:4 sparsity).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// Short name, e.g. `"h200"`.
    pub name: String,
    /// Where the numbers come from (`"measured"` or `"datasheet"`).
    pub source: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Device-memory bandwidth in GB/s (10⁹ bytes per second): copy-kernel read+write for measured
    /// presets, datasheet peak otherwise.
    pub mem_bandwidth_gbs: f64,
    /// Dense TF32 tensor-core rate in TFLOP/s (10¹² floating-point operations per second).
    pub tf32_tflops: f64,
    /// Dense f32 CUDA-core rate in TFLOP/s.
    pub fp32_tflops: f64,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// Shared memory per SM in bytes (the carve-out maximum).
    pub smem_per_sm_bytes: u32,
    /// Shared memory one thread block may use at most, in bytes.
    pub smem_per_block_max_bytes: u32,
    /// Shared memory the driver reserves per resident thread block, in bytes.
    pub smem_reserved_per_block_bytes: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Maximum resident thread blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Maximum resident threads per SM.
    pub max_threads_per_sm: u32,
}

/// Per-thread-block resources of a kernel, for the occupancy estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    /// Threads per thread block.
    pub threads_per_block: u32,
    /// Registers per thread (as the compiler reports them).
    pub regs_per_thread: u32,
    /// Static + dynamic shared memory per thread block, in bytes.
    pub smem_per_block_bytes: u32,
}

impl KernelResources {
    /// Estimated resources of the Acc-SpMM (BitTCF) kernel at width `n`: one warp per 32 feature
    /// columns (at least 2 warps, for the 64-thread mask decode; at most 32 warps, wider N loops),
    /// 64 registers per thread (2 MMAs' accumulators + the prefetched B fragment + addresses; an
    /// estimate until the real kernel's attributes are read back), shared memory = double-buffered
    /// values (2 × 64 × 4 B) and column ids (2 × 8 × 4 B) + the decoded 8×8 tile (256 B) = 832 B.
    pub fn acc_spmm(n: usize) -> Self {
        let warps = n.div_ceil(32).clamp(2, 32) as u32;
        Self {
            threads_per_block: warps * 32,
            regs_per_thread: 64,
            smem_per_block_bytes: 832,
        }
    }

    /// Estimated resources of the cuTeSpMM (HRPB) kernel: 4 warps (TM = 16, TN = 32 per warp,
    /// 128 columns per thread block), 96 registers per thread, shared memory = one 16×16 block of A
    /// (1 KiB) + 64 B metadata + 16 B rows × 128 columns × 4 B (8 KiB) = 9280 B.
    pub fn cute_spmm() -> Self {
        Self {
            threads_per_block: 128,
            regs_per_thread: 96,
            smem_per_block_bytes: 9280,
        }
    }
}

impl DeviceSpec {
    /// NVIDIA H200 (SXM), numbers measured on the test machine (CUDA 13.0, driver 580): 132 SMs,
    /// 3.9 TB/s float4 copy, 437 TFLOP/s TF32 and 51 TFLOP/s f32 (cuBLAS 8192³), 60 MB L2,
    /// 228 KiB shared memory and 64 Ki registers per SM, 32 resident blocks per SM (Hopper).
    pub fn h200() -> Self {
        Self {
            name: "h200".into(),
            source: "measured".into(),
            sm_count: 132,
            mem_bandwidth_gbs: 3900.0,
            tf32_tflops: 437.0,
            fp32_tflops: 51.0,
            l2_bytes: 60_000_000,
            smem_per_sm_bytes: 228 * 1024,
            smem_per_block_max_bytes: 227 * 1024,
            smem_reserved_per_block_bytes: 1024,
            regs_per_sm: 65536,
            max_blocks_per_sm: 32,
            max_threads_per_sm: 2048,
        }
    }

    /// NVIDIA H100 SXM5 80 GB (datasheet): 132 SMs, 3.35 TB/s HBM3, 494.7 TFLOP/s dense TF32,
    /// 66.9 TFLOP/s f32, 50 MB L2, Hopper SM limits.
    pub fn h100() -> Self {
        Self {
            name: "h100".into(),
            source: "datasheet".into(),
            sm_count: 132,
            mem_bandwidth_gbs: 3350.0,
            tf32_tflops: 494.7,
            fp32_tflops: 66.9,
            l2_bytes: 50 * 1024 * 1024,
            ..Self::h200()
        }
    }

    /// NVIDIA A100 SXM4 80 GB (datasheet): 108 SMs, 2.039 TB/s HBM2e, 156 TFLOP/s dense TF32,
    /// 19.5 TFLOP/s f32, 40 MB L2, 164 KiB shared memory per SM (163 KiB per block), 32 blocks/SM.
    pub fn a100() -> Self {
        Self {
            name: "a100".into(),
            source: "datasheet".into(),
            sm_count: 108,
            mem_bandwidth_gbs: 2039.0,
            tf32_tflops: 156.0,
            fp32_tflops: 19.5,
            l2_bytes: 40 * 1024 * 1024,
            smem_per_sm_bytes: 164 * 1024,
            smem_per_block_max_bytes: 163 * 1024,
            smem_reserved_per_block_bytes: 1024,
            regs_per_sm: 65536,
            max_blocks_per_sm: 32,
            max_threads_per_sm: 2048,
        }
    }

    /// NVIDIA GeForce RTX 4090 (datasheet): 128 SMs, 1.008 TB/s GDDR6X, 82.6 TFLOP/s dense TF32
    /// (f32 accumulate) and f32, 72 MB L2, 100 KiB shared memory per SM (99 KiB per block),
    /// 24 blocks and 1536 threads per SM (Ada).
    pub fn rtx4090() -> Self {
        Self {
            name: "rtx4090".into(),
            source: "datasheet".into(),
            sm_count: 128,
            mem_bandwidth_gbs: 1008.0,
            tf32_tflops: 82.6,
            fp32_tflops: 82.6,
            l2_bytes: 72 * 1024 * 1024,
            smem_per_sm_bytes: 100 * 1024,
            smem_per_block_max_bytes: 99 * 1024,
            smem_reserved_per_block_bytes: 1024,
            regs_per_sm: 65536,
            max_blocks_per_sm: 24,
            max_threads_per_sm: 1536,
        }
    }

    /// A preset by name (`h200`, `h100`, `a100`, `rtx4090`; case-insensitive), or `None`.
    pub fn preset(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "h200" => Some(Self::h200()),
            "h100" => Some(Self::h100()),
            "a100" => Some(Self::a100()),
            "rtx4090" | "4090" => Some(Self::rtx4090()),
            _ => None,
        }
    }

    /// Names accepted by [`DeviceSpec::preset`].
    pub const PRESETS: [&'static str; 4] = ["h200", "h100", "a100", "rtx4090"];

    /// Checks every count and rate is positive and finite.
    pub fn validate(&self) -> Result<(), crate::PlanError> {
        let rates = [self.mem_bandwidth_gbs, self.tf32_tflops, self.fp32_tflops];
        let counts = [
            self.sm_count,
            self.regs_per_sm,
            self.max_blocks_per_sm,
            self.max_threads_per_sm,
        ];
        if rates.iter().any(|r| !r.is_finite() || *r <= 0.0) || counts.contains(&0) {
            return Err(crate::PlanError::InvalidInput(format!(
                "device {:?}: every rate and count must be positive",
                self.name
            )));
        }
        Ok(())
    }

    /// Bandwidth in bytes per second.
    pub fn bytes_per_s(&self) -> f64 {
        self.mem_bandwidth_gbs * 1e9
    }

    /// Thread blocks of a kernel with resources `k` that fit on one SM at once: the minimum of the
    /// block limit, the thread limit, the register limit (registers allocated per warp in units of
    /// 256) and the shared-memory limit (plus the driver's per-block reservation). 0 if one block
    /// does not fit at all.
    pub fn resident_blocks(&self, k: &KernelResources) -> u32 {
        if k.threads_per_block == 0 || k.smem_per_block_bytes > self.smem_per_block_max_bytes {
            return 0;
        }
        let warps = k.threads_per_block.div_ceil(32);
        let regs_per_warp = (k.regs_per_thread.max(1) * 32).div_ceil(256) * 256;
        let by_regs = self.regs_per_sm / (warps * regs_per_warp);
        let by_threads = self.max_threads_per_sm / k.threads_per_block;
        let smem = k.smem_per_block_bytes + self.smem_reserved_per_block_bytes;
        let by_smem = self.smem_per_sm_bytes / smem.max(1);
        self.max_blocks_per_sm
            .min(by_regs)
            .min(by_threads)
            .min(by_smem)
    }

    /// Thread blocks resident on the whole device at once (SMs × resident per SM, at least 1).
    pub fn concurrent_blocks(&self, k: &KernelResources) -> u64 {
        (self.sm_count as u64 * self.resident_blocks(k) as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_named() {
        for name in DeviceSpec::PRESETS {
            let d = DeviceSpec::preset(name).expect("preset");
            assert_eq!(d.name, name);
            d.validate().expect("valid");
        }
        assert!(DeviceSpec::preset("v100").is_none());
    }

    #[test]
    fn occupancy_by_hand() {
        let h = DeviceSpec::h200();
        // 128 threads × 64 regs = 4 warps × 2048 regs = 8192 regs → 8 blocks by registers.
        assert_eq!(h.resident_blocks(&KernelResources::acc_spmm(128)), 8);
        // 64 threads (N = 32 still uses 2 warps): 65536 / 4096 = 16 blocks.
        assert_eq!(h.resident_blocks(&KernelResources::acc_spmm(32)), 16);
        // 512 threads: 2048 / 512 = 4 by threads, 65536 / (16 × 2048) = 2 by registers.
        assert_eq!(h.resident_blocks(&KernelResources::acc_spmm(512)), 2);
        // cuTe: 4 warps × 96 × 32 = 12288 regs → 5 by registers; smem 10304 B → 22.
        assert_eq!(h.resident_blocks(&KernelResources::cute_spmm()), 5);
        // Shared memory bound: 100 KiB per block → 2 blocks on Hopper, 0 on a 4090.
        let big = KernelResources {
            threads_per_block: 32,
            regs_per_thread: 32,
            smem_per_block_bytes: 100 * 1024,
        };
        assert_eq!(h.resident_blocks(&big), 2);
        assert_eq!(DeviceSpec::rtx4090().resident_blocks(&big), 0);
        assert_eq!(h.concurrent_blocks(&big), 264);
    }
}
