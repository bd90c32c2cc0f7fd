//! The loader API: caches, `kpack_load_code_object`, path discovery and
//! architecture enumeration.

use std::ffi::{c_char, c_void, CString};
use std::path::Path;

use super::{c_path, c_text, guard, guard_void, malloc_filled, required, required_mut, KpackError};
use crate::discover::binary_path_of;
use crate::error::ErrorCode;
use crate::loader::{Loader, Marker};
use crate::read::Archive;
use kpack_gpu::target::Target;

/// The object behind a `kpack_cache_t`.
#[derive(Debug)]
pub struct KpackCache {
    loader: Loader,
}

/// Callback of `kpack_enumerate_architectures`; return false to stop.
pub type KpackArchCallback =
    Option<unsafe extern "C" fn(arch: *const c_char, user_data: *mut c_void) -> bool>;

/// Creates a cache, reading the `ROCM_KPACK_*` environment now.
///
/// # Safety
/// `out` must be null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_cache_create(out: *mut *mut KpackCache) -> KpackError {
    guard(|| {
        let out = required_mut(out)?;
        let cache = Box::new(KpackCache {
            loader: Loader::from_env(),
        });
        // SAFETY: non-null and writable per the contract.
        unsafe { out.write(Box::into_raw(cache)) };
        Ok(())
    })
}

/// Destroys a cache and closes its archives; null is ignored.
///
/// # Safety
/// `cache` must be null or a handle from `kpack_cache_create` that no other
/// thread is using and that is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn kpack_cache_destroy(cache: *mut KpackCache) {
    guard_void(|| {
        if !cache.is_null() {
            // SAFETY: ownership returns from C per the contract.
            drop(unsafe { Box::from_raw(cache) });
        }
    })
}

/// Writes the path of the file mapped at `address` (NUL-terminated) and,
/// if `offset_out` is not null, the file offset `address` corresponds to.
///
/// # Safety
/// `path_out` must be null or writable for `path_out_size` bytes;
/// `offset_out` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_discover_binary_path(
    address: *const c_void,
    path_out: *mut c_char,
    path_out_size: usize,
    offset_out: *mut usize,
) -> KpackError {
    guard(|| {
        required(address)?;
        let path_out = required_mut(path_out)?;
        let (path, offset) = binary_path_of(address as usize).map_err(|e| e.code())?;
        let bytes = path_bytes(&path).ok_or(ErrorCode::PathDiscoveryFailed)?;
        if bytes.len() >= path_out_size {
            return Err(ErrorCode::InvalidArgument);
        }
        // SAFETY: `path_out` holds `path_out_size` > len bytes per the
        // contract.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), path_out.cast::<u8>(), bytes.len());
            path_out.add(bytes.len()).write(0);
        }
        if !offset_out.is_null() {
            let offset = usize::try_from(offset).map_err(|_| ErrorCode::PathDiscoveryFailed)?;
            // SAFETY: non-null and writable per the contract.
            unsafe { offset_out.write(offset) };
        }
        Ok(())
    })
}

/// A path as the C API hands it out: its bytes on Unix.
#[cfg(unix)]
fn path_bytes(path: &Path) -> Option<&[u8]> {
    use std::os::unix::ffi::OsStrExt;
    Some(path.as_os_str().as_bytes())
}

/// A path as the C API hands it out: UTF-8 elsewhere (Windows), as the
/// C API's path arguments are; `None` for a name UTF-8 cannot spell (an
/// unpaired surrogate).
#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Option<&[u8]> {
    path.to_str().map(str::as_bytes)
}

/// Loads the code object of bundle `bundle_index` of the binary at
/// `binary_path`, whose marker is at `metadata`, for the first of
/// `arch_list` an archive has code for. Free it with
/// `kpack_free_code_object`.
///
/// # Safety
/// `cache` null or live; `metadata` null or pointing at a marker; strings
/// null or NUL-terminated; `arch_list` null or `arch_count` entries;
/// outputs null or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kpack_load_code_object(
    cache: *mut KpackCache,
    metadata: *const c_void,
    binary_path: *const c_char,
    bundle_index: u32,
    arch_list: *const *const c_char,
    arch_count: usize,
    out: *mut *mut c_void,
    out_size: *mut usize,
) -> KpackError {
    guard(|| {
        let cache = required(cache.cast_const())?;
        // SAFETY: a live handle per the contract.
        let loader = unsafe { &(*cache).loader };
        required(metadata)?;
        required(arch_list)?;
        let out = required_mut(out)?;
        let out_size = required_mut(out_size)?;
        // SAFETY: per this function's contract.
        let binary_path = unsafe { c_path(binary_path) }?;
        if arch_count == 0 {
            return Err(ErrorCode::InvalidArgument);
        }
        // SAFETY: `arch_list` holds `arch_count` pointers per the contract.
        let arch_ptrs = unsafe { std::slice::from_raw_parts(arch_list, arch_count) };
        let arches = arch_ptrs
            .iter()
            .map(|&ptr| {
                // SAFETY: each entry null or NUL-terminated per the contract.
                unsafe { c_text(ptr) }
                    .and_then(|s| Target::parse(s).map_err(|_| ErrorCode::InvalidArgument))
            })
            .collect::<Result<Vec<Target>, _>>()?;
        if loader.config().disabled {
            return Err(ErrorCode::NotImplemented);
        }
        // SAFETY: `metadata` points at a marker per the contract.
        let marker = unsafe { Marker::from_ptr(metadata.cast()) }.map_err(|e| e.code())?;
        let located = loader
            .locate(&marker, binary_path, bundle_index, &arches)
            .map_err(|e| e.code())?;
        let kernel = located.kernel().map_err(|e| e.code())?;
        kernel.check_frame().map_err(|e| e.code())?;
        let (ptr, len) = malloc_filled(kernel.size(), |buffer| {
            kernel.read_into(buffer).map_err(|e| e.code())
        })?;
        // SAFETY: non-null and writable per the contract.
        unsafe {
            out.write(ptr.cast());
            out_size.write(len);
        }
        Ok(())
    })
}

/// Frees a buffer from `kpack_load_code_object`; null is ignored.
///
/// # Safety
/// `code_object` must be null or a pointer from `kpack_load_code_object`
/// not yet freed.
#[no_mangle]
pub unsafe extern "C" fn kpack_free_code_object(code_object: *mut c_void) {
    // SAFETY: allocated with malloc per the contract; free(NULL) is a no-op.
    unsafe { libc::free(code_object) }
}

/// Opens the archive at `path` and calls `callback` with each target name
/// until it returns false.
///
/// # Safety
/// `path` null or NUL-terminated; `callback` null or a function safe to
/// call with a target name and `user_data`.
#[no_mangle]
pub unsafe extern "C" fn kpack_enumerate_architectures(
    path: *const c_char,
    callback: KpackArchCallback,
    user_data: *mut c_void,
) -> KpackError {
    guard(|| {
        let callback = callback.ok_or(ErrorCode::InvalidArgument)?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_path(path) }?;
        let archive = Archive::open(path).map_err(|e| e.code())?;
        for target in archive.architectures() {
            let name = CString::new(target.to_string()).map_err(|_| ErrorCode::InvalidFormat)?;
            // SAFETY: the callback's contract is the caller's.
            if !unsafe { callback(name.as_ptr(), user_data) } {
                break;
            }
        }
        Ok(())
    })
}
