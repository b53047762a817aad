//! The row-tile layouts' dense tiles: which matrices they are worth trying on, their host build in
//! MMA fragment order ([`fragment_tiles`]), and their build on the device from an uploaded CSR
//! and the layout's skeleton ([`RowTileDevice::build_dense`],
//! [`RowTileDevice::build_dense_derived`]), which a plan-cache hit uses instead of a host build
//! and upload.

use super::*;

/// Tile slots per stored nonzero above which a tuned preparation does not try the dense-tile
/// kernels: their tile copy would be more than this many times the bytes of the values. (On the
/// H200, TC16d beat TC16 on every shared dataset, up to 16 slots per nonzero; the limit keeps the
/// copy of the sparsest matrices, where neither wins, from costing memory and upload time.)
pub const MAX_DENSE_SLOTS_PER_NNZ: f64 = 16.0;

/// Largest dense tile copy (bytes) a tuned preparation builds.
pub const MAX_DENSE_TILE_BYTES: u64 = 4 << 30;

/// Whether a tuned preparation should time the dense-tile kernel on `m`: at most
/// [`MAX_DENSE_SLOTS_PER_NNZ`] tile slots per nonzero and [`MAX_DENSE_TILE_BYTES`] of tiles.
pub fn dense_tiles_worth_trying(m: &RowTileTcf) -> bool {
    let bytes = 4 * (m.num_blocks() * m.window_rows() * 8) as u64;
    dense_slots_per_nnz(m) <= MAX_DENSE_SLOTS_PER_NNZ && bytes <= MAX_DENSE_TILE_BYTES
}

/// Tile slots (`window_rows · 8` per block) per stored nonzero of `m`: the byte factor of the
/// dense-tile copy over the values (1 for full tiles; ∞ for a matrix without nonzeros).
pub fn dense_slots_per_nnz(m: &RowTileTcf) -> f64 {
    if m.nnz() == 0 {
        return f64::INFINITY;
    }
    (m.num_blocks() * m.window_rows() * 8) as f64 / m.nnz() as f64
}

/// The dense-tile build on the device ([`RowTileDevice::build_dense`]).
const BUILD_ENTRY: &str = "row_tile_dense_build";
/// The window columns found on the device ([`RowTileDevice::build_dense_derived`]).
const SKELETON_ENTRY: &str = "row_tile_skeleton";

const SKELETON_PARAMS: [ParamKind; 9] = [
    ParamKind::Ptr, // indptr (rows + 1)
    ParamKind::Ptr, // indices
    ParamKind::U32, // rows
    ParamKind::Ptr, // old_row (rows) or null
    ParamKind::U32, // window_rows
    ParamKind::U32, // windows
    ParamKind::Ptr, // counts (windows) or null
    ParamKind::Ptr, // rwo (windows + 1) or null
    ParamKind::Ptr, // a2x (8 per block) or null
];

const BUILD_PARAMS: [ParamKind; 11] = [
    ParamKind::Ptr, // indptr (rows + 1)
    ParamKind::Ptr, // indices
    ParamKind::Ptr, // values
    ParamKind::U32, // rows
    ParamKind::Ptr, // old_row (rows) or null
    ParamKind::Ptr, // new_col (cols) or null
    ParamKind::Ptr, // rwo (windows + 1)
    ParamKind::Ptr, // a2x (8 per block)
    ParamKind::U32, // window_rows
    ParamKind::Ptr, // frag (window_rows · 8 per block), zeroed
    ParamKind::Ptr, // missing (one u32)
];

pub(super) const SIG_BUILD: KernelSignature = signature(BUILD_ENTRY, &BUILD_PARAMS);
pub(super) const SIG_SKELETON: KernelSignature = signature(SKELETON_ENTRY, &SKELETON_PARAMS);

/// Threads per block of the dense-tile build, and most blocks of its grid (it strides over rows).
const BUILD_THREADS: u32 = 256;
const BUILD_MAX_BLOCKS: u32 = 4096;

