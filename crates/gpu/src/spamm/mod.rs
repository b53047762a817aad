//! cuSpAMM on the GPU (`kernels-ptx/spamm.cu`): norm maps of 32 × 32 tiles and the norm-gated
//! dense product `C = α·Ã·B + β·C`, where only tile products with `normA(i,k)·normB(k,j) ≥ τ`
//! (f32 product, ≥ everywhere, as `formats::normmap::spamm_cpu` and `planner::spamm`) are computed.
//! A (`m × k`), B (`k × n`) and C (`m × n`) are dense row-major with leading dimensions k, n, n.
//!
//! [`SpammOperands`] holds A and B on one device (f32, or f16 converted there for
//! [`SpammPrecision::F16`]) and their norm maps (A's `tm × tk`, B's transposed `tn × tk`).
//! [`SpammKernel`] is one product kernel with its strided block assignment (balance `s`).
//! [`error_sums`] is the sampled accuracy check of a product against an f64 reference, on the
//! device that holds B; [`DeviceBound`] the skipped-product bound of the operands' norm maps, on
//! their device, for the τ choice.
//! Choosing τ ([`choose_tau`]) and the products over several devices (C's rows split as
//! `planner::split::spamm_block_rows` says) are orchestrated by the facade
//! (`tcsparse::spamm`) and, one rank per GPU, by [`crate::distributed::spamm`].

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg, sys};
use tcsparse_planner::spamm::strided_assignment;

use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

mod bound;
mod check;
mod tau;

pub use bound::DeviceBound;
pub use check::{ERROR_ROWS, ErrorSums, error_sums};
pub use tau::{
    SkippedBound, SpammConfig, SpammRun, TauTarget, choose_tau, choose_tau_with, norm_maps,
    rel_bound, spamm_block_rows,
};

/// Norm tile edge (LoNum).
pub const TILE: usize = 32;

/// Arithmetic of the tile products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpammPrecision {
    /// f32 FMA on CUDA cores (cuSpAMM's FP32 path).
    F32,
    /// TF32 tensor cores (operands rounded to TF32), f32 accumulation.
    Tf32,
    /// Split TF32 (a = a_hi + a_lo, three products): f32-level accuracy on tensor cores.
    Tf32x3,
    /// f16 operands on tensor cores, f32 accumulation (cuSpAMM's FP16 path); norms from f32
    /// squares of the f16 values.
    F16,
}

impl SpammPrecision {
    /// Every precision.
    pub const ALL: [SpammPrecision; 4] = [Self::F32, Self::Tf32, Self::Tf32x3, Self::F16];

    /// Bound on the relative Frobenius error of the arithmetic itself (all tiles valid), which
    /// comes on top of the skipped-product bound: f32 and 3×TF32 round like f32 (1e-5 over the
    /// sizes tested), TF32 and f16 operands carry 10–11 mantissa bits (4e-3).
    pub fn rounding_bound(self) -> f64 {
        match self {
            Self::F32 | Self::Tf32x3 => 1e-5,
            Self::Tf32 | Self::F16 => 4e-3,
        }
    }

    /// Short name (`f32`, `tf32`, `3xtf32`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Tf32 => "tf32",
            Self::Tf32x3 => "3xtf32",
            Self::F16 => "f16",
        }
    }

    /// Parses [`SpammPrecision::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Bytes of one operand element on the device.
    pub fn element_bytes(self) -> usize {
        if self == Self::F16 { 2 } else { 4 }
    }
}

/// C block one thread block computes per step: 64 × 64 (2 × 2 norm tiles, 4 warps) or
/// 128 × 128 (4 × 4 tiles, 16 warps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpammBlock {
    /// 64 × 64.
    B64,
    /// 128 × 128.
    B128,
}

impl SpammBlock {
    /// Norm tiles per block edge.
    pub fn tiles(self) -> usize {
        match self {
            Self::B64 => 2,
            Self::B128 => 4,
        }
    }
    /// Threads per block (one warp per norm tile).
    pub fn threads(self) -> u32 {
        32 * (self.tiles() * self.tiles()) as u32
    }
}

