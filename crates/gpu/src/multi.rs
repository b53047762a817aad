//! Several GPUs of one host in one process: a [`DeviceGroup`] holds one [`Gpu`] (context + own
//! stream) per device and, with two or more devices, one NCCL communicator per device made by
//! `ncclCommInitAll`. Broadcasts (B of SpMM and SpAMM) go through NCCL over NVLink.
//!
//! One process with one communicator per device, not one process per device: tcsparse is a
//! library called from one host program, every device's context is already in that process, and
//! `ncclCommInitAll` needs no launcher, no rendezvous and no unique-id exchange. NCCL's
//! single-thread use of several ranks is legal inside `ncclGroupStart/End`, which is what
//! [`DeviceGroup::broadcast`] does. Jobs that span hosts run one process per GPU instead, with a
//! communicator built from a unique id: [`crate::distributed`].
//!
//! NCCL is opened at run time like the other CUDA libraries (`libnccl.so` on the library path).
//! Without it, or for handles that share one device (tests of the split on a single GPU), the
//! group copies through the host instead ([`Transport::HostStaged`]) and says so.
//!
//! NVLink multicast (NVLS) is never used: NCCL communicators are made only with
//! NCCL_NVLS_ENABLE=0 in the environment (else [`DeviceGroup::open`] host-stages and says why,
//! and [`DeviceGroup::with_nccl`] refuses); the binaries set it first thing in `main`
//! ([`disable_nvls_at_startup`]), and this crate never calls cuMulticastCreate.

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use cudarc::nccl::{Comm, NcclType};

use crate::{Gpu, GpuError};

/// At most this many devices in a [`DeviceSet`].
pub const MAX_DEVICES: usize = 64;

/// A set of device ordinals (a bit per ordinal, `< 64`), in increasing order. Cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceSet(u64);

impl Default for DeviceSet {
    /// Device 0 alone: the single-GPU behaviour.
    fn default() -> Self {
        Self(1)
    }
}

impl DeviceSet {
    /// Devices `0..count` (at least device 0; at most [`MAX_DEVICES`]).
    pub fn first(count: usize) -> Self {
        let c = count.clamp(1, MAX_DEVICES);
        Self(if c == 64 { u64::MAX } else { (1u64 << c) - 1 })
    }

    /// The given ordinals. Errors on an empty list, a duplicate or an ordinal ≥ 64.
    pub fn from_ordinals(ordinals: &[usize]) -> Result<Self, GpuError> {
        if ordinals.is_empty() {
            return Err(GpuError::Invalid("an empty device list".into()));
        }
        let mut bits = 0u64;
        for &o in ordinals {
            if o >= MAX_DEVICES {
                return Err(GpuError::Invalid(format!(
                    "device {o}: ordinals must be below {MAX_DEVICES}"
                )));
            }
            if bits & (1 << o) != 0 {
                return Err(GpuError::Invalid(format!("device {o} is listed twice")));
            }
            bits |= 1 << o;
        }
        Ok(Self(bits))
    }

