//! The SpMM kernel families: each family (one kernel of `tcsparse-gpu` with the layout it runs
//! on) is described in one file of this room, and [`with_families!`] is the one list that
//! registers it. From that list come the family's variant of [`ExecKernel`] (the kernel a
//! preparation runs, holding the family's parameters) and of [`KernelRequest`] (what a caller asks
//! for), and [`FAMILIES`], through which the shared code reaches the family:
//!
//! - [`SpmmFamily`], on the family's unit struct `Family`: its name, `--kernel` names, arithmetic,
//!   row order, the kernel a request of it asks for, and its plan-cache tag (which names it) and
//!   decoding;
//! - [`FamilyKernel`], on the parameters' type: its report name (`Display`), its plan-cache
//!   encoding and the build of its device layout from the prepared matrix;
//! - [`FamilyDevice`], on the device layout (held as `DeviceState::Family`): its products (it is a
//!   [`DeviceProduct`]; in f16 / bf16 through [`FamilyDevice::half`] where it has such kernels),
//!   the kernel it runs, its report's thread blocks and its value updates.
//!
//! A family's tuning candidates are the one thing outside its file: `candidates.rs` calls them
//! where the tuned preparation times its families. The kernels that are not families (Acc-SpMM,
//! cuSPARSE, the row-tile kernels, the CPU walk) are written out where they are used.

use std::any::Any;

use tcsparse_formats::Csr;
use tcsparse_gpu::device_csr::DeviceCsr;
use tcsparse_gpu::{Dense, DenseMut, DeviceProduct, Gpu};

use crate::element::{bf16, f16};

use super::codec::{Reader, StaleOrCorrupt};
use crate::{Error, ExecKernel, KernelRequest, Precision, PrepareOptions};

pub(crate) mod csr;
pub(crate) mod hrpb;
pub(crate) mod staged;

/// The registry: calls macro `$then` with every kernel family, one entry each, in the order the
/// CLI lists their `--kernel` names. An entry is
///
/// `/// doc` `Request(payload type)? => KernelVariant(KernelType) in module;`
///
/// the variant of [`KernelRequest`] (with its payload's type, if it has one), the variant of
/// [`ExecKernel`] with its parameters' type (defined in the family's module) and the family's
/// module in this room (which defines the family's `Family`); the doc comment is both
/// variants'. Adding a family: its module (`mod` above) and its entry here.
macro_rules! with_families {
    ($then:ident) => {
        $then! {
            /// The CUDA-core CSR kernel (f32): [`CsrKernel`](crate::CsrKernel).
            Csr => CsrCuda(CsrKernel) in csr;
            /// The window-staged CSR kernel (CUDA cores, f32):
            /// [`StagedKernel`](crate::StagedKernel).
            Staged(crate::StagedSlice) => Staged(StagedKernel) in staged;
            /// cuTeSpMM's HRPB kernel (TF32 tensor cores, 16×4 bricks):
            /// [`HrpbKernel`](crate::HrpbKernel).
            Hrpb => Hrpb(HrpbKernel) in hrpb;
        }
    };
}
pub(crate) use with_families;

/// What is generated from the registry here: the kernel types' re-export, [`FAMILIES`] and the
/// two ways from a variant to its family.
macro_rules! registry {
    ($( $(#[$doc:meta])* $req:ident $(($rty:ty))? => $kv:ident($kty:ident) in $module:ident; )*) => {
        /// The parameters' types of the families' kernels (re-exported at the crate root).
        pub mod kernels {
            $( pub use super::$module::$kty; )*
        }

        /// Every kernel family, in registry order.
        pub(crate) const FAMILIES: &[&dyn SpmmFamily] = &[$( &$module::Family ),*];

        impl ExecKernel {
            /// The family kernel this is, `None` for the kernels written out in [`ExecKernel`].
            pub(crate) fn as_family(&self) -> Option<&dyn FamilyKernel> {
                match self {
                    $( ExecKernel::$kv(k) => Some(k), )*
                    _ => None,
                }
            }
        }

        impl KernelRequest {
            /// The family this request asks for a kernel of, `None` for the requests written
            /// out in [`KernelRequest`].
            pub(crate) fn family(self) -> Option<&'static dyn SpmmFamily> {
                match self {
                    $( KernelRequest::$req { .. } => Some(&$module::Family), )*
                    _ => None,
                }
            }
        }
    };
}
with_families!(registry);

/// What the kernel choice of a preparation knows when a family's kernel is requested.
pub(crate) struct Choice<'a> {
    /// The options of the preparation (`balance` among them).
    pub(crate) opts: &'a PrepareOptions,
    /// The planner's reason, which the note quotes.
    pub(crate) reason: &'a str,
    /// Rows of the prepared matrix.
    pub(crate) rows: usize,
    /// SMs of the GPU.
    pub(crate) sms: u32,
}

