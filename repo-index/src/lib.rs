//! Signed, static, mirrorable kpack repositories: index model, families, resolution
//!
//! Not implemented yet: see the project README for what works today.
