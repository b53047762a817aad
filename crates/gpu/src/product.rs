//! The kernel contract: a prepared device layout that runs `C = α·A·B + β·C` on a stream.
//!
//! Every kernel family implements [`DeviceProduct`], SpMM and SpMV alike: Acc-SpMM
//! ([`crate::spmm::acc::AccSpmmDevice`]), the row-tile kernels
//! ([`crate::spmm::row_tile::RowTileDevice`]), HRPB ([`crate::spmm::hrpb::HrpbSpmm`]), our CSR
//! kernel ([`crate::spmm::csr::CsrSpmm`]), the cuSPARSE baselines
//! ([`crate::baselines::cusparse::CusparseSpmm`],
//! [`crate::spmv::baseline::CusparseSpmvGraphable`]) and the SpMV kernels
//! ([`crate::spmv::BitBsrSpmv`], [`crate::spmv::csr::CsrSpmv`]). One argument order for all:
//! `enqueue(alpha, b, beta, c)`, with B (`cols × n`) and C (`rows × n`) as typed views of
//! row-major f32 device memory ([`Dense`], [`DenseMut`]: a buffer or a view into one, its width
//! `n` and leading dimension). With β = 0, C is never read.
//!
//! A call is queued on the stream of the [`Gpu`] the layout was prepared with
//! ([`DeviceProduct::gpu`]; [`Gpu::with_new_stream`] gives another stream of the same context)
//! and returns without waiting for it. Once [`DeviceProduct::prepare_width`] has run for a width,
//! a call at that width allocates nothing and never synchronises with the host, so it can be
//! captured in a CUDA graph on a capturable stream. Operands a kernel cannot take are refused
//! before anything is queued (a width above [`DeviceProduct::max_width`], a leading dimension
//! other than `n` where the kernel needs packed operands, buffers too short).

use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::{Gpu, GpuError};

/// A dense row-major operand read by a product: `rows × n` elements of `T` (f32 unless a kernel
/// takes 16-bit operands; rows known to the product) at leading dimension `ld ≥ n` in a device
/// buffer or a view into one.
pub struct Dense<'a, T = f32> {
    buf: &'a dyn DevicePtr<T>,
    n: usize,
    ld: usize,
}

/// A dense row-major operand written by a product ([`Dense`], borrowed mutably).
pub struct DenseMut<'a, T = f32> {
    buf: &'a mut dyn DevicePtrMut<T>,
    n: usize,
    ld: usize,
}

/// `Ok` when a `rows × n` operand at leading dimension `ld` fits in `len` elements.
fn check_fits(what: &str, len: usize, rows: usize, n: usize, ld: usize) -> Result<(), GpuError> {
    crate::spmm::check_dense(what, len, rows, n, ld).map_err(GpuError::from)
}

impl<'a, T> Dense<'a, T> {
    /// `n` columns at leading dimension `ld` in `buf`.
    pub fn new(buf: &'a dyn DevicePtr<T>, n: usize, ld: usize) -> Self {
        Self { buf, n, ld }
    }

    /// `n` columns packed (leading dimension `n`).
    pub fn packed(buf: &'a dyn DevicePtr<T>, n: usize) -> Self {
        Self::new(buf, n, n)
    }

    /// Columns.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Leading dimension.
    pub fn ld(&self) -> usize {
        self.ld
    }

    /// The device memory.
    pub fn buf(&self) -> &'a dyn DevicePtr<T> {
        self.buf
    }

    /// `Ok` when the operand holds `rows` rows ([`GpuError::Invalid`] naming it `what` else).
    pub fn check(&self, what: &str, rows: usize) -> Result<(), GpuError> {
        check_fits(what, self.buf.len(), rows, self.n, self.ld)
    }
}

impl<'a, T> DenseMut<'a, T> {
    /// `n` columns at leading dimension `ld` in `buf`.
    pub fn new(buf: &'a mut dyn DevicePtrMut<T>, n: usize, ld: usize) -> Self {
        Self { buf, n, ld }
    }