/// Kernel entry of a product.
pub fn mm_entry(p: SpammPrecision, b: SpammBlock) -> &'static str {
    use SpammBlock::*;
    use SpammPrecision::*;
    match (p, b) {
        (F32, B64) => "spamm_mm_f32_b64",
        (Tf32, B64) => "spamm_mm_tf32_b64",
        (Tf32x3, B64) => "spamm_mm_3xtf32_b64",
        (F16, B64) => "spamm_mm_f16_b64",
        (F32, B128) => "spamm_mm_f32_b128",
        (Tf32, B128) => "spamm_mm_tf32_b128",
        (Tf32x3, B128) => "spamm_mm_3xtf32_b128",
        (F16, B128) => "spamm_mm_f16_b128",
    }
}

/// Dynamic shared memory of a product kernel (mirrors `Layout` in spamm.cu).
pub fn mm_shared_bytes(p: SpammPrecision, b: SpammBlock) -> u32 {
    let bt = b.tiles();
    let (apitch, bpitch) = if p == SpammPrecision::F16 {
        (TILE + 8, bt * TILE + 8)
    } else {
        (TILE + 4, bt * TILE + 8)
    };
    let stage = (bt * TILE * apitch + TILE * bpitch) * p.element_bytes();
    (2 * stage + 2 * 512 * 4 + 32 * 4) as u32
}

const MM_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // A
    ParamKind::U64, // lda
    ParamKind::Ptr, // B
    ParamKind::U64, // ldb
    ParamKind::Ptr, // C
    ParamKind::U64, // ldc
    ParamKind::U32, // m
    ParamKind::U32, // n
    ParamKind::U32, // k
    ParamKind::Ptr, // normA (tm × tk)
    ParamKind::Ptr, // normBᵀ (tn × tk)
    ParamKind::F32, // tau
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::Ptr, // assignment offsets
    ParamKind::Ptr, // assignment block ids
    ParamKind::Ptr, // candidate offsets per block row
    ParamKind::Ptr, // candidate k tiles
    ParamKind::U32, // flags
    ParamKind::Ptr, // valid counter (u64) or null
];
const NORM_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr,
    ParamKind::U32,
    ParamKind::U32,
    ParamKind::U64,
    ParamKind::Ptr,
    ParamKind::U32,
];

macro_rules! mm_sig {
    ($name:expr) => {
        KernelSignature {
            module: KernelModule::Spamm,
            name: $name,
            params: MM_PARAMS,
        }
    };
}

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[
    KernelSignature {
        module: KernelModule::Spamm,
        name: "spamm_norms_f32",
        params: NORM_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spamm,
        name: "spamm_norms_f16",
        params: NORM_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spamm,
        name: "spamm_f32_to_f16",
        params: &[ParamKind::Ptr, ParamKind::Ptr, ParamKind::U64],
    },
    mm_sig!("spamm_mm_f32_b64"),
    mm_sig!("spamm_mm_tf32_b64"),
    mm_sig!("spamm_mm_3xtf32_b64"),
    mm_sig!("spamm_mm_f16_b64"),
    mm_sig!("spamm_mm_f32_b128"),
    mm_sig!("spamm_mm_tf32_b128"),
    mm_sig!("spamm_mm_3xtf32_b128"),
    mm_sig!("spamm_mm_f16_b128"),
    check::ERROR_SIGNATURE,
    bound::BOUND_SIGNATURE,
];

fn to_u32(x: usize, what: &str) -> Result<u32, GpuError> {
    u32::try_from(x).map_err(|_| GpuError::Invalid(format!("{what} = {x} exceeds u32")))
}

/// An operand on the device, in the precision the product reads.
pub enum DeviceOperand {
    /// f32 values.
    F32(CudaSlice<f32>),
    /// IEEE f16 values as raw bits.
    F16(CudaSlice<u16>),
}

impl DeviceOperand {
    fn len(&self) -> usize {
        match self {
            Self::F32(x) => x.len(),
            Self::F16(x) => x.len(),
        }
    }
}