/// The tiles of `m` dense in MMA fragment order, values rounded to TF32 as `cvt.rna` does: block
/// `j`, lane `L = 4g + t`, row tile `i` holds at `((32 j + L)·MT + i)·4` the four values
/// `T[16i+g][t], T[16i+g+8][t], T[16i+g][t+4], T[16i+g+8][t+4]` (0 where the tile has no
/// nonzero), `MT = window_rows / 16`. Length `window_rows · 8 · blocks`.
pub fn fragment_tiles(m: &RowTileTcf) -> Vec<f32> {
    let rows = m.window_rows();
    let mt = rows / 16;
    let per_block = rows * 8;
    let mut out = vec![0f32; per_block * m.num_blocks()];
    out.par_chunks_mut(per_block)
        .enumerate()
        .with_min_len(256)
        .for_each(|(j, frag)| {
            // Scatter the block's nonzeros into a row-major tile, then read it in fragment order.
            let mut tile = [0f32; 64 * 8];
            m.for_each_in_block(j, |row, slot, v| tile[8 * row + slot] = to_tf32(v));
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for i in 0..mt {
                    let at = 4 * (lane * mt + i);
                    let r0 = 16 * i + g;
                    frag[at] = tile[8 * r0 + t];
                    frag[at + 1] = tile[8 * (r0 + 8) + t];
                    frag[at + 2] = tile[8 * r0 + t + 4];
                    frag[at + 3] = tile[8 * (r0 + 8) + t + 4];
                }
            }
        });
    out
}

/// `kernel` when it runs dense tiles of `window_rows`-row windows in TF32 (the register or the
/// TMA pipeline), a typed error otherwise.
fn dense_kernel(kernel: RowTileKernel, window_rows: usize) -> Result<RowTileKernel, AccSpmmError> {
    match kernel.entry() {
        Some(_)
            if kernel.dense_tiles
                && kernel.arith == RowTileArith::Tf32
                && kernel.window_rows as usize == window_rows =>
        {
            Ok(kernel)
        }
        _ => Err(AccSpmmError::InvalidFormat(format!(
            "{} does not run dense tiles of {window_rows}-row windows",
            kernel.name()
        ))),
    }
}

/// The checks every device build makes: `csr` is `a`'s shape, sizes fit the kernels' u32
/// indices, and `old_of_new` (when given) is a permutation of `a`'s rows.
fn check_device_build(
    a: &Csr,
    csr: &DeviceCsr,
    old_of_new: Option<&[u32]>,
) -> Result<(), AccSpmmError> {
    csr.check_matches(a)?;
    if a.rows() > u32::MAX as usize - 32 || a.nnz() >= u32::MAX as usize {
        return Err(AccSpmmError::InvalidFormat(format!(
            "{}×{} with {} nonzeros is too large for u32 indices",
            a.rows(),
            a.cols(),
            a.nnz()
        )));
    }
    if let Some(p) = old_of_new {
        if p.len() != a.rows() {
            return Err(AccSpmmError::InvalidArgs(format!(
                "a relabelling of {} rows for a matrix of {}",
                p.len(),
                a.rows()
            )));
        }
        check_permutation(p)?;
    }
    Ok(())
}

/// Refuses a dense layout whose tile slots or block columns exceed u32 indices.
fn check_tile_slots(blocks: usize, window_rows: usize) -> Result<(), AccSpmmError> {
    let tile_slots = blocks as u64 * window_rows as u64 * 8;
    if tile_slots >= u64::from(u32::MAX) || blocks >= (u32::MAX / 8) as usize {
        return Err(AccSpmmError::InvalidFormat(format!(
            "{tile_slots} dense tile slots exceed u32 indices"
        )));
    }
    Ok(())
}

/// The inverse of the permutation `p` (checked by the caller).
fn inverse(p: &[u32]) -> Vec<u32> {
    let mut inv = vec![0u32; p.len()];
    for (new, &old) in p.iter().enumerate() {
        inv[old as usize] = new as u32;
    }
    inv
}

