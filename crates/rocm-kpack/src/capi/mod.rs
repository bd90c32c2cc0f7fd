//! `librocm_kpack`: the reference runtime's C API over the Rust types.
//!
//! Every entry point runs inside `guard`, which turns errors into the
//! reference's error numbers and catches panics, so nothing unwinds into C.
//! Handles are boxed Rust values behind opaque pointers. Buffers handed to
//! C are `malloc`ed and released with the matching `kpack_free_*`.

mod archive;
mod loader;

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::ErrorCode;

pub use archive::*;
pub use loader::*;

/// The C `kpack_error_t`.
pub type KpackError = ErrorCode;

/// Runs an entry point's body: `Ok` is `KPACK_SUCCESS`, `Err` its code,
/// and a panic (a bug, never expected) `KPACK_ERROR_IO_ERROR`.
fn guard(body: impl FnOnce() -> Result<(), ErrorCode>) -> ErrorCode {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ErrorCode::Success,
        Ok(Err(code)) => code,
        Err(_) => ErrorCode::IoError,
    }
}

/// Runs a `void` entry point's body, swallowing any panic.
fn guard_void(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// A required pointer argument, or `KPACK_ERROR_INVALID_ARGUMENT`.
fn required<T>(ptr: *const T) -> Result<*const T, ErrorCode> {
    if ptr.is_null() {
        Err(ErrorCode::InvalidArgument)
    } else {
        Ok(ptr)
    }
}

/// A required output pointer, or `KPACK_ERROR_INVALID_ARGUMENT`.
fn required_mut<T>(ptr: *mut T) -> Result<*mut T, ErrorCode> {
    if ptr.is_null() {
        Err(ErrorCode::InvalidArgument)
    } else {
        Ok(ptr)
    }
}

/// Borrows a required C string.
///
/// # Safety
/// `ptr`, when not null, must point to a NUL-terminated string that
/// outlives the returned borrow.
unsafe fn c_str<'a>(ptr: *const c_char) -> Result<&'a CStr, ErrorCode> {
    let ptr = required(ptr)?;
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    Ok(unsafe { CStr::from_ptr(ptr) })
}

/// A required C string as UTF-8 text.
///
/// # Safety
/// As for [`c_str`].
unsafe fn c_text<'a>(ptr: *const c_char) -> Result<&'a str, ErrorCode> {
    // SAFETY: forwarded from the caller.
    unsafe { c_str(ptr) }?
        .to_str()
        .map_err(|_| ErrorCode::InvalidArgument)
}

/// A required C string as a path.
///
/// # Safety
/// As for [`c_str`].
#[cfg(unix)]
unsafe fn c_path<'a>(ptr: *const c_char) -> Result<&'a std::path::Path, ErrorCode> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { c_str(ptr) }?.to_bytes();
    Ok(std::path::Path::new(std::ffi::OsStr::from_bytes(bytes)))
}

/// A required C string as a path: UTF-8 text outside Unix (Windows, where
/// `\` and `/` both separate and a drive letter may lead).
///
/// # Safety
/// As for [`c_str`].
#[cfg(not(unix))]
unsafe fn c_path<'a>(ptr: *const c_char) -> Result<&'a std::path::Path, ErrorCode> {
    // SAFETY: forwarded from the caller.
    Ok(std::path::Path::new(unsafe { c_text(ptr) }?))
}

/// Fills a `malloc`ed buffer of `size` bytes with `fill`; frees it again if
/// `fill` fails. A zero-size result still gets a unique, freeable pointer.
fn malloc_filled(
    size: u64,
    fill: impl FnOnce(&mut [u8]) -> Result<(), ErrorCode>,
) -> Result<(*mut u8, usize), ErrorCode> {
    let size = usize::try_from(size).map_err(|_| ErrorCode::OutOfMemory)?;
    // SAFETY: plain allocation; checked for null below.
    let ptr = unsafe { libc::malloc(size.max(1)) }.cast::<u8>();
    if ptr.is_null() {
        return Err(ErrorCode::OutOfMemory);
    }
    // SAFETY: `ptr` is a fresh allocation of at least `size` bytes, zeroed
    // first so the slice never exposes uninitialised memory.
    let buffer = unsafe {
        std::ptr::write_bytes(ptr, 0, size);
        std::slice::from_raw_parts_mut(ptr, size)
    };
    match fill(buffer) {
        Ok(()) => Ok((ptr, size)),
        Err(code) => {
            // SAFETY: allocated above with malloc and not handed out.
            unsafe { libc::free(ptr.cast()) };
            Err(code)
        }
    }
}
