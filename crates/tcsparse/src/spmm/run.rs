//! Products of a prepared SpMM: on host data in the original row order ([`Prepared::spmm`]),
//! on device data ([`Prepared::spmm_device`], original or prepared order), the launch of the
//! prepared kernel, and new values for the same pattern ([`Prepared::update_values`]).

use crate::element::{bf16, f16};
use crate::{DType, Element, Error, Requested, RowOrder};
use std::any::TypeId;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop, ValidAsZeroBits,
};
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm};
use tcsparse_gpu::permute::{PermuteElement, RowPermutation};
use tcsparse_gpu::spmm::acc::check_dense;
use tcsparse_gpu::{Dense, DenseMut, DeviceProduct, Gpu};
use tcsparse_reorder::{Mode, Permutation};

use super::prepare::GPU_TYPED_SPMM_KERNELS;
use super::{DeviceState, HalfElement, Prepared, Scratch, ScratchPair, args_error, at_least};

impl Prepared {
    /// `C = α·A·B + β·C` on host data in the original row order: B is `cols × n` and C `rows × n`,
    /// row-major and contiguous, with `n` = [`Prepared::n`]. With β = 0, C is never read. Permutes
    /// B and un-permutes C as the reordering mode requires.
    /// [`Prepared::spmm_strided`] takes leading dimensions larger than `n`.
    ///
    /// Non-finite B: the tensor-core kernels (Acc-SpMM, row-tile, HRPB) multiply a block's absent
    /// entries (zeros) by its rows of B, so an ∞ or NaN in B can give NaN in a row of the same
    /// block that has no entry in that column, where cuSPARSE and the CSR kernel give a finite
    /// value ([`Prepared::report`] names the kernel kept).
    ///
    /// ```
    /// # fn main() -> Result<(), tcsparse::Error> {
    /// use tcsparse::{Engine, PrepareOptions};
    /// // A = [[1, 0, 2], [0, 3, 0]] times B = [1, 10, 100]ᵀ (n = 1), on the CPU path.
    /// let a = tcsparse::formats::csr::csr_from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)])?;
    /// let mut p = Engine::cpu("doctest").prepare_spmm(&a, &PrepareOptions::builder().n(1).build())?;
    /// let mut c = vec![0.0f32; 2];
    /// p.spmm(1.0, &[1.0, 10.0, 100.0], 0.0, &mut c)?;
    /// assert_eq!(c, [201.0, 30.0]);
    /// # Ok(()) }
    /// ```
    pub fn spmm(&mut self, alpha: f32, b: &[f32], beta: f32, c: &mut [f32]) -> Result<(), Error> {
        self.spmm_typed(alpha, b, beta, c)
    }

    /// [`Prepared::spmm`] with leading dimensions: B is `cols × n` with leading dimension `ldb`,
    /// C is `rows × n` with `ldc` (`n` = [`Prepared::n`]; each leading dimension ≥ `n`).
    pub fn spmm_strided(
        &mut self,
        alpha: f32,
        b: &[f32],
        ldb: usize,
        beta: f32,
        c: &mut [f32],
        ldc: usize,
    ) -> Result<(), Error> {
        self.spmm_typed_strided(alpha, b, ldb, beta, c, ldc)
    }

    /// [`Prepared::spmm`] with B and C of element type `T` (`f32`, [`f16`](crate::element::f16),
    /// [`bf16`](crate::element::bf16)): the type the matrix was prepared for
    /// ([`PrepareOptions::dtype`](crate::PrepareOptions::dtype), [`Prepared::dtype`]; another is
    /// [`Error::ElementType`]). B (and C where β ≠ 0) are widened to f32, the product runs with
    /// f32 accumulation, and C is rounded to `T` ([`crate::element`]: to nearest; beyond the
    /// type's range ±∞, as a cast; NaN stays NaN). [`Prepared::error_bound`] includes that
    /// rounding. On a GPU, f16 and bf16 run on the f16 / bf16 row-tile kernels (A's values
    /// rounded to the type when the matrix was uploaded) or the CSR kernel in the type (A in
    /// f32), with f32 accumulation and C rounded on the device as `half` rounds.
    ///
    /// ```
    /// # fn main() -> Result<(), tcsparse::Error> {
    /// use tcsparse::element::f16;
    /// use tcsparse::{DType, Engine, PrepareOptions};
    /// // A = [[1, 0, 2], [0, 3, 0]] times B = [1, 10, 100]ᵀ in f16 (n = 1), on the CPU path.
    /// let a = tcsparse::formats::csr::csr_from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)])?;
    /// let opts = PrepareOptions::builder().n(1).dtype(DType::F16).build();
    /// let mut p = Engine::cpu("doctest").prepare_spmm(&a, &opts)?;
    /// let b = [1.0, 10.0, 100.0].map(f16::from_f32);
    /// let mut c = [f16::ZERO; 2];
    /// p.spmm_typed(1.0, &b, 0.0, &mut c)?;
    /// assert_eq!(c, [f16::from_f32(201.0), f16::from_f32(30.0)]);
    /// # Ok(()) }
    /// ```
    pub fn spmm_typed<T: Element>(
        &mut self,
        alpha: f32,
        b: &[T],
        beta: f32,
        c: &mut [T],
    ) -> Result<(), Error> {
        let n = self.n;
        self.spmm_typed_strided(alpha, b, n, beta, c, n)
    }

