//! SpMM over several GPUs: A's rows split into contiguous blocks of balanced nonzeros, each block
//! prepared (reordered, built, tuned) on its own device by that device's [`Engine`], B broadcast
//! from the first device (NCCL where the group has it), each device writing its block of C.
//!
//! Every part is prepared with [`RowOrder::Original`], so a part's C block is in the original row
//! order whatever its own reordering: the blocks are C's rows `r0..r1` as they are.

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_gpu::multi::{DeviceGroup, DeviceSet, Transport};
use tcsparse_planner::split::nonzero_rows;

use super::Prepared;
use crate::{Engine, Error, PrepareOptions, RowOrder};

/// One device's share: C rows `rows.0..rows.1`, the prepared block of A, and the device
/// buffers of the last [`SplitPrepared::place_b`].
struct Part {
    rows: (usize, usize),
    prepared: Prepared,
    b: Option<CudaSlice<f32>>,
    c: Option<CudaSlice<f32>>,
}

/// A matrix prepared over several GPUs ([`prepare_split`]).
pub struct SplitPrepared {
    group: DeviceGroup,
    parts: Vec<Part>,
    rows: usize,
    cols: usize,
    /// Columns of B and C in products ([`PrepareOptions::n`], [`SplitPrepared::set_n`]).
    n: usize,
    /// Columns of the B placed by [`SplitPrepared::place_b`] (0 before).
    placed: usize,
}

impl std::fmt::Debug for SplitPrepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitPrepared")
            .field("group", &self.group)
            .field("row_ranges", &self.row_ranges())
            .finish()
    }
}

/// Contiguous row blocks of `a`, one per part, balancing nonzeros + 1 per row
/// ([`tcsparse_planner::split::nonzero_rows`], the split every multi-GPU SpMM uses).
pub(crate) fn row_split(a: &Csr, parts: usize) -> Result<Vec<(usize, usize)>, Error> {
    nonzero_rows(a, parts.max(1)).map_err(|e| Error::InvalidArgs(format!("row split: {e}")))
}

/// Rows `r0..r1` of `a` (all columns): sprs's outer slice, re-based by the checked conversion.
pub(crate) fn row_block(a: &Csr, r0: usize, r1: usize) -> Result<Csr, Error> {
    Csr::try_from(a.as_inner().slice_outer(r0..r1).to_owned())
        .map_err(|e| Error::InvalidArgs(format!("row block {r0}..{r1}: {e}")))
}

/// Prepares `a` over `devices`: rows split by nonzeros ([`tcsparse_planner::split::nonzero_rows`]), each block
/// prepared with `opts` (its row order forced to [`RowOrder::Original`]) on its own device, all
/// at once (one host thread per device). One device gives one part: the same preparation as
/// [`Engine::prepare_spmm`] on that device.
pub fn prepare_split(
    devices: DeviceSet,
    a: &Csr,
    opts: &PrepareOptions,
) -> Result<SplitPrepared, Error> {
    let group = DeviceGroup::open(devices)?;
    prepare_on_group(group, a, opts)
}

/// [`prepare_split`] on a group the caller made (e.g. several streams of one device, to test the
/// split on a single GPU: [`DeviceGroup::host_staged`]).
pub fn prepare_on_group(
    group: DeviceGroup,
    a: &Csr,
    opts: &PrepareOptions,
) -> Result<SplitPrepared, Error> {
    if opts.dtype != crate::DType::F32 {
        // (Its products move f32 device buffers; f16 / bf16 run on one device, spmm_typed.)
        return Err(Error::Unsupported {
            requested: crate::Requested::Element(opts.dtype),
            kernels: "the multi-GPU split (f32 device operands)".into(),
            hint: "; one device takes it (Engine::prepare_spmm, Prepared::spmm_typed)".into(),
        });
    }
    let ranges = row_split(a, group.len())?;
    let mut part_opts = opts.clone();
    part_opts.device_order = RowOrder::Original;
    let blocks = ranges
        .iter()
        .map(|&(r0, r1)| row_block(a, r0, r1))
        .collect::<Result<Vec<_>, _>>()?;
    let prepared: Vec<Result<Prepared, Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = group
            .gpus()
            .iter()
            .zip(&blocks)
            .map(|(gpu, block)| {
                let engine = Engine::with_gpu(gpu.clone());
                let o = &part_opts;
                scope.spawn(move || engine.prepare_spmm(block, o))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Unavailable(
                        "a device's preparation thread panicked".into(),
                    ))
                })
            })
            .collect()
    });
    let mut parts = Vec::with_capacity(ranges.len());
    for (rows, p) in ranges.into_iter().zip(prepared) {
        parts.push(Part {
            rows,
            prepared: p?,
            b: None,
            c: None,
        });
    }
    Ok(SplitPrepared {
        group,
        parts,
        rows: a.rows(),
        cols: a.cols(),
        n: opts.n,
        placed: 0,
    })
}