/// A and B on one device with their norm maps.
pub struct SpammOperands {
    gpu: Gpu,
    m: usize,
    n: usize,
    k: usize,
    precision: SpammPrecision,
    a: DeviceOperand,
    b: DeviceOperand,
    /// A's norm map, `tm × tk` row-major.
    na: CudaSlice<f32>,
    /// B's norm map transposed, `tn × tk` row-major.
    nbt: CudaSlice<f32>,
}

impl_debug!(SpammOperands, |s| m: s.m, n: s.n, k: s.k, precision: s.precision);

impl SpammOperands {
    /// Uploads row-major A (`m × k`) and B (`k × n`) and computes their norm maps.
    pub fn upload(
        gpu: &Gpu,
        a: &[f32],
        b: &[f32],
        m: usize,
        n: usize,
        k: usize,
        precision: SpammPrecision,
    ) -> Result<Self, GpuError> {
        check_shape(a.len(), b.len(), m, n, k)?;
        let da = gpu.upload(nonempty(a))?;
        let db = gpu.upload(nonempty(b))?;
        Self::from_device(gpu, da, db, m, n, k, precision)
    }

    /// Takes A and B already on the device (f32; converted there to f16 for
    /// [`SpammPrecision::F16`]) and computes their norm maps.
    pub fn from_device(
        gpu: &Gpu,
        a: CudaSlice<f32>,
        b: CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
        precision: SpammPrecision,
    ) -> Result<Self, GpuError> {
        check_shape(a.len(), b.len(), m, n, k)?;
        let (a, b) = if precision == SpammPrecision::F16 {
            (
                DeviceOperand::F16(to_f16(gpu, &a)?),
                DeviceOperand::F16(to_f16(gpu, &b)?),
            )
        } else {
            (DeviceOperand::F32(a), DeviceOperand::F32(b))
        };
        let (tm, tk, tn) = (m.div_ceil(TILE), k.div_ceil(TILE), n.div_ceil(TILE));
        let mut ops = Self {
            gpu: gpu.clone(),
            m,
            n,
            k,
            precision,
            a,
            b,
            na: gpu.alloc_zeros((tm * tk).max(1))?,
            nbt: gpu.alloc_zeros((tn * tk).max(1))?,
        };
        ops.compute_norms()?;
        Ok(ops)
    }

    /// (m, n, k).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.m, self.n, self.k)
    }

    /// (tm, tk, tn): tile counts.
    pub fn tiles(&self) -> (usize, usize, usize) {
        (
            self.m.div_ceil(TILE),
            self.k.div_ceil(TILE),
            self.n.div_ceil(TILE),
        )
    }

    /// Precision of the operands.
    pub fn precision(&self) -> SpammPrecision {
        self.precision
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// B as the f32 values it was given (`k × n` row-major), or `None` where the device holds
    /// it converted ([`SpammPrecision::F16`]).
    pub fn b_f32(&self) -> Option<&CudaSlice<f32>> {
        match &self.b {
            DeviceOperand::F32(b) => Some(b),
            DeviceOperand::F16(_) => None,
        }
    }

    /// (Re)computes both norm maps on the device (queued on the stream).
    pub fn compute_norms(&mut self) -> Result<(), GpuError> {
        if self.m == 0 || self.n == 0 || self.k == 0 {
            return Ok(());
        }
        launch_norms(&self.gpu, &self.a, self.m, self.k, &mut self.na, false)?;
        launch_norms(&self.gpu, &self.b, self.k, self.n, &mut self.nbt, true)
    }

    /// Downloads the norm maps: A's (`tm × tk`) and B's (`tk × tn`), both row-major.
    pub fn norms_host(&self) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        let (tm, tk, tn) = self.tiles();
        let mut na = self.gpu.download(&self.na)?;
        na.truncate(tm * tk);
        let nbt = self.gpu.download(&self.nbt)?;
        let mut nb = vec![0f32; tk * tn];
        for j in 0..tn {
            for t in 0..tk {
                nb[t * tn + j] = nbt[j * tk + t];
            }
        }
        Ok((na, nb))
    }
}