    /// [`Prepared::spmm_typed`] with leading dimensions, as [`Prepared::spmm_strided`]: the one
    /// host product every element type goes through.
    pub fn spmm_typed_strided<T: Element>(
        &mut self,
        alpha: f32,
        b: &[T],
        ldb: usize,
        beta: f32,
        c: &mut [T],
        ldc: usize,
    ) -> Result<(), Error> {
        self.check_element(T::DTYPE)?;
        let n = self.n;
        let (rows, cols) = (self.a.rows(), self.a.cols());
        self.check_operands(n, (b.len(), ldb), (c.len(), ldc))?;
        if n == 0 || rows == 0 {
            return Ok(());
        }
        if !matches!(self.dev, DeviceState::Cpu) {
            return match T::DTYPE {
                DType::F16 => self.spmm_host_gpu::<T, f16>(alpha, b, ldb, beta, c, ldc),
                DType::BF16 => self.spmm_host_gpu::<T, bf16>(alpha, b, ldb, beta, c, ldc),
                DType::F32 => {
                    if self.perm.is_none()
                        && ldc == n
                        && let Some(c32) = T::f32_slice_mut(c)
                    {
                        // In the prepared order already: B and C go to the device as they are.
                        return self.spmm_f32_in_place(alpha, b, ldb, beta, c32);
                    }
                    self.spmm_host_gpu::<T, f32>(alpha, b, ldb, beta, c, ldc)
                }
            };
        }
        // The CPU path: B in prepared order and f32, compact (ld = n); C likewise, only read when
        // β ≠ 0.
        let (b_perm, c_perm) = self.host_row_orders();
        let bp = gather_rows(b, ldb, cols, n, b_perm, T::to_f32);
        let mut cp = if beta != 0.0 {
            gather_rows(c, ldc, rows, n, c_perm, T::to_f32)
        } else {
            vec![0f32; rows * n]
        };
        let y = tcsparse_formats::layout::Layout::spmm_cpu(self.bittcf(), &bp, n, n)
            .map_err(|e| Error::Format(e.to_string()))?;
        for (out, &v) in cp.iter_mut().zip(&y) {
            *out = if beta == 0.0 {
                alpha * v
            } else {
                alpha * v + beta * *out
            };
        }
        // C back in the original order, rounded to T.
        scatter_rows(&cp, n, c, ldc, self.perm.as_ref(), T::from_f32);
        Ok(())
    }

    /// The GPU host product where the original order is the prepared one and C is f32 with
    /// `ldc = n`: B uploaded as it is where it is f32 and compact (else gathered), C uploaded
    /// only where β ≠ 0 and copied back straight into `c`.
    fn spmm_f32_in_place<T: Element>(
        &mut self,
        alpha: f32,
        b: &[T],
        ldb: usize,
        beta: f32,
        c: &mut [f32],
    ) -> Result<(), Error> {
        let n = self.n;
        let (rows, cols) = (self.a.rows(), self.a.cols());
        let gpu = self.gpu_handle()?;
        let bd = match T::f32_slice(b) {
            Some(b32) if ldb == n => gpu.upload(&b32[..cols * n])?,
            _ => gpu.upload(&gather_rows(b, ldb, cols, n, None, T::to_f32))?,
        };
        let c = &mut c[..rows * n];
        let mut cd = if beta != 0.0 {
            gpu.upload(c)?
        } else {
            gpu.alloc_zeros(rows * n)?
        };
        self.launch_prepared(alpha, &bd, n, n, beta, &mut cd, n)?;
        gpu.download_into(&cd, c)?;
        Ok(())
    }

