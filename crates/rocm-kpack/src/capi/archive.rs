//! Archive handles: `kpack_open`, the query functions and `kpack_get_kernel`.

use std::ffi::{c_char, c_void, CString};
use std::sync::OnceLock;

use super::{
    c_path, c_str, c_text, guard, guard_void, malloc_filled, required, required_mut, KpackError,
};
use crate::error::ErrorCode;
use crate::read::Archive;
use kpack_gpu::target::Target;

/// The object behind a `kpack_archive_t`.
#[derive(Debug)]
pub struct KpackArchive {
    archive: Archive,
    arch_names: Vec<CString>,
    /// Binary keys sorted, built on first query.
    binary_names: OnceLock<Vec<CString>>,
}

impl KpackArchive {
    fn open(path: &std::path::Path) -> Result<KpackArchive, ErrorCode> {
        let archive = Archive::open(path).map_err(|e| e.code())?;
        let arch_names = archive
            .architectures()
            .iter()
            .map(|t| CString::new(t.to_string()).map_err(|_| ErrorCode::InvalidFormat))
            .collect::<Result<_, _>>()?;
        Ok(KpackArchive {
            archive,
            arch_names,
            binary_names: OnceLock::new(),
        })
    }

    fn binary_names(&self) -> &[CString] {
        self.binary_names.get_or_init(|| {
            let mut names: Vec<CString> = self
                .archive
                .binaries()
                // A key with a NUL byte cannot be named through C at all.
                .filter_map(|name| CString::new(name).ok())
                .collect();
            names.sort();
            names
        })
    }
}

/// Borrows the archive behind a handle.
///
/// # Safety
/// `handle` must be null or a live handle from `kpack_open`.
unsafe fn archive_ref<'a>(handle: *mut KpackArchive) -> Result<&'a KpackArchive, ErrorCode> {
    let handle = required(handle.cast_const())?;
    // SAFETY: a live handle per the caller's contract.
    Ok(unsafe { &*handle })
}

/// Stores the length of one of the archive's name lists.
///
/// # Safety
/// `archive` null or live; `count` null or writable.
unsafe fn write_count(
    archive: *mut KpackArchive,
    count: *mut usize,
    list: impl FnOnce(&KpackArchive) -> &[CString],
) -> KpackError {
    guard(|| {
        // SAFETY: per this function's contract.
        let archive = unsafe { archive_ref(archive) }?;
        let count = required_mut(count)?;
        // SAFETY: non-null and writable per the contract.
        unsafe { count.write(list(archive).len()) };
        Ok(())
    })
}

/// Stores a pointer to the `index`-th entry of one of the archive's name
/// lists; out of range is `KPACK_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `archive` null or live; `out` null or writable.
unsafe fn write_name(
    archive: *mut KpackArchive,
    index: usize,
    out: *mut *const c_char,
    list: impl FnOnce(&KpackArchive) -> &[CString],
) -> KpackError {
    guard(|| {
        // SAFETY: per this function's contract.
        let archive = unsafe { archive_ref(archive) }?;
        let out = required_mut(out)?;
        let name = list(archive).get(index).ok_or(ErrorCode::InvalidArgument)?;
        // SAFETY: non-null and writable per the contract.
        unsafe { out.write(name.as_ptr()) };
        Ok(())
    })
}

/// Opens and validates an archive.
///
/// # Safety
/// `path` must be null or a NUL-terminated string; `out` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_open(
    path: *const c_char,
    out: *mut *mut KpackArchive,
) -> KpackError {
    guard(|| {
        let out = required_mut(out)?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_path(path) }?;
        let archive = Box::new(KpackArchive::open(path)?);
        // SAFETY: `out` is non-null and writable per the contract.
        unsafe { out.write(Box::into_raw(archive)) };
        Ok(())
    })
}

/// Closes an archive; null is ignored.
///
/// # Safety
/// `archive` must be null or a handle from `kpack_open` not used afterwards
/// and not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn kpack_close(archive: *mut KpackArchive) {
    guard_void(|| {
        if !archive.is_null() {
            // SAFETY: ownership returns from C per the contract.
            drop(unsafe { Box::from_raw(archive) });
        }
    })
}

/// Stores the number of targets in `gfx_arches`.
///
/// # Safety
/// `archive` null or live; `count` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_get_architecture_count(
    archive: *mut KpackArchive,
    count: *mut usize,
) -> KpackError {
    // SAFETY: per this function's contract.
    unsafe { write_count(archive, count, |a| &a.arch_names) }
}

/// Stores a pointer to the `index`-th target name, owned by the archive.
///
/// # Safety
/// `archive` null or live; `arch` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_get_architecture(
    archive: *mut KpackArchive,
    index: usize,
    arch: *mut *const c_char,
) -> KpackError {
    // SAFETY: per this function's contract.
    unsafe { write_name(archive, index, arch, |a| &a.arch_names) }
}

/// Stores the number of binary keys.
///
/// # Safety
/// `archive` null or live; `count` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_get_binary_count(
    archive: *mut KpackArchive,
    count: *mut usize,
) -> KpackError {
    // SAFETY: per this function's contract.
    unsafe { write_count(archive, count, KpackArchive::binary_names) }
}

/// Stores a pointer to the `index`-th binary key in sorted order, owned by
/// the archive.
///
/// # Safety
/// `archive` null or live; `binary` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_get_binary(
    archive: *mut KpackArchive,
    index: usize,
    binary: *mut *const c_char,
) -> KpackError {
    // SAFETY: per this function's contract.
    unsafe { write_name(archive, index, binary, KpackArchive::binary_names) }
}

/// Returns a `malloc`ed copy of one code object, decompressed straight into
/// it; free it with `kpack_free_kernel`.
///
/// # Safety
/// `archive` null or live; strings null or NUL-terminated; outputs null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kpack_get_kernel(
    archive: *mut KpackArchive,
    binary: *const c_char,
    arch: *const c_char,
    data: *mut *mut c_void,
    size: *mut usize,
) -> KpackError {
    guard(|| {
        // SAFETY: per this function's contract.
        let archive = unsafe { archive_ref(archive) }?;
        let data = required_mut(data)?;
        let size = required_mut(size)?;
        // SAFETY: per this function's contract.
        let (binary, arch) = unsafe { (c_str(binary)?, c_text(arch)?) };
        // A name that is not UTF-8 or not a target cannot be in the archive.
        let binary = binary.to_str().map_err(|_| ErrorCode::KernelNotFound)?;
        let target = Target::parse(arch).map_err(|_| ErrorCode::KernelNotFound)?;
        let kernel = archive
            .archive
            .find(binary, &target)
            .map_err(|e| e.code())?;
        kernel.check_frame().map_err(|e| e.code())?;
        let (ptr, len) = malloc_filled(kernel.size(), |buffer| {
            kernel.read_into(buffer).map_err(|e| e.code())
        })?;
        // SAFETY: non-null and writable per the contract.
        unsafe {
            data.write(ptr.cast());
            size.write(len);
        }
        Ok(())
    })
}

/// Frees a buffer from `kpack_get_kernel`; null is ignored.
///
/// # Safety
/// `data` must be null or a pointer from `kpack_get_kernel` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn kpack_free_kernel(data: *mut c_void) {
    // SAFETY: allocated with malloc per the contract; free(NULL) is a no-op.
    unsafe { libc::free(data) }
}
