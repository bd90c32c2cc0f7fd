//! The whole chain, end to end, one binary: a real package is packed and
//! published with `kpack-repo`, served over loopback (or from a bucket),
//! installed with `kpack-get` for chosen GPUs, and its code loaded through
//! the runtime; Debian 13's stack as one update; a wheel split and
//! installed by `kpack-get pip`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod aotriton;
mod closed_pipe;
mod debian_stack;
mod every_gpu_index;
mod fat;
mod python_wheels;
mod rocm_blas;
mod rocm_rand;
mod s3;
mod tidy;
