//! Kernel database files leaving a tree (recognised by
//! `kpack_binary::databases`): copied into payloads, one per owner
//! ([`payload`]), or, with `--pack-databases`, stored in the kpack archives
//! ([`pack`]).

pub mod pack;
pub mod payload;
