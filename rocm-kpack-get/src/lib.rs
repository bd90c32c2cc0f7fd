//! Detects local GPUs and installs only the device code they need
//!
//! Not implemented yet: see the project README for what works today.
