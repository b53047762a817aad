//! Timing inside CUDA graphs, so that short calls are not measured at the launch floor (cuSPARSE
//! SpMV's per-call overhead on the H200 is 11–15 µs).
//!
//! [`Gpu::stream`] is the legacy default stream, which cannot be captured, so [`CaptureStream`] is
//! a separate non-blocking stream made with the raw driver API (not through cudarc's `new_stream`,
//! which would switch the whole context into cudarc's multi-stream event tracking). Everything
//! queued on it must use raw pointers and raw launches: the SpMV products' [`GraphSpmv`] path
//! does (their [`crate::DeviceProduct::enqueue`] is the same path on the GPU's stream).

use cudarc::driver::{DevicePtr, DevicePtrMut, result, sys};

use crate::product::{Checked, DeviceProduct};
use crate::{Gpu, GpuError, Timing};

/// A non-blocking stream owned by this value (destroyed on drop).
pub struct CaptureStream {
    stream: sys::CUstream,
    gpu: Gpu,
}

impl CaptureStream {
    /// Creates a non-blocking stream on the GPU's context.
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        gpu.context().bind_to_thread()?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
        Ok(Self {
            stream,
            gpu: gpu.clone(),
        })
    }

    /// The raw stream.
    pub fn raw(&self) -> sys::CUstream {
        self.stream
    }

    /// Waits for everything queued on the stream.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        // SAFETY: the stream is live (owned by self).
        Ok(unsafe { result::stream::synchronize(self.stream) }?)
    }
}

impl Drop for CaptureStream {
    fn drop(&mut self) {
        let _ = self.gpu.context().bind_to_thread();
        // SAFETY: created in `new`, destroyed once; pending work completes first (the driver
        // defers the release until the stream is idle).
        let _ = unsafe { result::stream::destroy(self.stream) };
    }
}

/// An instantiated graph (destroyed on drop).
struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both were created by `capture` and are destroyed once.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}

/// Captures `launches` calls of `f` on `s` into one graph.
fn capture(
    s: &CaptureStream,
    launches: usize,
    f: &mut dyn FnMut(sys::CUstream) -> Result<(), GpuError>,
) -> Result<Graph, GpuError> {
    s.synchronize()?;
    // SAFETY: live stream; relaxed mode so that other threads' unrelated driver calls do not
    // invalidate the capture.
    unsafe {
        result::stream::begin_capture(
            s.raw(),
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )
    }?;
    let mut body = Ok(());
    for _ in 0..launches {
        body = f(s.raw());
        if body.is_err() {
            break;
        }
    }
    // SAFETY: the capture begun above is ended exactly once, also when `f` failed.
    let graph = unsafe { result::stream::end_capture(s.raw()) };
    body?;
    let graph = graph?;
    // SAFETY: `graph` is a valid graph just captured.
    let exec = match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) }
    {
        Ok(e) => e,
        Err(e) => {
            // SAFETY: destroy the graph we own.
            let _ = unsafe { result::graph::destroy(graph) };
            return Err(e.into());
        }
    };
    Ok(Graph { graph, exec })
}

/// Times `f` (which must queue exactly one operation's work on the stream it is given, with raw
/// launches) as the median over `samples` graph launches, each graph holding `launches` (≥ 1) calls:
/// per-call milliseconds. The GPU's own stream is synchronised first (the operands were written
/// there); one untimed graph launch warms up.
pub fn time_graph(
    gpu: &Gpu,
    launches: usize,
    samples: usize,
    mut f: impl FnMut(sys::CUstream) -> Result<(), GpuError>,
) -> Result<Timing, GpuError> {
    let launches = launches.max(1);
    gpu.synchronize()?;
    let s = CaptureStream::new(gpu)?;
    let g = capture(&s, launches, &mut f)?;
    let start = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
    let end = match result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT) {
        Ok(e) => e,
        Err(e) => {
            // SAFETY: created above, destroyed once.
            let _ = unsafe { result::event::destroy(start) };
            return Err(e.into());
        }
    };
    let run = || -> Result<Vec<f64>, GpuError> {
        // SAFETY: live graph, stream and events of this context.
        unsafe {
            result::graph::upload(g.exec, s.raw())?;
            result::graph::launch(g.exec, s.raw())?;
        }
        s.synchronize()?;
        let mut out = Vec::with_capacity(samples.max(1));
        for _ in 0..samples.max(1) {
            // SAFETY: as above.
            let ms = unsafe {
                result::event::record(start, s.raw())?;
                result::graph::launch(g.exec, s.raw())?;
                result::event::record(end, s.raw())?;
                result::event::synchronize(end)?;
                result::event::elapsed(start, end)?
            };
            out.push(f64::from(ms) / launches as f64);
        }
        Ok(out)
    };
    let r = run();
    // SAFETY: created above, destroyed once, no longer used.
    unsafe {
        let _ = result::event::destroy(start);
        let _ = result::event::destroy(end);
    }
    drop(g);
    Timing::from_samples(r?).ok_or_else(|| GpuError::Invalid("no timing samples".into()))
}