    /// The original row of each prepared row for B (columns of A: only a symmetric reordering
    /// permutes them) and for C (`None`: the identity).
    fn host_row_orders(&self) -> (Option<&[u32]>, Option<&[u32]>) {
        let c_perm = self.perm.as_ref().map(|p| p.as_slice());
        let symmetric = self.report.mode == Mode::Symmetric;
        (if symmetric { c_perm } else { None }, c_perm)
    }

    /// [`Prepared::spmm_typed_strided`] on the GPU with B and C in `E` (`T` is `E`): B (and C
    /// where β ≠ 0) gathered into the prepared row order, uploaded, the prepared kernel of `E`
    /// run ([`DeviceElement::launch`]), C downloaded and scattered back into the original order.
    fn spmm_host_gpu<T: Element, E: DeviceElement>(
        &mut self,
        alpha: f32,
        b: &[T],
        ldb: usize,
        beta: f32,
        c: &mut [T],
        ldc: usize,
    ) -> Result<(), Error> {
        let n = self.n;
        let (rows, cols) = (self.a.rows(), self.a.cols());
        let gpu = self.gpu_handle()?;
        // (Exact: T and E are the same type, the f32 value names it.)
        let (b_perm, c_perm) = self.host_row_orders();
        let to_e = |v: T| E::from_f32(v.to_f32());
        let bd = gpu.upload(&gather_rows(b, ldb, cols, n, b_perm, to_e))?;
        let mut cd = if beta != 0.0 {
            gpu.upload(&gather_rows(c, ldc, rows, n, c_perm, to_e))?
        } else {
            gpu.alloc_zeros::<E>(rows * n)?
        };
        E::launch(self, alpha, &bd, n, n, beta, &mut cd, n)?;
        let mut cp = vec![E::default(); rows * n];
        gpu.download_into(&cd, &mut cp)?;
        scatter_rows(&cp, n, c, ldc, self.perm.as_ref(), |v: E| {
            T::from_f32(v.to_f32())
        });
        Ok(())
    }

    /// The product in prepared order on the prepared half device state (B and C in `H`,
    /// queued on the engine's stream; arguments as [`Prepared::launch_prepared`]): the one
    /// dispatch of the host and device f16 / bf16 products. A device state without a kernel in
    /// `H` is [`Error::Unsupported`].
    #[allow(clippy::too_many_arguments)]
    fn launch_half<H: HalfElement>(
        &mut self,
        alpha: f32,
        b: &dyn DevicePtr<H>,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut dyn DevicePtrMut<H>,
        ldc: usize,
    ) -> Result<(), Error> {
        let (b, mut c) = (Dense::new(b, n, ldb), DenseMut::new(c, n, ldc));
        let ran = match &mut self.dev {
            DeviceState::RowTile(d) if d.kernel().arith == H::ARITH => {
                d.enqueue_half::<H>(alpha, &b, beta, &mut c)?;
                true
            }
            DeviceState::Family(d) => match d.half() {
                Some(h) => {
                    h.enqueue_typed(alpha, beta, H::operands(&b, &mut c))?;
                    true
                }
                None => false,
            },
            _ => false,
        };
        if ran {
            return Ok(());
        }
        Err(Error::Unsupported {
            requested: Requested::Element(self.dtype),
            kernels: self.kernel().to_string(),
            hint: format!("; the GPU runs it on {GPU_TYPED_SPMM_KERNELS}"),
        })
    }