    /// `n` columns packed (leading dimension `n`).
    pub fn packed(buf: &'a mut dyn DevicePtrMut<T>, n: usize) -> Self {
        Self::new(buf, n, n)
    }

    /// Columns.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Leading dimension.
    pub fn ld(&self) -> usize {
        self.ld
    }

    /// The device memory.
    pub fn buf(&mut self) -> &mut dyn DevicePtrMut<T> {
        &mut *self.buf
    }

    /// `Ok` when the operand holds `rows` rows ([`GpuError::Invalid`] naming it `what` else).
    pub fn check(&self, what: &str, rows: usize) -> Result<(), GpuError> {
        check_fits(what, self.buf.len(), rows, self.n, self.ld)
    }
}

/// The width `n` of a product of `b` into `c` (`shape` = A's rows and columns), after checking
/// that both have it, that it is at most `max_width`, that both operands hold their rows and,
/// with `packed`, that both leading dimensions are `n`.
pub fn checked_width<T>(
    shape: (usize, usize),
    max_width: usize,
    packed: bool,
    b: &Dense<'_, T>,
    c: &DenseMut<'_, T>,
) -> Result<usize, GpuError> {
    width(
        shape,
        max_width,
        packed,
        [b.n, b.ld, b.buf.len()],
        [c.n, c.ld, c.buf.len()],
    )
}

/// [`checked_width`] on `[n, ld, len]` of B and C.
fn width(
    (rows, cols): (usize, usize),
    max_width: usize,
    packed: bool,
    [bn, bld, blen]: [usize; 3],
    [cn, cld, clen]: [usize; 3],
) -> Result<usize, GpuError> {
    if cn != bn {
        return Err(GpuError::Invalid(format!("B has {bn} columns and C {cn}")));
    }
    let n = bn;
    if n > max_width {
        return Err(GpuError::Invalid(format!(
            "this product takes at most {max_width} columns, got {n}"
        )));
    }
    if packed && (bld != n || cld != n) {
        return Err(GpuError::Invalid(format!(
            "this product needs ldb = ldc = n (got ldb = {bld}, ldc = {cld}, n = {n})"
        )));
    }
    check_fits("B", blen, cols, n, bld)?;
    check_fits("C", clen, rows, n, cld)?;
    Ok(n)
}

/// One call's operands after [`DeviceProduct::enqueue`] checked them against the product
/// ([`checked_width`] with its limits): B (`cols × n` at `ldb`) and C (`rows × n` at `ldc`) hold
/// their rows, and with [`DeviceProduct::packed_only`] both leading dimensions are `n`. Only
/// `enqueue` makes one, so an implementation of [`DeviceProduct::enqueue_checked`] can rely on it.
pub struct Checked<'o> {
    /// α.
    pub alpha: f32,
    /// β.
    pub beta: f32,
    /// Columns of B and C.
    pub n: usize,
    /// Leading dimension of B.
    pub ldb: usize,
    /// Leading dimension of C.
    pub ldc: usize,
    b: &'o dyn DevicePtr<f32>,
    c: &'o mut dyn DevicePtrMut<f32>,
}

impl<'o> Checked<'o> {
    /// B and C.
    pub fn operands(self) -> (&'o dyn DevicePtr<f32>, &'o mut dyn DevicePtrMut<f32>) {
        (self.b, self.c)
    }

    /// B and C as views (their width `n` and leading dimensions).
    pub fn views(self) -> (Dense<'o>, DenseMut<'o>) {
        (
            Dense::new(self.b, self.n, self.ldb),
            DenseMut::new(self.c, self.n, self.ldc),
        )
    }
}

/// A prepared device layout of a sparse A that runs `C = α·A·B + β·C` on its stream (module
/// docs: the contract every kernel family implements).
pub trait DeviceProduct {
    /// Rows and columns of A (C has the rows, B the columns).
    fn shape(&self) -> (usize, usize);