fn nonempty(x: &[f32]) -> &[f32] {
    if x.is_empty() { &[0.0] } else { x }
}

fn check_shape(alen: usize, blen: usize, m: usize, n: usize, k: usize) -> Result<(), GpuError> {
    to_u32(m, "m")?;
    to_u32(n, "n")?;
    to_u32(k, "k")?;
    let (ma, mb) = (
        m.checked_mul(k)
            .ok_or_else(|| GpuError::Invalid("m·k overflows".into()))?,
        k.checked_mul(n)
            .ok_or_else(|| GpuError::Invalid("k·n overflows".into()))?,
    );
    if alen < ma || blen < mb {
        return Err(GpuError::Invalid(format!(
            "SpAMM {m}×{k} · {k}×{n}: A, B need {ma}, {mb} elements, got {alen}, {blen}"
        )));
    }
    Ok(())
}

/// Converts an f32 device buffer to f16 (round to nearest; beyond ±65504 gives ±inf).
pub fn to_f16(gpu: &Gpu, x: &CudaSlice<f32>) -> Result<CudaSlice<u16>, GpuError> {
    let mut y = gpu.alloc_zeros::<u16>(x.len().max(1))?;
    let f = gpu.function(KernelModule::Spamm, "spamm_f32_to_f16")?;
    let len = x.len() as u64;
    let blocks = x.len().div_ceil(256).clamp(1, 65535 * 8) as u32;
    let mut l = gpu.stream().launch_builder(&f);
    l.arg(x).arg(&mut y).arg(&len);
    // SAFETY: x has `len` f32, y has ≥ len u16; the kernel strides over [0, len) only.
    unsafe {
        l.launch(LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        })
    }?;
    Ok(y)
}

