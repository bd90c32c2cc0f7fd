//! The GPU vocabulary every kpack tool shares, with no I/O: targets and
//! their compatibility (`target`), the one table of GPU facts (`gpus`) and
//! TheRock's target families (`family`), the machine values of code
//! objects' ELF headers (`machine`) and the packaging levels that own
//! device code (`owner`). Crates that only name GPUs depend
//! on this and not on the archive reader and loader (`rocm-kpack`).
#![forbid(unsafe_code)]

pub mod family;
pub mod gpus;
pub mod machine;
pub mod owner;
pub mod target;

pub use owner::{Level, Owner, ParseOwnerError};
pub use target::{ParseTargetError, Target};