impl SplitPrepared {
    /// C rows per device, in device order.
    pub fn row_ranges(&self) -> Vec<(usize, usize)> {
        self.parts.iter().map(|p| p.rows).collect()
    }

    /// Each device's preparation, in device order.
    pub fn parts(&self) -> impl Iterator<Item = &Prepared> {
        self.parts.iter().map(|p| &p.prepared)
    }

    /// How B reaches the devices.
    pub fn transport(&self) -> &Transport {
        self.group.transport()
    }

    /// The devices.
    pub fn group(&self) -> &DeviceGroup {
        &self.group
    }

    /// Columns of B and C in products: the prepared [`PrepareOptions::n`] until
    /// [`SplitPrepared::set_n`], as [`Prepared::n`].
    pub fn n(&self) -> usize {
        self.n
    }

    /// Products and placements from now on take B and C of `n` columns (each part's kernel,
    /// chosen for the preparation's width, stays), as [`Prepared::set_n`].
    pub fn set_n(&mut self, n: usize) {
        self.n = n;
    }

    /// Uploads host B (`cols × n`, row-major, leading dimension `ldb`; `n` =
    /// [`SplitPrepared::n`]) to the first device and broadcasts it to the others; allocates every
    /// device's C block (`rows × n`). Queued, not waited for.
    pub fn place_b(&mut self, b: &[f32], ldb: usize) -> Result<(), Error> {
        let n = self.n;
        if n == 0 || ldb < n || b.len() < self.cols.saturating_sub(1) * ldb + n {
            return Err(Error::InvalidArgs(format!(
                "B must be {}×{n} with leading dimension ≥ {n} (ldb = {ldb}, {} values)",
                self.cols,
                b.len()
            )));
        }
        // B compact (ld = n) on the first device: uploaded straight from `b` when it already is.
        let need = self.cols * n;
        let root = &self.group.gpus()[0];
        let b0 = if need == 0 {
            root.upload(&[0.0f32])?
        } else if ldb == n {
            root.upload(&b[..need])?
        } else {
            let compact: Vec<f32> = (0..self.cols)
                .flat_map(|r| b[r * ldb..r * ldb + n].iter().copied())
                .collect();
            root.upload(&compact)?
        };
        let bs = self.group.broadcast(b0)?;
        for ((part, bd), g) in self.parts.iter_mut().zip(bs).zip(self.group.gpus()) {
            part.b = Some(bd);
            // C blocks are kept between calls while they are large enough.
            let len = ((part.rows.1 - part.rows.0) * n).max(1);
            if part.c.as_ref().is_none_or(|c| c.len() < len) {
                part.c = Some(g.alloc_zeros(len)?);
            }
        }
        self.placed = n;
        Ok(())
    }

    /// Queues `C_d = α·A_d·B` on every device (β = 0; B from [`SplitPrepared::place_b`]) and
    /// returns without waiting: the devices run at the same time.
    pub fn run(&mut self, alpha: f32) -> Result<(), Error> {
        let n = self.placed;
        if n == 0 {
            return Err(Error::InvalidArgs(
                "SplitPrepared::run before place_b".into(),
            ));
        }
        for part in &mut self.parts {
            let (Some(b), Some(c)) = (&part.b, &mut part.c) else {
                return Err(Error::InvalidArgs(
                    "SplitPrepared::run before place_b".into(),
                ));
            };
            if part.rows.1 > part.rows.0 {
                part.prepared.spmm_device_at(alpha, b, n, n, 0.0, c, n)?;
            }
        }
        Ok(())
    }

    /// Waits for every device.
    pub fn synchronize(&self) -> Result<(), Error> {
        Ok(self.group.synchronize()?)
    }

    /// Copies every device's C block into host `c` (`rows × n`, leading dimension `ldc`; `n` the
    /// width of the placed B).
    pub fn gather(&self, c: &mut [f32], ldc: usize) -> Result<(), Error> {
        self.gather_scaled(c, ldc, 0.0)
    }

