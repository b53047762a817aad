//! Timing inside CUDA graphs, so that short calls are not measured at the launch floor (cuSPARSE
//! SpMV's per-call overhead on the H200 is 11–15 µs).
//!
//! [`Gpu::stream`] is the legacy default stream, which cannot be captured, so [`CaptureStream`] is
//! a separate non-blocking stream made with the raw driver API (not through cudarc's `new_stream`,
//! which would switch the whole context into cudarc's multi-stream event tracking). Everything
//! queued on it must use raw pointers and raw launches: [`crate::spmv::BitBsrSpmv::enqueue`] and
//! [`crate::spmv::baseline::CusparseSpmvGraphable::enqueue`] do.

use cudarc::driver::{result, sys};

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