    /// The GPU whose stream calls are queued on.
    fn gpu(&self) -> &Gpu;

    /// Most columns of B and C one call takes (SpMV kernels: 8).
    fn max_width(&self) -> usize {
        usize::MAX
    }

    /// Whether calls need packed operands (leading dimensions equal to the width).
    fn packed_only(&self) -> bool {
        false
    }

    /// Makes ahead whatever a first call at width `n` would otherwise make on the way (a work
    /// list for that width, a kernel module), so that calls at `n` then allocate nothing and
    /// never wait for the host (graph capture).
    fn prepare_width(&mut self, n: usize) -> Result<(), GpuError> {
        let _ = n;
        Ok(())
    }

    /// Queues `C = α·A·B + β·C` on [`DeviceProduct::gpu`]'s stream; with β = 0, C is never read.
    /// The operands are checked first ([`checked_width`] against [`DeviceProduct::shape`],
    /// [`DeviceProduct::max_width`] and [`DeviceProduct::packed_only`]).
    fn enqueue(
        &mut self,
        alpha: f32,
        b: &Dense<'_>,
        beta: f32,
        c: &mut DenseMut<'_>,
    ) -> Result<(), GpuError> {
        let n = checked_width(self.shape(), self.max_width(), self.packed_only(), b, c)?;
        let (ldb, ldc) = (b.ld, c.ld);
        self.enqueue_checked(Checked {
            alpha,
            beta,
            n,
            ldb,
            ldc,
            b: b.buf,
            c: &mut *c.buf,
        })
    }

    /// The kernel's part of [`DeviceProduct::enqueue`], on operands it checked.
    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError>;

    /// [`DeviceProduct::enqueue`] on packed operands: `b` holds `cols·n` and `c` `rows·n` f32
    /// (whole buffers or views).
    fn run<B: DevicePtr<f32>, C: DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        b: &B,
        beta: f32,
        c: &mut C,
        n: usize,
    ) -> Result<(), GpuError>
    where
        Self: Sized,
    {
        self.enqueue(
            alpha,
            &Dense::packed(b, n),
            beta,
            &mut DenseMut::packed(c, n),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_must_agree_with_the_product_and_each_other() {
        // A is 3×5: B is 5 × n, C is 3 × n.
        let w = |max, packed, b, c| width((3, 5), max, packed, b, c);
        assert_eq!(w(usize::MAX, false, [4, 4, 20], [4, 4, 12]).unwrap(), 4);
        // Strided: the last row needs only n elements past (rows − 1)·ld.
        assert_eq!(w(usize::MAX, false, [4, 6, 28], [4, 5, 14]).unwrap(), 4);
        assert!(
            w(usize::MAX, false, [4, 6, 27], [4, 5, 14]).is_err(),
            "B short"
        );
        assert!(
            w(usize::MAX, false, [4, 4, 20], [4, 4, 11]).is_err(),
            "C short"
        );
        assert!(
            w(usize::MAX, false, [4, 3, 20], [4, 4, 12]).is_err(),
            "ld < n"
        );
        let e = w(usize::MAX, false, [4, 4, 20], [3, 4, 12]).unwrap_err();
        assert!(e.to_string().contains("B has 4 columns and C 3"), "{e}");
        let e = w(8, false, [9, 9, 45], [9, 9, 27]).unwrap_err();
        assert!(e.to_string().contains("at most 8 columns, got 9"), "{e}");
        let e = w(8, true, [4, 6, 28], [4, 4, 12]).unwrap_err();
        assert!(e.to_string().contains("ldb = ldc = n"), "{e}");
        assert_eq!(w(8, true, [8, 8, 40], [8, 8, 24]).unwrap(), 8);
        // An empty width queues nothing but is no error here (each kernel returns early).
        assert_eq!(w(8, true, [0, 0, 0], [0, 0, 0]).unwrap(), 0);
    }
}
