//! GPU code objects: reading and rewriting them (`codeobj`),
//! hipBLASLt's CMake build (`hipblaslt_cmake`), the in-place rewrite of
//! an installed library (`inplace`). See `ARCHITECTURE.md` here.

pub mod codeobj;
pub(crate) mod hipblaslt_cmake;
pub(crate) mod inplace;