/// Launch shape of the device builds: `units` warps (one per row or window), grid-stride beyond
/// [`BUILD_MAX_BLOCKS`] thread blocks.
fn build_config(units: usize) -> cudarc::driver::LaunchConfig {
    let warps_per_block = (BUILD_THREADS / 32) as usize;
    let grid = units
        .div_ceil(warps_per_block)
        .clamp(1, BUILD_MAX_BLOCKS as usize) as u32;
    cudarc::driver::LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (BUILD_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The dense tiles of `a` (uploaded as `csr`) in a layout with the device window prefix and
/// block columns `(rwo, a2x)` of `blocks` blocks: `row_tile_dense_build` into zeroed tiles, its
/// count of nonzeros the skeleton lacks checked (an error when not 0).
///
/// The caller guarantees: `csr` is `a`'s upload ([`check_device_build`]); `old_row` (rows entries)
/// is a permutation of `a`'s rows and `new_col` (cols entries) one of its columns (square `a`);
/// `rwo` has ⌈rows / window_rows⌉ + 1 rising entries from 0 to `blocks`, `a2x` 8·`blocks`
/// entries, and [`check_tile_slots`] passed.
#[allow(clippy::too_many_arguments)]
fn fill_dense_tiles(
    gpu: &Gpu,
    a: &Csr,
    csr: &DeviceCsr,
    old_row: Option<&CudaSlice<u32>>,
    new_col: Option<&CudaSlice<u32>>,
    (rwo, a2x): (&CudaSlice<u32>, &CudaSlice<u32>),
    window_rows: usize,
    blocks: usize,
) -> Result<CudaSlice<f32>, AccSpmmError> {
    let mut frag = gpu.alloc_zeros::<f32>((blocks * window_rows * 8).max(1))?;
    let mut missing = gpu.alloc_zeros::<u32>(1)?;
    let build = gpu.function(KernelModule::RowTileSpmm, BUILD_ENTRY)?;
    let (rows, wr) = (a.rows() as u32, window_rows as u32);
    let mut l = Launch::new(gpu.stream(), &build, &SIG_BUILD);
    l.input(&csr.indptr)
        .input(&csr.indices)
        .input(&csr.values)
        .u32(rows);
    match old_row {
        Some(p) => l.input(p),
        None => l.arg(Arg::Ptr(0)),
    };
    match new_col {
        Some(p) => l.input(p),
        None => l.arg(Arg::Ptr(0)),
    };
    l.input(rwo)
        .input(a2x)
        .u32(wr)
        .output(&mut frag)
        .output(&mut missing);
    // SAFETY: (1) the arguments fill `row_tile_dense_build` in
    // kernels-ptx/row_tile_spmm.cu (BUILD_PARAMS in SIGNATURES, checked against the PTX by a CPU
    // test). (2) Only `frag` and `missing` are written, both allocated here and not yet shared.
    // (3) Every index is in bounds (the caller's guarantees above): the CSR arrays are an upload
    // of a `Csr` of `a`'s shape (row offsets from 0 to nnz, columns < cols); `old_row` maps every
    // prepared row to a row of `a` and `new_col` every column to one < cols; every prepared row
    // names one of the ⌈rows / window_rows⌉ windows of `rwo`, whose entries rise to `blocks`, so
    // the search reads a2x only inside the window's slots [8·rwo[w], 8·rwo[w+1]) ⊆ [0, 8·blocks)
    // and a found slot names a block < blocks, whose window_rows · 8 tile slots lie inside `frag`
    // (allocated for all of them); the lane / row-tile offset is < window_rows · 8 (g < 8, t < 4,
    // i < window_rows / 16).
    unsafe { l.launch(build_config(a.rows()).into()) }?;
    let lost = gpu.download(&missing)?.first().copied().unwrap_or(0);
    if lost > 0 {
        return Err(AccSpmmError::InvalidFormat(format!(
            "{lost} nonzeros have a column their window's skeleton lacks: the skeleton is not this matrix's"
        )));
    }
    Ok(frag)
}

/// `row_tile_skeleton` over `a` (uploaded as `csr`, rows relabelled by `old_row`) in
/// `window_rows`-row windows: with `counts`, each window's unique columns counted into it; with
/// `write = (rwo, a2x)`, the columns written (the caller built `rwo` from the counts: ⌈rows /
/// window_rows⌉ + 1 rising entries, and allocated 8·rwo[last] entries of `a2x`).
fn launch_skeleton(
    gpu: &Gpu,
    a: &Csr,
    old_row: Option<&CudaSlice<u32>>,
    csr: &DeviceCsr,
    window_rows: usize,
    counts: Option<&mut CudaSlice<u32>>,
    write: Option<(&CudaSlice<u32>, &mut CudaSlice<u32>)>,
) -> Result<(), AccSpmmError> {
    let windows = a.rows().div_ceil(window_rows);
    let f = gpu.function(KernelModule::RowTileSpmm, SKELETON_ENTRY)?;
    let (rows, wr, nw) = (a.rows() as u32, window_rows as u32, windows as u32);
    let mut l = Launch::new(gpu.stream(), &f, &SIG_SKELETON);
    l.input(&csr.indptr).input(&csr.indices).u32(rows);
    match old_row {
        Some(p) => l.input(p),
        None => l.arg(Arg::Ptr(0)),
    };
    l.u32(wr).u32(nw);
    match counts {
        Some(c) => l.output(c),
        None => l.arg(Arg::Ptr(0)),
    };
    match write {
        Some((rwo, a2x)) => l.input(rwo).output(a2x),
        None => l.arg(Arg::Ptr(0)).arg(Arg::Ptr(0)),
    };
    // SAFETY: (1) the arguments fill `row_tile_skeleton` in
    // kernels-ptx/row_tile_spmm.cu (SKELETON_PARAMS in SIGNATURES, checked against the PTX by a
    // CPU test). (2) Only `counts` or `a2x` is written, each borrowed mutably for this call and
    // private to the caller's build. (3) Every index is in bounds: `old_row` (checked by the
    // caller to be a permutation of a's rows) names rows < rows, whose offsets in the uploaded
    // CSR (a `Csr` of a's shape) bound every column read; `counts` has one entry per window (the
    // caller's allocation, windows ≥ 1 or none launched past); a window writes only a2x slots in
    // [8·rwo[w], 8·rwo[w+1]) (the kernel caps at the window's capacity), inside the 8·rwo[last]
    // entries the caller allocated.
    unsafe { l.launch(build_config(windows).into()) }?;
    Ok(())
}

impl RowTileDevice {
    /// The dense-tile device copy of `a` in its prepared order, built on the GPU from `a`'s CSR
    /// (`csr`, the upload of `a`: its shape is checked) and its layout's stored skeleton `s` (a
    /// plan-cache hit: no host layout, no host permutation), for `kernel` (a dense-tile TF32
    /// kernel of `s`'s window height, on either pipeline; anything else is refused), run under
    /// `schedule`. Prepared row `r` is row `old_of_new[r]` of `a` (`None`: `a`
    /// is in the prepared order already); with `cols_too` columns are relabelled the same way (a
    /// symmetric reordering: prepared column `r` is column `old_of_new[r]`).
    ///
    /// Equal bit for bit to [`RowTileDevice::upload`] of the host-built layout when `s` is that
    /// layout's [`RowTileTcf::structure`]. A skeleton that does not belong to `a` (a nonzero whose
    /// column its window lacks) is an [`AccSpmmError::InvalidFormat`]; shapes, the relabelling and
    /// the skeleton's invariants (by its type) are checked before anything runs.
    #[allow(clippy::too_many_arguments)]
    pub fn build_dense(
        gpu: &Gpu,
        a: &Csr,
        csr: &DeviceCsr,
        old_of_new: Option<&[u32]>,
        cols_too: bool,
        s: &RowTileStructure,
        kernel: RowTileKernel,
        schedule: RowTileSchedule,
    ) -> Result<Self, AccSpmmError> {
        let kernel = dense_kernel(kernel, s.window_rows())?;
        if (a.rows(), a.cols()) != (s.rows(), s.cols()) {
            return Err(AccSpmmError::InvalidFormat(format!(
                "a {}×{} layout skeleton for a {}×{} matrix",
                s.rows(),
                s.cols(),
                a.rows(),
                a.cols()
            )));
        }
        check_device_build(a, csr, old_of_new)?;
        if cols_too && (old_of_new.is_none() || a.rows() != a.cols()) {
            return Err(AccSpmmError::InvalidArgs(
                "relabelling the columns needs a square matrix and a row relabelling".into(),
            ));
        }
        check_tile_slots(s.num_blocks(), s.window_rows())?;
        let old_row = old_of_new.map(|p| upload_nonempty(gpu, p)).transpose()?;
        let new_col = match old_of_new {
            Some(p) if cols_too => Some(upload_nonempty(gpu, &inverse(p))?),
            _ => None,
        };
        let rwo = upload_nonempty(gpu, s.row_window_offset())?;
        let a2x = upload_nonempty(gpu, s.block_cols())?;
        let frag = fill_dense_tiles(
            gpu,
            a,
            csr,
            old_row.as_ref(),
            new_col.as_ref(),
            (&rwo, &a2x),
            s.window_rows(),
            s.num_blocks(),
        )?;
        Self::dense_from_parts(
            gpu,
            a,
            kernel,
            s.row_window_offset().to_vec(),
            (rwo, a2x, frag),
            schedule,
        )
    }

    /// [`RowTileDevice::build_dense`] without a stored skeleton: the window columns are found on
    /// the GPU too (`row_tile_skeleton`: per window, a warp merges its rows' sorted columns), for
    /// `kernel`'s window height. Only rows are relabelled (`old_of_new`, as in `build_dense`), so
    /// each prepared row's columns stay sorted; a symmetric reordering needs the stored skeleton.
    /// The result equals [`RowTileDevice::upload`] of the host-built layout bit for bit.
    pub fn build_dense_derived(
        gpu: &Gpu,
        a: &Csr,
        csr: &DeviceCsr,
        old_of_new: Option<&[u32]>,
        kernel: RowTileKernel,
        schedule: RowTileSchedule,
    ) -> Result<Self, AccSpmmError> {
        let window_rows = kernel.window_rows as usize;
        let kernel = dense_kernel(kernel, window_rows)?;
        check_device_build(a, csr, old_of_new)?;
        let old_row = old_of_new.map(|p| upload_nonempty(gpu, p)).transpose()?;
        let windows = a.rows().div_ceil(window_rows);
        let mut counts = gpu.alloc_zeros::<u32>(windows.max(1))?;
        launch_skeleton(
            gpu,
            a,
            old_row.as_ref(),
            csr,
            window_rows,
            Some(&mut counts),
            None,
        )?;
        let counts = gpu.download(&counts)?;
        // Window block prefix: ⌈columns / 8⌉ blocks per window.
        let mut row_window_offset = Vec::with_capacity(windows + 1);
        let mut blocks = 0u64;
        row_window_offset.push(0u32);
        for &k in &counts[..windows] {
            blocks += u64::from(k).div_ceil(8);
            row_window_offset.push(u32::try_from(blocks).unwrap_or(u32::MAX));
        }
        let blocks = usize::try_from(blocks).unwrap_or(usize::MAX);
        check_tile_slots(blocks, window_rows)?;
        let rwo = upload_nonempty(gpu, &row_window_offset)?;
        let mut a2x = gpu.alloc_zeros::<u32>((8 * blocks).max(1))?;
        launch_skeleton(
            gpu,
            a,
            old_row.as_ref(),
            csr,
            window_rows,
            None,
            Some((&rwo, &mut a2x)),
        )?;
        let frag = fill_dense_tiles(
            gpu,
            a,
            csr,
            old_row.as_ref(),
            None,
            (&rwo, &a2x),
            window_rows,
            blocks,
        )?;
        Self::dense_from_parts(
            gpu,
            a,
            kernel,
            row_window_offset,
            (rwo, a2x, frag),
            schedule,
        )
    }

    /// A dense-tile device layout from its device arrays (window prefix, block columns, tiles)
    /// and its host window prefix.
    fn dense_from_parts(
        gpu: &Gpu,
        a: &Csr,
        kernel: RowTileKernel,
        row_window_offset: Vec<u32>,
        (rwo, a2x, frag): (CudaSlice<u32>, CudaSlice<u32>, CudaSlice<f32>),
        schedule: RowTileSchedule,
    ) -> Result<Self, AccSpmmError> {
        let Some(entry) = kernel.entry() else {
            return Err(AccSpmmError::InvalidFormat(format!(
                "no kernel {}",
                kernel.name()
            )));
        };
        Ok(Self {
            gpu: gpu.clone(),
            rows: a.rows(),
            nnz: a.nnz(),
            blocks: row_window_offset.last().map_or(0, |&b| b as usize),
            kernel,
            cols: a.cols(),
            sched: upload_schedule(gpu, &row_window_offset, schedule)?,
            row_window_offset,
            schedule,
            rwo,
            a2x,
            tiles: Tiles::Dense { frag },
            a_scale: 1.0,
            main: gpu.function(KernelModule::RowTileSpmm, entry)?,
            // (Dense tiles are TF32 only.)
            half_split: None,
        })
    }

    /// The uploaded layout's skeleton (its window prefix, and its block columns downloaded):
    /// what the plan cache stores so that a hit can [`RowTileDevice::build_dense`].
    pub fn structure(&self, gpu: &Gpu) -> Result<RowTileStructure, AccSpmmError> {
        let block_cols = if self.blocks == 0 {
            Vec::new()
        } else {
            gpu.download(&self.a2x)?
        };
        RowTileStructure::new(
            self.rows,
            self.cols,
            self.kernel.window_rows as usize,
            self.row_window_offset.clone(),
            block_cols,
        )
        .map_err(|e| AccSpmmError::InvalidFormat(e.to_string()))
    }

    /// The dense tiles as uploaded (fragment order, see [`fragment_tiles`]); `None` for a masked
    /// kernel. For tests that compare device builds.
    pub fn dense_tiles(&self, gpu: &Gpu) -> Result<Option<Vec<f32>>, AccSpmmError> {
        match &self.tiles {
            Tiles::Dense { frag } if self.blocks > 0 => Ok(Some(gpu.download(frag)?)),
            Tiles::Dense { .. } => Ok(Some(Vec::new())),
            Tiles::Masked { .. } | Tiles::MaskedHalf { .. } => Ok(None),
        }
    }
}