    /// [`Prepared::spmm_device`] with B and C of element type `T` (`f32`,
    /// [`f16`](crate::element::f16), [`bf16`](crate::element::bf16)) on the device: the type the
    /// matrix was prepared for ([`Prepared::dtype`]; another is [`Error::ElementType`]). B is
    /// `cols × n` and C `rows × n`, row-major and contiguous (`n` = [`Prepared::n`]); with β = 0,
    /// C is never read. Queued on the engine's stream, no synchronization. f32 is
    /// [`Prepared::spmm_device`]; f16 and bf16 run the prepared half kernel with f32
    /// accumulation, C rounded to `T` on the device. Rows are in the original order unless the
    /// matrix was prepared with [`RowOrder::Prepared`] (as [`Prepared::spmm_device`]: a
    /// reordered matrix's B and C rows are gathered and scattered on the device, in `T`).
    pub fn spmm_device_typed<T: Element, B: DevicePtr<T>, C: DevicePtr<T> + DevicePtrMut<T>>(
        &mut self,
        alpha: f32,
        b: &B,
        beta: f32,
        c: &mut C,
    ) -> Result<(), Error> {
        let n = self.n;
        self.spmm_device_typed_strided(alpha, b, n, beta, c, n)
    }

    /// [`Prepared::spmm_device_typed`] with leading dimensions, as
    /// [`Prepared::spmm_device_strided`] (cuSPARSE needs `ldb = ldc = n`).
    pub fn spmm_device_typed_strided<
        T: Element,
        B: DevicePtr<T>,
        C: DevicePtr<T> + DevicePtrMut<T>,
    >(
        &mut self,
        alpha: f32,
        b: &B,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        self.check_element(T::DTYPE)?;
        let n = self.n;
        // The kernel of E, the device element of T (the same type: `Same` checks it).
        macro_rules! on {
            ($e:ty) => {{
                let (b, mut c) = (Same::<_, T, $e>::new(b)?, Same::<_, T, $e>::new(c)?);
                self.spmm_device_at(alpha, &b, n, ldb, beta, &mut c, ldc)
            }};
        }
        match T::DTYPE {
            DType::F32 => on!(f32),
            DType::F16 => on!(f16),
            DType::BF16 => on!(bf16),
        }
    }

