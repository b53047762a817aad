//! Whether a multi-GPU test runs its NCCL part, shared by the gpu crate's and the facade's tests
//! (`#[path]`-included by the latter).

use tcsparse_gpu::multi::nccl_available;

/// True when the NCCL part must run: libnccl.so is on the library path. Without it the test skips
/// that part, unless `TCSPARSE_REQUIRE_NCCL=1` (the GPU machine's run script sets it): then it
/// fails.
pub fn want_nccl() -> bool {
    let required = std::env::var("TCSPARSE_REQUIRE_NCCL").is_ok_and(|v| v == "1");
    assert!(
        nccl_available() || !required,
        "TCSPARSE_REQUIRE_NCCL=1 but libnccl.so is not on the library path"
    );
    nccl_available()
}
