//! The workspace's end-to-end flows, in one test binary (`it/`, a module
//! per flow): a real package is packed and published with `kpack-repo`,
//! served over loopback, installed with `kpack-get` for chosen GPUs, and
//! its code loaded through the runtime. The helpers they share are
//! `kpack_test_support::chain` and `kpack_test_support::server`.
//!
//! The flows run the binaries `cargo test --workspace` (`./test.sh`) builds
//! beside them; run alone (`./test.sh -p kpack-chain-tests`), a binary not
//! built yet is built into a target directory of its own, and one built
//! earlier is used as it is, so name its package too (`-p rocm-kpack-get
//! -p kpack-repo`) after changing it.