    /// `C = α·A·B + β·C` on device data, queued on the engine's stream (no synchronization): the
    /// hot path for benchmarks. Same arguments as [`Prepared::spmm`]: B is `cols × n` and C
    /// `rows × n`, row-major and contiguous (`n` = [`Prepared::n`]); with β = 0, C is never read.
    /// [`Prepared::spmm_device_strided`] takes leading dimensions.
    pub fn spmm_device<B: DevicePtr<f32>, C: DevicePtr<f32> + DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        b: &B,
        beta: f32,
        c: &mut C,
    ) -> Result<(), Error> {
        let n = self.n;
        self.spmm_device_at(alpha, b, n, n, beta, c, n)
    }

    /// [`Prepared::spmm_device`] with leading dimensions: B is `cols × n` row-major with
    /// leading dimension `ldb`, C is `rows × n` with `ldc` (`n` = [`Prepared::n`]).
    /// B and C may be whole buffers ([`CudaSlice`](cudarc::driver::CudaSlice)) or views into larger ones
    /// ([`cudarc::driver::CudaView`] / [`cudarc::driver::CudaViewMut`], e.g. `buf.slice(..)`).
    /// Rows are in the original order (the default) unless the matrix was prepared with
    /// [`RowOrder::Prepared`] (`PrepareOptions::device_order`), the reordered order that costs
    /// no row permutation.
    ///
    /// Leading dimensions larger than `n` work on every kernel but cuSPARSE, which needs
    /// `ldb = ldc = n`; shapes, lengths and leading dimensions are checked before any work
    /// ([`Error::InvalidArgs`]).
    pub fn spmm_device_strided<B: DevicePtr<f32>, C: DevicePtr<f32> + DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        b: &B,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        let n = self.n;
        self.spmm_device_at(alpha, b, n, ldb, beta, c, ldc)
    }

    /// The device product at width `n` (whatever [`Prepared::n`] says) with B and C in `E`, on
    /// the prepared kernel of `E`: every device product, and the multi-GPU parts, which choose
    /// the width themselves.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spmm_device_at<
        E: DeviceElement,
        B: DevicePtr<E>,
        C: DevicePtr<E> + DevicePtrMut<E>,
    >(
        &mut self,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        if self.gpu.is_none() {
            return Err(needs_gpu());
        }
        // (Refuses the f32 device entry points on a matrix prepared for f16 / bf16.)
        self.check_element(E::DTYPE)?;
        let (rows, cols) = (self.a.rows(), self.a.cols());
        self.check_operands(n, (b.len(), ldb), (c.len(), ldc))?;
        // (cuSPARSE runs f32 only: a matrix prepared for f16 / bf16 never holds it.)
        if matches!(self.dev, DeviceState::Cusparse { .. }) {
            cusparse_packed(n, ldb, ldc)?;
        }
        if matches!(self.dev, DeviceState::Cpu) {
            return Err(cpu_path());
        }
        if self.device_order == RowOrder::Prepared || self.perm.is_none() {
            return E::launch(self, alpha, b, n, ldb, beta, c, ldc);
        }
        if n == 0 || rows == 0 {
            return Ok(());
        }
        // Original order: gather B (symmetric mode) and C (β ≠ 0) into prepared order, multiply,
        // scatter C back (a 16-bit permutation moves the values' bits).
        let gpu = self.gpu_handle()?;
        if self.device_perm.is_none() {
            let perm = self.perm.as_ref().map(|p| p.as_slice()).unwrap_or(&[]);
            self.device_perm = Some(RowPermutation::new(&gpu, perm)?);
        }
        let symmetric = self.report.mode == Mode::Symmetric;
        let scratch = E::scratch(&mut self.scratch);
        let (sb, sc) = (scratch.b.take(), scratch.c.take());
        let mut cp = at_least(&gpu, sc, rows * n)?;
        let mut bp = if symmetric {
            Some(at_least(&gpu, sb, cols * n)?)
        } else {
            None
        };
        let result = (|| {
            let perm = self.device_perm()?;
            if let Some(bp) = bp.as_mut() {
                perm.gather(b, ldb, bp, n, n)?;
            }
            if beta != 0.0 {
                perm.gather(c, ldc, &mut cp, n, n)?;
            }
            match bp.as_ref() {
                Some(bp) => E::launch(self, alpha, bp, n, n, beta, &mut cp, n)?,
                None => E::launch(self, alpha, b, n, ldb, beta, &mut cp, n)?,
            }
            let perm = self.device_perm()?;
            perm.scatter(&cp, n, c, ldc, n)?;
            Ok(())
        })();
        let scratch = E::scratch(&mut self.scratch);
        scratch.b = bp;
        scratch.c = Some(cp);
        result
    }

    /// `Ok` where B and C of element type `got` are of the type the matrix was prepared for
    /// ([`Error::ElementType`] else).
    fn check_element(&self, got: DType) -> Result<(), Error> {
        if got == self.dtype {
            Ok(())
        } else {
            Err(Error::ElementType {
                prepared: self.dtype,
                got,
            })
        }
    }

    /// `Ok` where B (`b_len` elements at leading dimension `ldb`) holds A's columns and C
    /// (`c_len` at `ldc`) its rows, `n` wide ([`Error::InvalidArgs`] else).
    fn check_operands(
        &self,
        n: usize,
        (b_len, ldb): (usize, usize),
        (c_len, ldc): (usize, usize),
    ) -> Result<(), Error> {
        check_dense("B", b_len, self.a.cols(), n, ldb).map_err(args_error)?;
        check_dense("C", c_len, self.a.rows(), n, ldc).map_err(args_error)
    }

    /// The engine's GPU (a handle to it).
    fn gpu_handle(&self) -> Result<Gpu, Error> {
        self.gpu
            .clone()
            .ok_or_else(|| Error::Unavailable("no GPU".into()))
    }

    /// The row permutation on the device (made by [`Prepared::spmm_device_at`] before use).
    fn device_perm(&self) -> Result<&RowPermutation, Error> {
        self.device_perm
            .as_ref()
            .ok_or_else(|| Error::Unavailable("no device permutation".into()))
    }

    /// The product in prepared order on the device kernel (arguments as [`Prepared::spmm_device`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_prepared<B: DevicePtr<f32>, C: DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        let gpu = self.gpu.as_ref().ok_or_else(needs_gpu)?;
        let kernel: &mut dyn DeviceProduct = match &mut self.dev {
            DeviceState::Cpu => return Err(cpu_path()),
            DeviceState::Acc(d) => &mut **d,
            DeviceState::RowTile(d) => &mut **d,
            DeviceState::Family(d) => &mut **d,
            DeviceState::Cusparse { csr, alg, spmm } => {
                cusparse_packed(n, ldb, ldc)?;
                if n == 0 || csr.rows() == 0 {
                    return Ok(());
                }
                let s = match spmm.entry((n, *alg)) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    // Set up on the caller's B and C (no temporaries of their size).
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(CusparseSpmm::with_buffers(gpu, csr, n, *alg, b, c)?)
                    }
                };
                s.run(alpha, b, beta, c, n)?;
                // (cuSPARSE reports success on a lost context: ask the stream.)
                gpu.stream_fault()?;
                return Ok(());
            }
        };
        let (b, mut c) = (Dense::new(b, n, ldb), DenseMut::new(c, n, ldc));
        kernel.enqueue(alpha, &b, beta, &mut c)?;
        Ok(())
    }

    /// Replaces the matrix's values, keeping its pattern (GNN edge weights, iterative solvers):
    /// `values` holds one value per stored nonzero in the ORIGINAL matrix's CSR order. No
    /// reordering, planning or tuning: the values are moved into the prepared order through a map
    /// from original to prepared positions (computed once, on the first call, when the matrix was
    /// reordered), the host copies (prepared CSR and its BitTCF) are refilled, and the device copy
    /// of the kernel's values is replaced with one upload (cuSPARSE: its CSR arrays). The BitTCF
    /// values are refilled through a map from its value slots to prepared CSR positions
    /// (`BitTcf::csr_positions`, computed on the first call), O(nnz) without a build; the
    /// row-tile and HRPB layouts (when one of those kernels runs) are still rebuilt from the
    /// prepared CSR, O(nnz), as they have no slot map yet.
    /// Afterwards products equal those of a fresh preparation on the new values with the same
    /// options (bit for bit on the CPU path). A wrong length is [`Error::ValueCount`], before
    /// anything changes.
    pub fn update_values(&mut self, values: &[f32]) -> Result<(), Error> {
        let nnz = self.a.nnz();
        if values.len() != nnz {
            return Err(Error::ValueCount {
                expected: nnz,
                got: values.len(),
            });
        }
        if self.perm.is_some() && self.value_map.is_none() {
            self.value_map = Some(self.original_to_prepared()?);
        }
        match &self.value_map {
            Some(map) if self.perm.is_some() => {
                let data = self.a.make_mut().data_mut();
                for (&v, &q) in values.iter().zip(map) {
                    data[q as usize] = v;
                }
            }
            _ => self.a.make_mut().data_mut().copy_from_slice(values),
        }
        // A BitTCF not built yet will be built from the refilled CSR when asked for.
        if let Some(bittcf) = self.bittcf.get_mut() {
            if self.bittcf_slots.is_none() {
                self.bittcf_slots =
                    Some(BitTcf::csr_positions(&self.a).map_err(|e| Error::Format(e.to_string()))?);
            }
            if let Some(slots) = &self.bittcf_slots {
                let data = self.a.data();
                for (v, &p) in bittcf.values_mut().iter_mut().zip(slots) {
                    *v = data[p as usize];
                }
            }
        }
        let Some(gpu) = self.gpu.clone() else {
            return Ok(());
        };
        if matches!(self.dev, DeviceState::Acc(_)) {
            // Built during preparation for Acc-SpMM; this only guards the refill above.
            self.bittcf();
        }
        match &mut self.dev {
            DeviceState::Cpu => {}
            DeviceState::Acc(d) => {
                let bittcf = self.bittcf.get_or_init(BitTcf::empty);
                d.set_values(&gpu, bittcf.values())?
            }
            DeviceState::Family(d) => d.set_values(&gpu, &self.a)?,
            DeviceState::Cusparse { csr, spmm, .. } => {
                *csr = CusparseCsr::new(&gpu, &self.a)?;
                spmm.clear();
            }
            DeviceState::RowTile(d) => {
                let m = RowTileTcf::from_csr(&self.a, d.kernel().window_rows as usize)
                    .map_err(|e| Error::Format(e.to_string()))?;
                d.set_values(&gpu, &m)?;
            }
        }
        Ok(())
    }

    /// For each stored value of the original matrix (CSR order), its position in the prepared
    /// matrix: the prepared matrix with each value replaced by a tag of its own position, put back
    /// into the original order by the inverse permutation (values are moved, never computed on,
    /// so the tags come back exact).
    fn original_to_prepared(&self) -> Result<Vec<u32>, Error> {
        let Some(perm) = &self.perm else {
            return Ok((0..self.a.nnz() as u32).collect());
        };
        // Tags q + 1 are finite, nonzero f32 bit patterns below the exponent of ∞.
        if self.a.nnz() >= 0x7F80_0000 {
            return Err(Error::InvalidArgs(format!(
                "{} nonzeros: too many to map for a value update",
                self.a.nnz()
            )));
        }
        let mut tagged = (*self.a).clone();
        for (q, v) in tagged.data_mut().iter_mut().enumerate() {
            *v = f32::from_bits(q as u32 + 1);
        }
        let original = tcsparse_reorder::apply(&perm.inverse(), &tagged, self.report.mode)?;
        original
            .data()
            .iter()
            .map(|v| match v.to_bits().checked_sub(1) {
                Some(q) if (q as usize) < self.a.nnz() => Ok(q),
                _ => Err(Error::InvalidArgs(
                    "value map: the reordering changed the stored values".into(),
                )),
            })
            .collect()
    }
}

