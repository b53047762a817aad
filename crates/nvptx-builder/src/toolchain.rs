//! Finding (and if needed installing) the pinned NVRTC, or nvcc, and compiling one kernel.
//!
//! cudarc opens `libnvrtc` by name (`dlopen("libnvrtc.so.12")` among others), so a library in a cache
//! folder is not found through the default search path. [`ensure_nvrtc`] therefore opens the builtins
//! library and `libnvrtc.so.12` from the cache folder by full path with `RTLD_GLOBAL` first and keeps
//! them loaded: the dynamic loader then answers cudarc's by-name `dlopen` with the already loaded
//! object (matched by its SONAME `libnvrtc.so.12`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::{BuildError, FLAGS, KernelSource, NVRTC_VERSION, NVRTC_WHEEL};

/// A usable compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compiler {
    /// NVRTC through cudarc (library already loaded by [`ensure_nvrtc`]).
    Nvrtc {
        /// `major.minor` reported by `nvrtcVersion`.
        version: String,
    },
    /// `nvcc -ptx` from `PATH`.
    Nvcc {
        /// Path of the executable.
        path: PathBuf,
        /// The `release x.y, Vx.y.z` line of `nvcc --version`.
        version: String,
    },
}

/// Default cache folder for the NVRTC wheel: `$TCSPARSE_NVRTC_DIR`, else
/// `$XDG_CACHE_HOME/tcsparse/nvrtc-<ver>`, else `$HOME/.cache/tcsparse/nvrtc-<ver>`.
pub fn default_nvrtc_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TCSPARSE_NVRTC_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("tcsparse").join(format!("nvrtc-{NVRTC_VERSION}"))
}

static LOADED: OnceLock<Result<String, String>> = OnceLock::new();

/// Makes the pinned NVRTC loadable by cudarc: installs [`NVRTC_WHEEL`]==[`NVRTC_VERSION`] into
/// `dir` with `python3 -m pip install --target` if missing, opens it, and returns the NVRTC version.
/// Only the first call in a process does any work.
pub fn ensure_nvrtc(dir: &Path) -> Result<Compiler, BuildError> {
    let r = LOADED.get_or_init(|| load_nvrtc(dir).map_err(|e| e.to_string()));
    match r {
        Ok(v) => Ok(Compiler::Nvrtc { version: v.clone() }),
        Err(e) => Err(BuildError::NoCompiler(e.clone())),
    }
}

fn load_nvrtc(dir: &Path) -> Result<String, BuildError> {
    let lib = dir.join("nvidia/cuda_nvrtc/lib");
    let nvrtc = lib.join("libnvrtc.so.12");
    if !nvrtc.is_file() {
        tracing::info!(
            "installing {NVRTC_WHEEL}=={NVRTC_VERSION} into {}",
            dir.display()
        );
        let status = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
            .arg(dir)
            .arg(format!("{NVRTC_WHEEL}=={NVRTC_VERSION}"))
            .status()
            .map_err(|e| BuildError::NoCompiler(format!("cannot run python3 -m pip: {e}")))?;
        if !status.success() || !nvrtc.is_file() {
            return Err(BuildError::NoCompiler(format!(
                "`python3 -m pip install --target {} {NVRTC_WHEEL}=={NVRTC_VERSION}` failed ({status})",
                dir.display()
            )));
        }
    }
    preload(&lib, &nvrtc)?;
    // SAFETY: the library was opened above; `is_culib_present` only tries to dlopen it.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(BuildError::NoCompiler(format!(
            "{} was opened but cudarc cannot find libnvrtc by name",
            nvrtc.display()
        )));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtc is loadable (checked above); the pointers are valid for writes.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(BuildError::NoCompiler(format!(
            "nvrtcVersion failed: {r:?}"
        )));
    }
    Ok(format!("{major}.{minor}"))
}

#[cfg(unix)]
fn preload(lib: &Path, nvrtc: &Path) -> Result<(), BuildError> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    static KEEP: OnceLock<Vec<Library>> = OnceLock::new();
    let mut keep = Vec::new();
    let mut builtins: Vec<PathBuf> = std::fs::read_dir(lib)
        .map_err(|e| BuildError::io(lib, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
        })
        .collect();
    builtins.sort();
    for p in builtins.iter().chain(std::iter::once(&nvrtc.to_path_buf())) {
        // SAFETY: loading NVIDIA's NVRTC libraries runs only their (trusted) initialisers.
        let l = unsafe { Library::open(Some(p), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| BuildError::NoCompiler(format!("dlopen {}: {e}", p.display())))?;
        keep.push(l);
    }
    let _ = KEEP.set(keep);
    Ok(())
}

#[cfg(not(unix))]
fn preload(_lib: &Path, _nvrtc: &Path) -> Result<(), BuildError> {
    Ok(())
}

/// `nvcc` on `PATH`, if it runs.
pub fn find_nvcc() -> Option<Compiler> {
    let out = Command::new("nvcc").arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("nvcc"))
            .find(|c| c.is_file())
    })?;
    Some(Compiler::Nvcc { path, version })
}

impl Compiler {
    /// Compiler and version as written in the stamp.
    pub fn describe(&self) -> String {
        match self {
            Compiler::Nvrtc { version } => {
                format!("NVRTC {version} ({NVRTC_WHEEL}=={NVRTC_VERSION})")
            }
            Compiler::Nvcc { version, .. } => format!("nvcc ({version})"),
        }
    }