/// A prepared SpMV `y = α·A·X + β·y` (X: `cols × n`, y: `rows × n`, row-major f32) whose call
/// can be queued on any stream of its context with raw launches, so that it can be captured in a
/// graph: [`crate::spmv::BitBsrSpmv`], [`crate::spmv::csr::CsrSpmv`] and
/// [`crate::spmv::baseline::CusparseSpmvGraphable`]. Every such product is a
/// [`DeviceProduct`] (packed operands, the same raw call on the GPU's stream). Callers outside
/// this crate use the safe [`DeviceProduct::enqueue`] and [`time_spmv`].
pub trait GraphSpmv {
    /// Rows and columns of A.
    fn shape(&self) -> (usize, usize);

    /// The GPU whose context the product lives in (its stream: [`DeviceProduct::gpu`]).
    fn gpu(&self) -> &Gpu;

    /// Most right-hand sides of one call.
    fn max_width(&self) -> usize;

    /// As [`DeviceProduct::prepare_width`].
    fn prepare_width(&mut self, n: usize) -> Result<(), GpuError> {
        let _ = n;
        Ok(())
    }

    /// Queues one call on `stream`.
    ///
    /// # Safety
    /// `call.x` points at `cols·n` and `call.y` at `rows·n` f32 of this context that stay alive
    /// and are not written by others until the call completes; `call.stream` is a live stream of
    /// this context ordered after the value's uploads; no other call of the value runs
    /// concurrently.
    unsafe fn enqueue_raw(&self, call: RawCall) -> Result<(), GpuError>;
}

/// One SpMV call with raw operands ([`GraphSpmv::enqueue_raw`]): `y = α·A·X + β·y` with X at
/// device address `x` (`cols·n` f32) and y at `y` (`rows·n` f32), queued on `stream`.
#[derive(Clone, Copy, Debug)]
pub struct RawCall {
    /// The stream the call is queued on.
    pub stream: sys::CUstream,
    /// α.
    pub alpha: f32,
    /// X's device address.
    pub x: u64,
    /// β.
    pub beta: f32,
    /// y's device address.
    pub y: u64,
    /// Right-hand sides.
    pub n: usize,
}

impl<T: GraphSpmv> DeviceProduct for T {
    fn shape(&self) -> (usize, usize) {
        GraphSpmv::shape(self)
    }

    fn gpu(&self) -> &Gpu {
        GraphSpmv::gpu(self)
    }

    fn max_width(&self) -> usize {
        GraphSpmv::max_width(self)
    }

    fn packed_only(&self) -> bool {
        true
    }

    fn prepare_width(&mut self, n: usize) -> Result<(), GpuError> {
        GraphSpmv::prepare_width(self, n)
    }

    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError> {
        enqueue_on_gpu_stream(self, call)
    }
}

/// The [`DeviceProduct::enqueue_checked`] of every SpMV: `op`'s call queued on its GPU's stream
/// (the one its buffers were made on), `x` and `y` borrowed (their stream guards held) until it
/// is queued.
fn enqueue_on_gpu_stream(op: &dyn GraphSpmv, call: Checked<'_>) -> Result<(), GpuError> {
    let (alpha, beta, n) = (call.alpha, call.beta, call.n);
    let (x, y) = call.operands();
    let s = op.gpu().stream();
    let (px, _gx) = x.device_ptr(s);
    let (py, _gy) = y.device_ptr_mut(s);
    // SAFETY: x holds cols·n and y rows·n f32 (packed, checked by `enqueue`: checked_width) of the GPU's context, borrowed
    // until the call is queued on the GPU's stream, which orders it after the value's uploads
    // (made on that stream) and before any later reuse or free of either buffer there; `op` is
    // borrowed here, so no other call of it runs concurrently from this process.
    unsafe {
        op.enqueue_raw(RawCall {
            stream: s.cu_stream(),
            alpha,
            x: px,
            beta,
            y: py,
            n,
        })
    }
}

/// Times `op` (`y = A·X`, α = 1, β = 0, `n` right-hand sides) on `x` and `y` inside CUDA graphs
/// of `launches` calls, as [`time_graph`]: the lengths are checked first, and both buffers stay
/// borrowed for the whole timing (the GPU's stream, where they were written, is synchronised
/// first; the timing synchronises its own stream before it returns).
pub fn time_spmv<X: DevicePtr<f32>, Y: DevicePtrMut<f32>>(
    gpu: &Gpu,
    op: &dyn GraphSpmv,
    x: &X,
    y: &mut Y,
    n: usize,
    launches: usize,
    samples: usize,
) -> Result<Timing, GpuError> {
    let (rows, cols) = op.shape();
    if n == 0 || x.len() < cols.saturating_mul(n) || y.len() < rows.saturating_mul(n) {
        return Err(GpuError::Invalid(format!(
            "SpMV timing with n = {n} needs X of {cols}·{n} and y of {rows}·{n} elements, got {} and {}",
            x.len(),
            y.len()
        )));
    }
    let (px, _gx) = x.device_ptr(gpu.stream());
    let (py, _gy) = y.device_ptr_mut(gpu.stream());
    // SAFETY: x and y hold cols·n and rows·n f32 (checked above) of the GPU's context and stay
    // borrowed (with their stream guards) until `time_graph` has synchronised its stream;
    // `time_graph` synchronises the GPU's stream before capturing, which orders every call after
    // the value's uploads; `op` is borrowed shared here, and its implementors take `&mut self`
    // for anything that changes what a call reads.
    time_graph(gpu, launches, samples, |s| unsafe {
        op.enqueue_raw(RawCall {
            stream: s,
            alpha: 1.0,
            x: px,
            beta: 0.0,
            y: py,
            n,
        })
    })
}