/// `rows` rows of `src` (row-major, leading dimension `ld ≥ n`) as a compact `rows × n` array on
/// every core: row i is `src`'s row `perm[i]` (row i where `perm` is `None`), each value
/// converted by `conv`.
fn gather_rows<S: Copy + Sync, D: Copy + Default + Send>(
    src: &[S],
    ld: usize,
    rows: usize,
    n: usize,
    perm: Option<&[u32]>,
    conv: impl Fn(S) -> D + Sync,
) -> Vec<D> {
    use rayon::prelude::*;
    let mut out = vec![D::default(); rows * n];
    if n > 0 {
        out.par_chunks_mut(n).enumerate().for_each(|(i, dst)| {
            let r = perm.map_or(i, |p| p[i] as usize);
            for (d, &v) in dst.iter_mut().zip(&src[r * ld..r * ld + n]) {
                *d = conv(v);
            }
        });
    }
    out
}

/// The inverse of [`gather_rows`]: compact row i of `src` (`rows × n`) goes to row `perm[i]` of
/// `dst` (leading dimension `ld ≥ n`), converted by `conv`, on every core ([`Permutation::inverse`]
/// names each destination row's source); `dst`'s other columns are left as they are.
fn scatter_rows<S: Copy + Sync, D: Copy + Send>(
    src: &[S],
    n: usize,
    dst: &mut [D],
    ld: usize,
    perm: Option<&Permutation>,
    conv: impl Fn(S) -> D + Sync,
) {
    use rayon::prelude::*;
    if n == 0 {
        return;
    }
    let rows = src.len() / n;
    let inverse = perm.map(Permutation::inverse);
    dst.par_chunks_mut(ld)
        .take(rows)
        .enumerate()
        .for_each(|(r, row)| {
            let i = inverse.as_ref().map_or(r, |v| v.as_slice()[r] as usize);
            for (d, &v) in row[..n].iter_mut().zip(&src[i * n..i * n + n]) {
                *d = conv(v);
            }
        });
}