/// What the build of a family's device layout is given.
pub(crate) struct Build<'a> {
    /// The GPU it goes up to.
    pub(crate) gpu: &'a Gpu,
    /// The prepared matrix (reordered where the preparation reordered it).
    pub(crate) a: &'a Csr,
    /// `a`'s arrays on the GPU already, where `a` is the matrix in its original order and the
    /// plan-cache look-up uploaded it early: a build may take them instead of uploading `a`.
    pub(crate) device: Option<DeviceCsr>,
    /// What [`FamilyKernel::early`] made for this kernel on a plan-cache hit.
    pub(crate) early: Option<EarlyWork>,
}

/// Work a family does for a plan-cache hit while the matrix goes up ([`FamilyKernel::early`]),
/// handed back to its build, which takes it only as the type it made.
pub(crate) type EarlyWork = Box<dyn Any + Send>;

/// What a kernel family declares about itself (constant per family).
pub(crate) struct FamilyFacts {
    /// The tag of its kernels in the plan cache's payload: unique among every kernel's (the
    /// kernels written out in `cache.rs` take 0, 1, 3, 4, 5 and the retired 7), and never given
    /// another meaning once stored.
    pub tag: u8,
    /// Its `--kernel` names and the requests they stand for, in the order the CLI lists them.
    pub requests: &'static [(&'static str, KernelRequest)],
    /// The arithmetic of its kernels: [`Precision::Tf32`] (tensor cores: refused where f32 or
    /// 3×TF32 accuracy is asked for) or [`Precision::F32`].
    pub precision: Precision,
    /// Whether its kernels run on the matrix in its original row order (the CSR kernels: an
    /// automatic reordering is not computed for a request of it, and is dropped where its kernel
    /// is chosen).
    pub original_order: bool,
}

/// A kernel family: what the shared code of a preparation asks of it. Implemented by each
/// family's unit struct `Family`; [`FAMILIES`] holds them all.
pub(crate) trait SpmmFamily {
    /// Its constant facts.
    fn facts(&self) -> &'static FamilyFacts;

    /// [`FamilyFacts::tag`].
    fn tag(&self) -> u8 {
        self.facts().tag
    }