fn launch_norms(
    gpu: &Gpu,
    x: &DeviceOperand,
    rows: usize,
    cols: usize,
    out: &mut CudaSlice<f32>,
    transpose: bool,
) -> Result<(), GpuError> {
    let (tr, tc) = (rows.div_ceil(TILE), cols.div_ceil(TILE));
    if out.len() < tr * tc || x.len() < rows * cols {
        return Err(GpuError::Invalid("norm map buffers too short".into()));
    }
    let name = match x {
        DeviceOperand::F32(_) => "spamm_norms_f32",
        DeviceOperand::F16(_) => "spamm_norms_f16",
    };
    let f = gpu.function(KernelModule::Spamm, name)?;
    let (r32, c32, ld, tr32) = (
        to_u32(rows, "rows")?,
        to_u32(cols, "cols")?,
        cols as u64,
        transpose as u32,
    );
    let cfg = LaunchConfig {
        grid_dim: (
            to_u32(tc.div_ceil(8), "tile columns")?,
            tr.min(65535) as u32,
            1,
        ),
        block_dim: (32, 8, 1),
        shared_mem_bytes: 0,
    };
    let mut l = gpu.stream().launch_builder(&f);
    match x {
        DeviceOperand::F32(a) => l.arg(a),
        DeviceOperand::F16(a) => l.arg(a),
    };
    l.arg(&r32).arg(&c32).arg(&ld).arg(&mut *out).arg(&tr32);
    // SAFETY: x holds rows·cols elements with leading dimension cols, out holds tr·tc floats
    // (both checked above); the kernel reads rows < rows, columns < cols and writes tile ids
    // < tr·tc (strided over tile rows beyond gridDim.y).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Candidate k tiles per C block row at threshold τ: k is a candidate of block row `bi` iff
/// `max_{i ∈ bi} normA(i,k) · max_j normB(k,j) ≥ τ`, a superset of every k with a valid product
/// in that row (f32 products of non-negative numbers are monotone). The kernel tests only these.
/// Returns CSR offsets (block rows + 1) and the k tiles.
pub fn block_row_candidates(
    na: &[f32],
    nb: &[f32],
    tiles: (usize, usize, usize),
    block: SpammBlock,
    tau: f32,
) -> Result<(Vec<u32>, Vec<u32>), GpuError> {
    let (tm, tk, tn) = tiles;
    if na.len() < tm * tk || nb.len() < tk * tn {
        return Err(GpuError::Invalid(
            "norm maps shorter than their tile counts".into(),
        ));
    }
    let bmax: Vec<f32> = (0..tk)
        .map(|k| {
            nb[k * tn..(k + 1) * tn]
                .iter()
                .copied()
                .fold(0f32, f32::max)
        })
        .collect();
    let bt = block.tiles();
    let mut off = vec![0u32];
    let mut ks = Vec::new();
    for bi in 0..tm.div_ceil(bt) {
        for (k, &bm) in bmax.iter().enumerate() {
            let amax = (bi * bt..((bi + 1) * bt).min(tm))
                .map(|i| na[i * tk + k])
                .fold(0f32, f32::max);
            if amax * bm >= tau {
                ks.push(k as u32);
            }
        }
        off.push(to_u32(ks.len(), "candidates")?);
    }
    Ok((off, ks))
}

/// τ and its candidate lists on the device, for one pair of norm maps and one block size.
pub struct SpammSchedule {
    tau: f32,
    block: SpammBlock,
    candidates: usize,
    offsets: CudaSlice<u32>,
    ks: CudaSlice<u32>,
}

impl_debug!(SpammSchedule, |s| tau: s.tau, block: s.block, candidates: s.candidates);

impl SpammSchedule {
    /// Builds ([`block_row_candidates`]) and uploads the schedule of threshold τ.
    pub fn new(
        gpu: &Gpu,
        na: &[f32],
        nb: &[f32],
        tiles: (usize, usize, usize),
        block: SpammBlock,
        tau: f32,
    ) -> Result<Self, GpuError> {
        if tau.is_nan() {
            return Err(GpuError::Invalid("τ is NaN".into()));
        }
        let (off, ks) = block_row_candidates(na, nb, tiles, block, tau)?;
        Ok(Self {
            tau,
            block,
            candidates: ks.len(),
            offsets: gpu.upload(&off)?,
            ks: gpu.upload(if ks.is_empty() { &[0u32][..] } else { &ks })?,
        })
    }

    /// Threshold.
    pub fn tau(&self) -> f32 {
        self.tau
    }

    /// Total candidate (block row, k tile) pairs.
    pub fn candidates(&self) -> usize {
        self.candidates
    }
}

/// A product kernel with its uploaded strided assignment for one C shape.
pub struct SpammKernel {
    precision: SpammPrecision,
    block: SpammBlock,
    s: usize,
    m: usize,
    n: usize,
    func: CudaFunction,
    shared: u32,
    blocks: usize,
    offsets: CudaSlice<u32>,
    ids: CudaSlice<u32>,
}

impl_debug!(SpammKernel, |k|
    precision: k.precision, block: k.block, s: k.s, thread_blocks: k.blocks);

impl SpammKernel {
    /// Loads the kernel and uploads the strided assignment (balance `s ≥ 1`) of the
    /// ⌈m/B⌉ × ⌈n/B⌉ C blocks of edge B.
    pub fn new(
        gpu: &Gpu,
        m: usize,
        n: usize,
        precision: SpammPrecision,
        block: SpammBlock,
        s: usize,
    ) -> Result<Self, GpuError> {
        let edge = block.tiles() * TILE;
        let (bm, bn) = (m.div_ceil(edge), n.div_ceil(edge));
        let asg = strided_assignment(bm, bn, s.max(1))
            .map_err(|e| GpuError::Invalid(format!("strided assignment: {e}")))?;
        let func = gpu.function(KernelModule::Spamm, mm_entry(precision, block))?;
        let shared = mm_shared_bytes(precision, block);
        if shared > 48 * 1024 {
            func.set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            )?;
        }
        let ids = if asg.tiles.is_empty() {
            vec![0]
        } else {
            asg.tiles.clone()
        };
        Ok(Self {
            precision,
            block,
            s: s.max(1),
            m,
            n,
            func,
            shared,
            blocks: asg.num_blocks(),
            offsets: gpu.upload(&asg.offsets)?,
            ids: gpu.upload(&ids)?,
        })
    }

    /// Precision.
    pub fn precision(&self) -> SpammPrecision {
        self.precision
    }
    /// Block edge.
    pub fn block(&self) -> SpammBlock {
        self.block
    }
    /// Balance parameter.
    pub fn s(&self) -> usize {
        self.s
    }

    /// Enqueues `C = α·Ã·B + β·C` with the schedule's threshold τ (C: `m × n`, leading
    /// dimension n; β = 0 never reads C). With `stats`, adds the number of computed 32³ tile
    /// products to `stats[0]` (zero it before). The schedule must come from `ops`' norm maps.
    pub fn run(
        &self,
        ops: &SpammOperands,
        sched: &SpammSchedule,
        alpha: f32,
        beta: f32,
        c: &mut CudaSlice<f32>,
        stats: Option<&mut CudaSlice<u64>>,
    ) -> Result<(), GpuError> {
        let (m, n, k) = ops.shape();
        if (m, n) != (self.m, self.n) {
            return Err(GpuError::Invalid(format!(
                "kernel built for C {}×{}, operands give {m}×{n}",
                self.m, self.n
            )));
        }
        if ops.precision != self.precision {
            return Err(GpuError::Invalid(format!(
                "kernel precision {:?}, operands {:?}",
                self.precision, ops.precision
            )));
        }
        if c.len() < m * n {
            return Err(GpuError::Invalid(format!(
                "C needs {} elements, has {}",
                m * n,
                c.len()
            )));
        }
        let tau = sched.tau;
        let edge = self.block.tiles() * TILE;
        if sched.block != self.block || sched.offsets.len() != m.div_ceil(edge) + 1 {
            return Err(GpuError::Invalid(
                "schedule built for another block size or shape".into(),
            ));
        }
        if m == 0 || n == 0 || self.blocks == 0 {
            return Ok(());
        }
        let epc = 16 / self.precision.element_bytes();
        // Rows are 16-byte aligned when the leading dimension is a multiple of a chunk (device
        // allocations are 256-byte aligned).
        let flags =
            u32::from(k % epc == 0) | (u32::from(n % epc == 0) << 1) | (u32::from(n % 4 == 0) << 2);
        let (m32, n32, k32) = (m as u32, n as u32, k as u32);
        let (lda, ldb, ldc) = (k as u64, n as u64, n as u64);
        let null = 0u64;
        let mut l = ops.gpu.stream().launch_builder(&self.func);
        match &ops.a {
            DeviceOperand::F32(x) => l.arg(x),
            DeviceOperand::F16(x) => l.arg(x),
        };
        l.arg(&lda);
        match &ops.b {
            DeviceOperand::F32(x) => l.arg(x),
            DeviceOperand::F16(x) => l.arg(x),
        };
        l.arg(&ldb).arg(&mut *c).arg(&ldc);
        l.arg(&m32).arg(&n32).arg(&k32);
        l.arg(&ops.na).arg(&ops.nbt);
        l.arg(&tau).arg(&alpha).arg(&beta);
        l.arg(&self.offsets).arg(&self.ids);
        l.arg(&sched.offsets).arg(&sched.ks).arg(&flags);
        match stats {
            Some(s) => l.arg(s),
            None => l.arg(&null),
        };
        let cfg = LaunchConfig {
            grid_dim: (to_u32(self.blocks, "thread blocks")?, 1, 1),
            block_dim: (self.block.threads(), 1, 1),
            shared_mem_bytes: self.shared,
        };
        // SAFETY: A (m·k), B (k·n), C (≥ m·n) were checked; the norm maps were allocated for this
        // m, n, k (tm·tk and tn·tk floats); the assignment lists block ids < ⌈m/E⌉·⌈n/E⌉ for this
        // kernel's (m, n) (checked against the operands above); the schedule has one offset per
        // block row + 1 (checked) and k tiles < tk (built from norm maps of this k: the caller's
        // contract); the kernel masks every access beyond m, n, k; stats (when given) is a
        // device u64, else the pointer is null and unread.
        unsafe { l.launch(cfg) }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_targets_refuse_nan_infinite_and_out_of_range_numbers() {
        for t in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.0,
            -f32::MIN_POSITIVE,
        ] {
            assert!(TauTarget::tau(t).is_err(), "τ {t}");
        }
        for r in [f64::NAN, f64::INFINITY, -0.1, 1.5] {
            assert!(TauTarget::valid_ratio(r).is_err(), "ratio {r}");
        }
        for r in [f64::NAN, f64::INFINITY, -1e-9] {
            assert!(TauTarget::rel_error(r).is_err(), "target error {r}");
        }
        assert_eq!(TauTarget::tau(0.0).unwrap(), TauTarget::Tau(0.0));
        assert_eq!(
            TauTarget::valid_ratio(1.0).unwrap(),
            TauTarget::ValidRatio(1.0)
        );
        assert_eq!(TauTarget::rel_error(0.0).unwrap(), TauTarget::RelError(0.0));
        // A target built from the variant directly is refused by the τ selection too.
        let norms = [1.0f32; 4];
        let maps = norm_maps(&norms, &norms, (2, 2, 2)).unwrap();
        for bad in [
            TauTarget::Tau(f32::NAN),
            TauTarget::ValidRatio(f64::NAN),
            TauTarget::RelError(f64::NAN),
        ] {
            let e = choose_tau(&maps, bad, 1.0).unwrap_err();
            assert!(matches!(e, GpuError::Invalid(_)), "{bad:?}: {e}");
        }
        assert_eq!(choose_tau(&maps, TauTarget::Tau(0.5), 1.0).unwrap(), 0.5);
    }

    #[test]
    fn candidates_cover_every_valid_product_and_only_plausible_ones() {
        let (tm, tk, tn) = (7, 9, 5);
        let mut x = 12345u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32).powi(4)
        };
        let na: Vec<f32> = (0..tm * tk).map(|_| next()).collect();
        let nb: Vec<f32> = (0..tk * tn).map(|_| next()).collect();
        for block in [SpammBlock::B64, SpammBlock::B128] {
            let bt = block.tiles();
            for tau in [0.0f32, 1e-3, 0.05, 0.3, f32::INFINITY] {
                let (off, ks) = block_row_candidates(&na, &nb, (tm, tk, tn), block, tau).unwrap();
                assert_eq!(off.len(), tm.div_ceil(bt) + 1);
                for i in 0..tm {
                    let row = &ks[off[i / bt] as usize..off[i / bt + 1] as usize];
                    for k in 0..tk {
                        let valid = (0..tn).any(|j| na[i * tk + k] * nb[k * tn + j] >= tau);
                        if valid {
                            assert!(
                                row.contains(&(k as u32)),
                                "{block:?} τ={tau}: k {k} missing"
                            );
                        }
                    }
                }
                if tau == 0.0 {
                    assert_eq!(ks.len(), tm.div_ceil(bt) * tk);
                }
                if tau == f32::INFINITY {
                    assert!(ks.is_empty());
                }
            }
        }
    }

    #[test]
    fn shared_memory_fits_the_device_limit() {
        for p in SpammPrecision::ALL {
            for b in [SpammBlock::B64, SpammBlock::B128] {
                assert!(mm_shared_bytes(p, b) <= 227 * 1024, "{p:?} {b:?}");
            }
        }
        assert_eq!(
            SpammPrecision::parse("3xtf32"),
            Some(SpammPrecision::Tf32x3)
        );
        assert_eq!(rel_bound(0.0, 0.0), 0.0);
        assert_eq!(rel_bound(1.0, 3.0), 0.5);
        assert_eq!(rel_bound(2.0, 1.0), f64::INFINITY);
    }
}