/// A borrowed device buffer of `T` (`X` is `&B` or `&mut B`) seen as one of `U`, made only where
/// `T` is `U` (the same type, by [`TypeId`]): how a product generic over [`Element`] hands its
/// operands to a kernel of one type. Every method forwards to the buffer's own.
struct Same<X, T, U> {
    x: X,
    _types: PhantomData<(T, U)>,
}

impl<X, T: 'static, U: 'static> Same<X, T, U> {
    fn new(x: X) -> Result<Self, Error> {
        same_type::<T, U>()?;
        Ok(Self {
            x,
            _types: PhantomData,
        })
    }
}

impl<X: Deref<Target: DeviceSlice<T>>, T, U> DeviceSlice<U> for Same<X, T, U> {
    fn len(&self) -> usize {
        self.x.len()
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.x.stream()
    }
}

impl<X: Deref<Target: DevicePtr<T>>, T, U> DevicePtr<U> for Same<X, T, U> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.x.device_ptr(stream)
    }
}

impl<X: DerefMut<Target: DevicePtrMut<T>>, T, U> DevicePtrMut<U> for Same<X, T, U> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.x.device_ptr_mut(stream)
    }
}

/// `Ok` where `T` is `U`.
fn same_type<T: 'static, U: 'static>() -> Result<(), Error> {
    if TypeId::of::<T>() == TypeId::of::<U>() {
        Ok(())
    } else {
        Err(Error::InvalidArgs(format!(
            "operands of {} handed on as {}",
            std::any::type_name::<T>(),
            std::any::type_name::<U>()
        )))
    }
}