    /// [`FamilyFacts::requests`].
    fn requests(&self) -> &'static [(&'static str, KernelRequest)] {
        self.facts().requests
    }

    /// [`FamilyFacts::precision`].
    fn precision(&self) -> Precision {
        self.facts().precision
    }

    /// [`FamilyFacts::original_order`].
    fn original_order(&self) -> bool {
        self.facts().original_order
    }

    /// The kernel `request` asks for, with the report's note on why; `None` where `request` is
    /// not this family's.
    fn choose(&self, request: KernelRequest, c: &Choice<'_>) -> Option<(ExecKernel, String)>;

    /// Its kernel from the parameters [`FamilyKernel::encode`] wrote after the tag, every field
    /// checked: anything a kernel of the family cannot have is a `corrupt: …` reason.
    fn decode(&self, r: &mut Reader<'_>) -> Result<ExecKernel, StaleOrCorrupt>;

    /// Kernels of the family, each kind of parameter at least once (the registry's tests).
    #[cfg(test)]
    fn examples(&self) -> Vec<ExecKernel>;
}

/// A family's kernel parameters (the payload of its [`ExecKernel`] variant). `Display` is the
/// name reports print.
pub(crate) trait FamilyKernel: std::fmt::Display {
    /// The family.
    fn family(&self) -> &'static dyn SpmmFamily;

    /// Appends the parameters (after the tag, which the cache writes), for
    /// [`SpmmFamily::decode`] to read back.
    fn encode(&self, out: &mut Vec<u8>);

    /// Work a plan-cache hit on this kernel can do while the matrix's values go up, on `a` in its
    /// original order, for [`FamilyKernel::build`] to take (`Build::early`); `None` where there
    /// is none (the default) or it failed (the build then does it again and reports the error).
    fn early(&self, _gpu: &Gpu, _a: &Csr) -> Option<EarlyWork> {
        None
    }

    /// Builds the kernel's layout of `b.a` and uploads it (the caller synchronizes).
    fn build(&self, b: &mut Build<'_>) -> Result<Box<dyn FamilyDevice>, Error>;
}

/// A family's device layout, ready for products.
pub(crate) trait FamilyDevice: DeviceProduct + Send {
    /// The kernel it runs.
    fn kernel(&self) -> ExecKernel;

    /// The thread blocks of a launch at width `n` and the split windows among them, as the report
    /// gives them (none where the family has no such schedule).
    fn blocks(&self, _n: usize) -> Result<(usize, usize), Error> {
        Ok((0, 0))
    }

    /// Replaces the matrix's values with `a`'s (the prepared matrix: the same pattern, new
    /// values, in prepared order).
    fn set_values(&mut self, gpu: &Gpu, a: &Csr) -> Result<(), Error>;

    /// Its products with B and C in f16 / bf16, where the family has such kernels.
    fn half(&mut self) -> Option<&mut dyn HalfProduct> {
        None
    }
}

/// B and C of a product in f16 or bf16.
pub(crate) enum HalfOperands<'a, 'b> {
    F16(&'a Dense<'b, f16>, &'a mut DenseMut<'b, f16>),
    Bf16(&'a Dense<'b, bf16>, &'a mut DenseMut<'b, bf16>),
}

/// `C = α·A·B + β·C` with B (`K × n`) and C (`M × n`) in f16 or bf16, queued on the GPU's stream:
/// f32 accumulation, C rounded to the type (beyond its range ±∞, as a cast); B and C checked
/// against the matrix's shape before anything is queued.
pub(crate) trait HalfProduct {
    /// The product on `operands`, in their type.
    fn enqueue_typed(
        &mut self,
        alpha: f32,
        beta: f32,
        operands: HalfOperands<'_, '_>,
    ) -> Result<(), Error>;
}

/// The family whose `--kernel` names include `name`, and the request it stands for.
pub(crate) fn request_named(name: &str) -> Option<KernelRequest> {
    FAMILIES
        .iter()
        .flat_map(|f| f.requests())
        .find(|(n, _)| *n == name)
        .map(|&(_, r)| r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_request_names_are_unique_and_lead_back_to_their_family() {
        // The tags of the kernels written out in cache.rs (7: retired).
        let mut tags = vec![0u8, 1, 3, 4, 5, 7];
        let mut names: Vec<&str> = KernelRequest::names();
        names.retain(|n| request_named(n).is_none());
        for f in FAMILIES {
            assert!(!tags.contains(&f.tag()), "tag {} twice", f.tag());
            tags.push(f.tag());
            assert!(!f.requests().is_empty(), "family {}", f.tag());
            for &(name, request) in f.requests() {
                assert!(!names.contains(&name), "{name} twice");
                names.push(name);
                assert_eq!(request_named(name), Some(request));
                assert_eq!(KernelRequest::from_name(name), Some(request));
                assert_eq!(request.family().map(|g| g.tag()), Some(f.tag()), "{name}");
            }
        }
        assert_eq!(names.len(), KernelRequest::names().len());
        assert_eq!(KernelRequest::names()[0], "auto");
        assert_eq!(KernelRequest::from_name("auto"), Some(KernelRequest::Auto));
        assert_eq!(KernelRequest::from_name("no such kernel"), None);
        assert!(KernelRequest::Auto.family().is_none());
    }

    #[test]
    fn every_example_kernel_leads_back_to_its_family_and_has_its_arithmetic() {
        for f in FAMILIES {
            let examples = f.examples();
            assert!(!examples.is_empty(), "family {}", f.tag());
            for k in examples {
                let fk = k.as_family().unwrap_or_else(|| panic!("{k:?}: no family"));
                assert_eq!(fk.family().tag(), f.tag());
                assert_eq!(k.precision(), f.precision(), "{k}");
                assert!(!k.to_string().is_empty());
            }
        }
        assert!(ExecKernel::CpuBitTcf.as_family().is_none());
    }
}
