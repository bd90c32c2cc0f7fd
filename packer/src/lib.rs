//! Splits fat binaries, install trees and wheels into host-only binaries and per-target kpack archives
//!
//! Not implemented yet: see the project README for what works today.