    /// `c = C_d + β·c` for every device's C block `C_d`: with β = 0 a copy that never reads `c`.
    fn gather_scaled(&self, c: &mut [f32], ldc: usize, beta: f32) -> Result<(), Error> {
        let n = self.placed;
        if ldc < n || c.len() < self.rows.saturating_sub(1) * ldc + n {
            return Err(Error::InvalidArgs(format!(
                "C must be {}×{n} with leading dimension ≥ {n} (ldc = {ldc}, {} values)",
                self.rows,
                c.len()
            )));
        }
        for (part, g) in self.parts.iter().zip(self.group.gpus()) {
            let (r0, r1) = part.rows;
            let Some(cd) = &part.c else { continue };
            if r1 == r0 {
                continue;
            }
            let len = (r1 - r0) * n;
            if beta != 0.0 {
                let block = g.download(cd)?;
                add_block(&block[..len], n, beta, &mut c[r0 * ldc..], ldc);
            } else if ldc == n {
                // Straight into the caller's rows.
                g.download_into(cd, &mut c[r0 * n..r0 * n + len])?;
            } else {
                let block = g.download(cd)?;
                for (i, row) in block[..len].chunks_exact(n).enumerate() {
                    let r = r0 + i;
                    c[r * ldc..r * ldc + n].copy_from_slice(row);
                }
            }
        }
        self.synchronize()?;
        Ok(())
    }

    /// The result left on device `part` (index in device order): its C rows and its C block
    /// (`rows × n`, row-major; after [`SplitPrepared::place_b`]), or `None`.
    pub fn c_block(&self, part: usize) -> Option<((usize, usize), &CudaSlice<f32>)> {
        let p = self.parts.get(part)?;
        Some((p.rows, p.c.as_ref()?))
    }

    /// `C = α·A·B + β·C` on host data (B `cols × n`, C `rows × n`, row-major, `n` =
    /// [`SplitPrepared::n`]), as [`Prepared::spmm`]: B placed, every device run, C gathered (β·C
    /// added on the host; β = 0 never reads C).
    pub fn spmm(&mut self, alpha: f32, b: &[f32], beta: f32, c: &mut [f32]) -> Result<(), Error> {
        let n = self.n;
        self.spmm_strided(alpha, b, n, beta, c, n)
    }

    /// [`SplitPrepared::spmm`] with leading dimensions: B is `cols × n` with leading dimension
    /// `ldb`, C is `rows × n` with `ldc` (each ≥ `n`), as [`Prepared::spmm_strided`].
    pub fn spmm_strided(
        &mut self,
        alpha: f32,
        b: &[f32],
        ldb: usize,
        beta: f32,
        c: &mut [f32],
        ldc: usize,
    ) -> Result<(), Error> {
        self.place_b(b, ldb)?;
        self.run(alpha)?;
        self.synchronize()?;
        self.gather_scaled(c, ldc, beta)
    }
}

/// `c[i] = block[i] + β·c[i]` over the rows of a compact `block` (`n` columns) and the rows of `c`
/// from its start (leading dimension `ldc`).
fn add_block(block: &[f32], n: usize, beta: f32, c: &mut [f32], ldc: usize) {
    for (row, dst) in block.chunks_exact(n).zip(c.chunks_mut(ldc)) {
        for (d, &v) in dst[..n].iter_mut().zip(row) {
            *d = v + beta * *d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_formats::csr::csr_from_triplets;

    #[test]
    fn a_row_block_is_the_rows_of_the_matrix() {
        let a = csr_from_triplets(
            4,
            3,
            &[
                (0, 0, 1.0),
                (1, 2, 2.0),
                (2, 1, 3.0),
                (2, 2, 4.0),
                (3, 0, 5.0),
            ],
        )
        .unwrap();
        let b = row_block(&a, 1, 3).unwrap();
        assert_eq!((b.rows(), b.cols()), (2, 3));
        assert_eq!(b.row_offsets(), &[0, 1, 3]);
        assert_eq!(b.indices(), &[2, 1, 2]);
        assert_eq!(b.data(), &[2.0, 3.0, 4.0]);
        let empty = row_block(&a, 2, 2).unwrap();
        assert_eq!((empty.rows(), empty.nnz()), (0, 0));
    }

    #[test]
    fn a_block_is_added_to_beta_c_within_the_leading_dimension() {
        // Two rows of a 2-column block into C rows with leading dimension 3: the third column
        // and the row after the block stay as they are.
        let block = [1.0, 2.0, 3.0, 4.0];
        let mut c = [10.0, 20.0, -1.0, 30.0, 40.0, -1.0, 7.0];
        add_block(&block, 2, 0.5, &mut c, 3);
        assert_eq!(c, [6.0, 12.0, -1.0, 18.0, 24.0, -1.0, 7.0]);
    }
}