/// An element type of B and C on the device: f32 on the prepared kernel
/// ([`Prepared::launch_prepared`]), f16 and bf16 on the prepared half kernel
/// ([`Prepared::launch_half`]), each with its own scratch buffers.
pub(crate) trait DeviceElement:
    Element + PermuteElement + DeviceRepr + ValidAsZeroBits
{
    /// The scratch buffers of this type.
    fn scratch(s: &mut Scratch) -> &mut ScratchPair<Self>;
    /// The product in prepared order on the prepared kernel of this type (arguments as
    /// [`Prepared::launch_prepared`]).
    #[allow(clippy::too_many_arguments)]
    fn launch<B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
        p: &mut Prepared,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error>;
}

impl DeviceElement for f32 {
    fn scratch(s: &mut Scratch) -> &mut ScratchPair<Self> {
        &mut s.f32
    }
    fn launch<B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
        p: &mut Prepared,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        p.launch_prepared(alpha, b, n, ldb, beta, c, ldc)
    }
}

impl<H: HalfElement + Element> DeviceElement for H {
    fn scratch(s: &mut Scratch) -> &mut ScratchPair<Self> {
        H::half_scratch(s)
    }
    fn launch<B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
        p: &mut Prepared,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        p.launch_half::<H>(alpha, b, n, ldb, beta, c, ldc)
    }
}

/// The error of a device entry point on an engine without a GPU.
fn needs_gpu() -> Error {
    Error::Unavailable("spmm_device needs a GPU; this engine runs on the CPU path".into())
}

/// The error of a device product on a preparation for the CPU path.
fn cpu_path() -> Error {
    Error::Unavailable("prepared for the CPU path".into())
}

/// `Ok` when B and C are packed (`ldb = ldc = n`), as the cuSPARSE path needs.
fn cusparse_packed(n: usize, ldb: usize, ldc: usize) -> Result<(), Error> {
    if ldb != n || ldc != n {
        return Err(Error::InvalidArgs(format!(
            "the cuSPARSE path needs ldb = ldc = n (got ldb = {ldb}, ldc = {ldc}, n = {n})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{gather_rows, same_type, scatter_rows};
    use crate::element::{bf16, f16};
    use tcsparse_reorder::Permutation;

    /// Operands are handed on as a kernel's type only where they are of that very type.
    #[test]
    fn operands_are_handed_on_only_as_their_own_type() {
        assert!(same_type::<f32, f32>().is_ok());
        assert!(same_type::<f16, f16>().is_ok());
        assert!(same_type::<bf16, bf16>().is_ok());
        assert!(same_type::<f16, bf16>().is_err());
        assert!(same_type::<bf16, f16>().is_err());
        assert!(same_type::<f32, f16>().is_err());
        assert!(same_type::<u16, f16>().is_err());
    }

    proptest::proptest! {
        /// Scattering what was gathered with the same permutation gives back every row's first
        /// n values and leaves the padding columns alone.
        #[test]
        fn scatter_inverts_gather(rows in 1usize..40, n in 1usize..6, pad in 0usize..3, seed in 0u64..1000) {
            let ld = n + pad;
            let src: Vec<u32> = (0..rows * ld).map(|i| i as u32).collect();
            // A permutation from the seed (Fisher-Yates on a simple LCG).
            let mut perm: Vec<u32> = (0..rows as u32).collect();
            let mut s = seed;
            for i in (1..rows).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                perm.swap(i, (s >> 33) as usize % (i + 1));
            }
            let perm = Permutation::new(perm).unwrap();
            for p in [None, Some(&perm)] {
                let packed = gather_rows(&src, ld, rows, n, p.map(|p| p.as_slice()), |v| v as u64);
                for (i, row) in packed.chunks_exact(n).enumerate() {
                    let r = p.map_or(i, |p| p.as_slice()[i] as usize);
                    proptest::prop_assert_eq!(row[0], (r * ld) as u64);
                }
                let mut back = vec![u32::MAX; rows * ld];
                scatter_rows(&packed, n, &mut back, ld, p, |v| v as u32);
                for (r, row) in back.chunks_exact(ld).enumerate() {
                    proptest::prop_assert_eq!(&row[..n], &src[r * ld..r * ld + n]);
                    proptest::prop_assert!(row[n..].iter().all(|&v| v == u32::MAX));
                }
            }
        }
    }
}
