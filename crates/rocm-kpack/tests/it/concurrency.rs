//! Many threads on one archive handle and one cache, through the C ABI,
//! every result checked against the bytes written.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use crate::common::*;
use fs_err as fs;
use rocm_kpack::capi::{self, KpackArchive, KpackCache};
use rocm_kpack::{Compression, ErrorCode, Marker};

const THREADS: usize = 8;
const ITERATIONS: usize = 500;
const BINARIES: usize = 16;
const TARGETS: [&str; 3] = ["gfx1100", "gfx1101", "gfx1102"];

fn code_object(binary: usize, target: usize) -> Vec<u8> {
    let len = 1000 + binary * 997 + target * 5000;
    let mut data = format!("code {binary} {target} ").into_bytes();
    data.extend((0..len).map(|i| ((i * (binary + 3)) % 251) as u8));
    data
}

struct Fixture {
    _context: TestContext,
    archive: CString,
    binary_path: CString,
    marker: Vec<u8>,
}

fn fixture() -> Fixture {
    let context = TestContext::new();
    let keys: Vec<String> = (0..BINARIES)
        .map(|b| format!("lib/libmany.so#{b}"))
        .collect();
    let contents: Vec<_> = (0..BINARIES)
        .flat_map(|b| (0..TARGETS.len()).map(move |t| (b, t)))
        .map(|(b, t)| (keys[b].as_str(), TARGETS[t], code_object(b, t)))
        .collect();
    let bytes = write_archive(Compression::DEFAULT, "gfx110X", &TARGETS, &contents);
    fs::create_dir_all(context.path(".kpack")).unwrap();
    let archive = context.path(".kpack/many_gfx110X.kpack");
    fs::write(&archive, bytes).unwrap();
    let marker = Marker {
        search_paths: vec![".kpack/many_gfx110X.kpack".into()],
        kernel_name: "lib/libmany.so".into(),
    };
    Fixture {
        archive: CString::new(archive.to_str().unwrap()).unwrap(),
        binary_path: CString::new(context.path("libmany.so").to_str().unwrap()).unwrap(),
        marker: marker.to_bytes(),
        _context: context,
    }
}

/// A raw handle shared by threads; the C API allows concurrent calls.
struct Shared<T>(*mut T);
// SAFETY: the C API allows calls on one handle from any thread at once.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as for `Send`: the C API's handles are thread-safe.
unsafe impl<T> Sync for Shared<T> {}

#[test]
fn get_kernel_from_eight_threads_on_one_archive() {
    let fixture = fixture();
    let mut handle: *mut KpackArchive = std::ptr::null_mut();
    assert_eq!(
        // SAFETY: a NUL-terminated path and a place for the handle.
        unsafe { capi::kpack_open(fixture.archive.as_ptr(), &mut handle) },
        ErrorCode::Success
    );
    let archive = Arc::new(Shared(handle));
    let keys: Arc<Vec<CString>> = Arc::new(
        (0..BINARIES)
            .map(|b| CString::new(format!("lib/libmany.so#{b}")).unwrap())
            .collect(),
    );
    let arches: Arc<Vec<CString>> =
        Arc::new(TARGETS.iter().map(|t| CString::new(*t).unwrap()).collect());
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (archive, keys, arches) =
                (Arc::clone(&archive), Arc::clone(&keys), Arc::clone(&arches));
            std::thread::spawn(move || {
                for i in 0..ITERATIONS {
                    let (b, t) = ((thread * 7 + i) % BINARIES, (thread + i) % TARGETS.len());
                    let mut data: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    // SAFETY: the handle is open until every worker is joined; the key and target are NUL-terminated; the out-pointers are this thread's.
                    let code = unsafe {
                        capi::kpack_get_kernel(
                            archive.0,
                            keys[b].as_ptr(),
                            arches[t].as_ptr(),
                            &mut data,
                            &mut size,
                        )
                    };
                    assert_eq!(code, ErrorCode::Success);
                    // SAFETY: on success `data` holds `size` bytes until it is freed.
                    let got = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
                    assert_eq!(got, &code_object(b, t)[..], "thread {thread} iteration {i}");
                    // SAFETY: `data` came from `kpack_get_kernel` and is freed once.
                    unsafe { capi::kpack_free_kernel(data) };
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    // SAFETY: every worker has been joined: nothing uses the handle after this.
    unsafe { capi::kpack_close(handle) };
}

#[test]
fn load_code_object_from_eight_threads_on_one_cache() {
    let fixture = Arc::new(fixture());
    let mut handle: *mut KpackCache = std::ptr::null_mut();
    assert_eq!(
        // SAFETY: a place for the handle.
        unsafe { capi::kpack_cache_create(&mut handle) },
        ErrorCode::Success
    );
    let cache = Arc::new(Shared(handle));
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (cache, fixture) = (Arc::clone(&cache), Arc::clone(&fixture));
            std::thread::spawn(move || {
                // Each thread asks for one target first, then falls back.
                let arches: Vec<CString> = ["gfx1150", TARGETS[thread % TARGETS.len()]]
                    .iter()
                    .map(|t| CString::new(*t).unwrap())
                    .collect();
                let arch_ptrs: Vec<*const c_char> = arches.iter().map(|a| a.as_ptr()).collect();
                for i in 0..ITERATIONS {
                    let bundle = (thread * 3 + i) % BINARIES;
                    let mut data: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    // SAFETY: the cache lives until every worker is joined; the marker, path and target list are valid and NUL-terminated; the out-pointers are this thread's.
                    let code = unsafe {
                        capi::kpack_load_code_object(
                            cache.0,
                            fixture.marker.as_ptr().cast(),
                            fixture.binary_path.as_ptr(),
                            bundle as u32,
                            arch_ptrs.as_ptr(),
                            arch_ptrs.len(),
                            &mut data,
                            &mut size,
                        )
                    };
                    assert_eq!(code, ErrorCode::Success, "thread {thread} iteration {i}");
                    // SAFETY: on success `data` holds `size` bytes until it is freed.
                    let got = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
                    assert_eq!(got, &code_object(bundle, thread % TARGETS.len())[..]);
                    // SAFETY: `data` came from `kpack_load_code_object` and is freed once.
                    unsafe { capi::kpack_free_code_object(data) };
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    // SAFETY: every worker has been joined: nothing uses the cache after this.
    unsafe { capi::kpack_cache_destroy(handle) };
}