    /// Compiles `src` (whose includes live in `dir`) to a cubin for [`crate::cubin::CUBIN_ARCH`]
    /// (flags [`crate::cubin::CUBIN_FLAGS`]).
    pub fn compile_cubin(&self, dir: &Path, src: &KernelSource) -> Result<Vec<u8>, BuildError> {
        match self {
            Compiler::Nvrtc { .. } => nvrtc_cubin(dir, src),
            Compiler::Nvcc { path, .. } => {
                let arch = format!("-arch={}", crate::cubin::CUBIN_ARCH);
                run_nvcc(path, dir, src, &["-cubin", &arch, "-std=c++17"], "cubin")
            }
        }
    }

    /// Compiles `src` (whose includes live in `dir`) to PTX text (without stamp).
    pub fn compile(&self, dir: &Path, src: &KernelSource) -> Result<String, BuildError> {
        match self {
            Compiler::Nvrtc { .. } => {
                let mut options: Vec<String> = FLAGS.iter().map(|s| s.to_string()).collect();
                options.push(format!("--include-path={}", dir.display()));
                let opts = cudarc::nvrtc::CompileOptions {
                    options,
                    name: Some(src.name.clone()),
                    ..Default::default()
                };
                let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src.text, opts).map_err(|e| {
                    let log = match &e {
                        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                            log.to_string_lossy().into_owned()
                        }
                        other => other.to_string(),
                    };
                    BuildError::Compile {
                        name: src.name.clone(),
                        log,
                    }
                })?;
                Ok(ptx.to_src())
            }
            Compiler::Nvcc { path, .. } => {
                let args: Vec<&str> = std::iter::once("-ptx")
                    .chain(FLAGS.iter().copied())
                    .collect();
                let bytes = run_nvcc(path, dir, src, &args, "ptx")?;
                String::from_utf8(bytes).map_err(|_| BuildError::Compile {
                    name: src.name.clone(),
                    log: "nvcc wrote PTX that is not UTF-8".into(),
                })
            }
        }
    }
}

/// Runs `nvcc ARGS -I dir -o TMP.ext dir/src` and returns what it wrote.
fn run_nvcc(
    nvcc: &Path,
    dir: &Path,
    src: &KernelSource,
    args: &[&str],
    ext: &str,
) -> Result<Vec<u8>, BuildError> {
    let out_path = std::env::temp_dir().join(format!(
        "tcsparse-{}-{}.{ext}",
        std::process::id(),
        src.ptx_name()
    ));
    let out = Command::new(nvcc)
        .args(args)
        .arg("-I")
        .arg(dir)
        .arg("-o")
        .arg(&out_path)
        .arg(dir.join(&src.name))
        .output()
        .map_err(|e| BuildError::NoCompiler(format!("running nvcc: {e}")))?;
    if !out.status.success() {
        return Err(BuildError::Compile {
            name: src.name.clone(),
            log: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let bytes = std::fs::read(&out_path).map_err(|e| BuildError::io(&out_path, e))?;
    let _ = std::fs::remove_file(&out_path);
    Ok(bytes)
}

/// NVRTC to a cubin: cudarc's safe layer returns PTX only, so the program is driven through its
/// `sys` functions here (create, compile, get the cubin, destroy).
fn nvrtc_cubin(dir: &Path, src: &KernelSource) -> Result<Vec<u8>, BuildError> {
    use cudarc::nvrtc::sys;
    use std::ffi::{CString, c_char};
    let fail = |what: &str| BuildError::Compile {
        name: src.name.clone(),
        log: what.to_string(),
    };
    let text = CString::new(src.text.as_bytes()).map_err(|_| fail("source holds a NUL byte"))?;
    let name = CString::new(src.name.as_bytes()).map_err(|_| fail("name holds a NUL byte"))?;
    let mut options: Vec<CString> = Vec::new();
    for o in crate::cubin::CUBIN_FLAGS
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--include-path={}", dir.display())])
    {
        options.push(CString::new(o).map_err(|_| fail("option holds a NUL byte"))?);
    }
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: NVRTC is loaded (a `Compiler::Nvrtc` exists only after `ensure_nvrtc` succeeded);
    // the strings outlive the calls; `prog` is written by create and destroyed once below.
    unsafe {
        let ok = sys::nvrtcResult::NVRTC_SUCCESS;
        if sys::nvrtcCreateProgram(
            &mut prog,
            text.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        ) != ok
        {
            return Err(fail("nvrtcCreateProgram failed"));
        }
        let compiled =
            sys::nvrtcCompileProgram(prog, option_ptrs.len() as i32, option_ptrs.as_ptr());
        let result = if compiled != ok {
            let mut n = 0usize;
            let mut log = Vec::new();
            if sys::nvrtcGetProgramLogSize(prog, &mut n) == ok {
                log = vec![0u8; n];
                sys::nvrtcGetProgramLog(prog, log.as_mut_ptr().cast());
            }
            let log = String::from_utf8_lossy(&log)
                .trim_end_matches('\0')
                .to_string();
            Err(fail(&log))
        } else {
            let mut n = 0usize;
            if sys::nvrtcGetCUBINSize(prog, &mut n) != ok || n == 0 {
                Err(fail(
                    "nvrtcGetCUBINSize failed (no cubin for a virtual architecture)",
                ))
            } else {
                let mut cubin = vec![0u8; n];
                if sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) != ok {
                    Err(fail("nvrtcGetCUBIN failed"))
                } else {
                    Ok(cubin)
                }
            }
        };
        sys::nvrtcDestroyProgram(&mut prog);
        result
    }
}
