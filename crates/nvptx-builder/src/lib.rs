//! `nvptx-builder`: compiles `kernels-ptx/*.cu` to PTX with NVRTC (or nvcc), stamps each file with its
//! provenance (source sha256 over the file and its includes, compiler, version, flags) and checks that
//! committed PTX is fresh.