    /// Parses `0,1,2,3` (ordinals separated by commas; spaces allowed).
    pub fn parse(s: &str) -> Result<Self, GpuError> {
        let ordinals = s
            .split(',')
            .map(|t| {
                t.trim().parse::<usize>().map_err(|_| {
                    GpuError::Invalid(format!(
                        "device list {s:?}: {t:?} is not a device number (expected e.g. 0,1,2,3)"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_ordinals(&ordinals)
    }

    /// The ordinals, increasing.
    pub fn ordinals(self) -> Vec<usize> {
        (0..MAX_DEVICES)
            .filter(|&o| self.0 & (1 << o) != 0)
            .collect()
    }

    /// Number of devices.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Never true for a set made by this type's constructors (kept for clippy's `len` rule).
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Display for DeviceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.ordinals().iter().map(|o| o.to_string()).collect();
        f.write_str(&v.join(","))
    }
}

/// How a [`DeviceGroup`] moves a buffer from its first device to the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// One handle: nothing moves.
    Single,
    /// NCCL broadcast, one communicator per device.
    Nccl,
    /// Through host memory (no NCCL library, or handles sharing a device); the reason.
    HostStaged(String),
}

impl std::fmt::Display for Transport {
    /// `single`, `nccl` or `host-staged (why)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Single => f.write_str("single"),
            Transport::Nccl => f.write_str("nccl"),
            Transport::HostStaged(why) => write!(f, "host-staged ({why})"),
        }
    }
}

/// GPUs used together: one [`Gpu`] per member (never none), the first is the root of broadcasts.
pub struct DeviceGroup {
    gpus: Vec<Gpu>,
    comms: Vec<Comm>,
    transport: Transport,
}

impl_debug!(DeviceGroup, |s| devices: s.gpus.len(), transport: s.transport);

/// True when `libnccl.so` can be opened.
pub fn nccl_available() -> bool {
    // SAFETY: only tries to dlopen libnccl by its usual names; no NCCL call is made.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// Whether NVLink multicast is off for NCCL (`NCCL_NVLS_ENABLE=0` in the environment). The
/// library never sets it itself: changing the environment while other threads may read it is
/// undefined behaviour, so the process sets it before it starts threads ([`disable_nvls_at_startup`]).
pub fn nvls_disabled() -> bool {
    std::env::var_os("NCCL_NVLS_ENABLE").is_some_and(|v| v == "0")
}

const NVLS_REQUIRED: &str = "NCCL_NVLS_ENABLE is not 0 (NVLink multicast must stay off: set \
     NCCL_NVLS_ENABLE=0 in the environment, or call tcsparse_gpu::multi::disable_nvls_at_startup \
     at the start of main)";

/// Sets `NCCL_NVLS_ENABLE=0` unless the environment already has a value: for a binary's `main`,
/// before it starts any thread.
///
/// # Safety
/// No other thread may read or write the environment while this runs (call it first thing in
/// `main`, before a thread pool, a CUDA context or a logger thread exists).
pub unsafe fn disable_nvls_at_startup() {
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // SAFETY: the caller guarantees no other thread touches the environment meanwhile.
        unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    }
}

fn nccl_error(what: &str, e: cudarc::nccl::result::NcclError) -> GpuError {
    GpuError::Invalid(format!("NCCL {what}: {e:?}"))
}

impl DeviceGroup {
    /// Opens every device of `devices` (each its own context and stream). With two or more, NCCL
    /// communicators are made when the library is present; else broadcasts are host-staged.
    pub fn open(devices: DeviceSet) -> Result<Self, GpuError> {
        let present = Gpu::device_count();
        let ordinals = devices.ordinals();
        if let Some(&o) = ordinals.iter().find(|&&o| o >= present) {
            return Err(GpuError::Unavailable(format!(
                "device {o} asked for, {present} CUDA device(s) present"
            )));
        }
        let gpus = ordinals
            .iter()
            .map(|&o| Gpu::open_device(o))
            .collect::<Result<Vec<_>, _>>()?;
        if gpus.len() == 1 {
            return Ok(Self {
                gpus,
                comms: Vec::new(),
                transport: Transport::Single,
            });
        }
        if !nccl_available() {
            return Self::host_staged(gpus, "libnccl.so not found on the library path");
        }
        if !nvls_disabled() {
            return Self::host_staged(gpus, NVLS_REQUIRED);
        }
        Self::with_nccl(gpus)
    }

    /// NCCL communicators over `gpus` (distinct devices; one device is allowed: a one-rank
    /// communicator, used to test the NCCL path on a single GPU).
    pub fn with_nccl(gpus: Vec<Gpu>) -> Result<Self, GpuError> {
        if gpus.is_empty() {
            return Err(GpuError::Invalid("no GPU handles".into()));
        }
        let mut ordinals: Vec<usize> = gpus.iter().map(|g| g.context().ordinal()).collect();
        ordinals.sort_unstable();
        if ordinals.windows(2).any(|w| w[0] == w[1]) {
            return Err(GpuError::Invalid(
                "NCCL needs one rank per device; these handles share a device".into(),
            ));
        }
        if !nccl_available() {
            return Err(GpuError::Unavailable(
                "libnccl.so not found on the library path (NCCL is needed for a multi-GPU \
                 broadcast)"
                    .into(),
            ));
        }
        if !nvls_disabled() {
            return Err(GpuError::Invalid(NVLS_REQUIRED.into()));
        }
        let streams = gpus.iter().map(|g| g.stream().clone()).collect();
        let comms = Comm::from_devices(streams).map_err(|e| nccl_error("ncclCommInitAll", e))?;
        Ok(Self {
            gpus,
            comms,
            transport: Transport::Nccl,
        })
    }

    /// A group over handles (at least one) that may share devices; broadcasts go through the
    /// host. `why` is reported by [`DeviceGroup::transport`].
    pub fn host_staged(gpus: Vec<Gpu>, why: &str) -> Result<Self, GpuError> {
        if gpus.is_empty() {
            return Err(GpuError::Invalid("no GPU handles".into()));
        }
        let transport = if gpus.len() == 1 {
            Transport::Single
        } else {
            Transport::HostStaged(why.into())
        };
        Ok(Self {
            gpus,
            comms: Vec::new(),
            transport,
        })
    }

    /// `count` (≥ 1) handles on `gpu`'s device: `gpu` itself and `count − 1` new streams of its
    /// context, host-staged. Runs a split on one GPU (the parts overlap on the device), which is
    /// how the split is tested where only one GPU is present.
    pub fn streams_of(gpu: &Gpu, count: usize) -> Result<Self, GpuError> {
        let mut gpus = vec![gpu.clone()];
        for _ in 1..count.max(1) {
            gpus.push(gpu.with_new_stream()?);
        }
        Self::host_staged(gpus, &format!("{} streams of one device", count.max(1)))
    }

    /// The members, root first.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// Never true for a group made by this type's constructors.
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// How broadcasts move.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// Sends `root` (on member 0) to every member: returns one buffer per member, member 0's being
    /// `root` itself (no copy). Queued on the members' streams; synchronize before reading on the
    /// host (the NCCL path orders itself after work already queued on each stream).
    pub fn broadcast<T>(&self, root: CudaSlice<T>) -> Result<Vec<CudaSlice<T>>, GpuError>
    where
        T: DeviceRepr + ValidAsZeroBits + NcclType,
    {
        let len = root.len();
        let mut out = Vec::with_capacity(self.gpus.len());
        match &self.transport {
            Transport::Single => out.push(root),
            Transport::HostStaged(_) => {
                let host = self.gpus[0].download(&root)?;
                out.push(root);
                for g in &self.gpus[1..] {
                    out.push(g.upload(&host)?);
                }
            }
            Transport::Nccl => {
                out.push(root);
                for g in &self.gpus[1..] {
                    out.push(g.alloc_zeros::<T>(len)?);
                }
                if len > 0 {
                    // In place on every rank: the root's buffer is its send and receive buffer.
                    cudarc::nccl::result::group_start()
                        .map_err(|e| nccl_error("ncclGroupStart", e))?;
                    let mut result = Ok(());
                    for (comm, buf) in self.comms.iter().zip(out.iter_mut()) {
                        if let Err(e) = comm.broadcast_in_place(buf, 0) {
                            result = Err(nccl_error("ncclBroadcast", e));
                            break;
                        }
                    }
                    let end = cudarc::nccl::result::group_end()
                        .map_err(|e| nccl_error("ncclGroupEnd", e));
                    result?;
                    end?;
                }
            }
        }
        Ok(out)
    }

    /// Waits for every member's stream.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        for g in &self.gpus {
            g.synchronize()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_sets_parse_and_refuse() {
        let s = DeviceSet::parse("0, 2,3").unwrap();
        assert_eq!(s.ordinals(), vec![0, 2, 3]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.to_string(), "0,2,3");
        assert_eq!(DeviceSet::first(4).ordinals(), vec![0, 1, 2, 3]);
        assert_eq!(DeviceSet::first(0).ordinals(), vec![0]);
        assert_eq!(DeviceSet::first(100).len(), 64);
        assert_eq!(DeviceSet::default(), DeviceSet::first(1));
        for bad in ["", "0,0", "1,x", "64", "-1", "0,,1"] {
            assert!(DeviceSet::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn asking_for_a_device_that_is_not_there_is_an_error_not_a_panic() {
        // One past the devices present: no GPU here (CI) or on the GPU machine.
        let missing = Gpu::device_count();
        let e =
            DeviceGroup::open(DeviceSet::from_ordinals(&[0, missing.max(1)]).unwrap()).unwrap_err();
        assert!(matches!(e, GpuError::Unavailable(_)), "{e}");
        // A group of no handles is refused (every member-0 access relies on it).
        assert!(DeviceGroup::host_staged(Vec::new(), "test").is_err());
    }
}
