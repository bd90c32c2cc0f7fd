/*
 * rocm_kpack: load GPU code objects from kpack archives.
 *
 * A drop-in for ROCm's reference librocm_kpack: the same function names,
 * signatures and error numbers. Link with -lrocm_kpack (pkg-config
 * rocm_kpack). Compiles as C11 and C++17.
 *
 * Every function returns an error code instead of aborting; no exception or
 * unwinding ever crosses this interface. Buffers returned to the caller are
 * allocated with malloc and must be released with the matching free
 * function. Strings returned by query functions are owned by the archive
 * and valid until kpack_close().
 *
 * On Windows (rocm_kpack.dll) paths, given and returned, are UTF-8, with
 * '\\' or '/' and perhaps a drive letter, and ROCM_KPACK_PATH and
 * ROCM_KPACK_PATH_PREFIX separate their entries with ';' instead of ':'.
 */

#ifndef ROCM_KPACK_KPACK_H
#define ROCM_KPACK_KPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handle to an open archive. */
typedef struct kpack_archive* kpack_archive_t;

/* Opaque handle to a cache of open archives, used by the loader. */
typedef struct kpack_cache* kpack_cache_t;

typedef enum {
  KPACK_SUCCESS = 0,
  KPACK_ERROR_INVALID_ARGUMENT = 1,
  KPACK_ERROR_FILE_NOT_FOUND = 2,
  KPACK_ERROR_INVALID_FORMAT = 3,
  KPACK_ERROR_UNSUPPORTED_VERSION = 4,
  KPACK_ERROR_KERNEL_NOT_FOUND = 5,
  KPACK_ERROR_DECOMPRESSION_FAILED = 6,
  KPACK_ERROR_OUT_OF_MEMORY = 7,
  KPACK_ERROR_NOT_IMPLEMENTED = 8,
  /* I/O failures; also reported for an internal error, which is a bug. */
  KPACK_ERROR_IO_ERROR = 9,
  KPACK_ERROR_MSGPACK_PARSE_FAILED = 10,
  KPACK_ERROR_PATH_DISCOVERY_FAILED = 11,
  KPACK_ERROR_INVALID_METADATA = 12,
  KPACK_ERROR_ARCHIVE_NOT_FOUND = 13,
  KPACK_ERROR_ARCH_NOT_FOUND = 14
} kpack_error_t;

/* Called once per architecture by kpack_enumerate_architectures; return
 * false to stop. */
typedef bool (*kpack_arch_callback_t)(const char* arch, void* user_data);

/* ---- Archives ---------------------------------------------------------- */

/* Opens and validates an archive (header, table of contents, every stored
 * range). NULL arguments: INVALID_ARGUMENT; missing file: FILE_NOT_FOUND;
 * a path that is not a regular file (a FIFO, directory or device, refused
 * without waiting on it) and other I/O failures: IO_ERROR; malformed
 * contents: INVALID_FORMAT, UNSUPPORTED_VERSION or MSGPACK_PARSE_FAILED. */
kpack_error_t kpack_open(const char* path, kpack_archive_t* archive);

/* Closes an archive. NULL is ignored. Must not race with other use. */
void kpack_close(kpack_archive_t archive);

/* The targets the archive serves (its gfx_arches list). An index out of
 * range is INVALID_ARGUMENT. */
kpack_error_t kpack_get_architecture_count(kpack_archive_t archive,
                                           size_t* count);
kpack_error_t kpack_get_architecture(kpack_archive_t archive, size_t index,
                                     const char** arch);

/* The binary keys (e.g. "lib/librocrand.so.1.1#0"), sorted. */
kpack_error_t kpack_get_binary_count(kpack_archive_t archive, size_t* count);
kpack_error_t kpack_get_binary(kpack_archive_t archive, size_t index,
                               const char** binary);

/* Returns a malloc'd copy of the code object for a binary key and an exact
 * target; free it with kpack_free_kernel(). Missing key or target:
 * KERNEL_NOT_FOUND; corrupt compressed data: DECOMPRESSION_FAILED. Safe to
 * call from many threads on one archive. */
kpack_error_t kpack_get_kernel(kpack_archive_t archive,
                               const char* binary_name, const char* arch,
                               void** kernel_data, size_t* kernel_size);

/* Frees a buffer from kpack_get_kernel(). NULL is ignored. */
void kpack_free_kernel(void* kernel_data);

/* ---- Loader ------------------------------------------------------------ */

/* Creates a cache. ROCM_KPACK_PATH, ROCM_KPACK_PATH_PREFIX,
 * ROCM_KPACK_DISABLE and ROCM_KPACK_DEBUG are read now, once. */
kpack_error_t kpack_cache_create(kpack_cache_t* cache);

/* Destroys a cache and closes its archives. NULL is ignored. Must not race
 * with other use. */
void kpack_cache_destroy(kpack_cache_t cache);

/* Writes the path of the file mapped at `address_in_binary` (from
 * /proc/self/maps) into `path_out`, NUL-terminated, and the matching file
 * offset into `offset_out` if it is not NULL. Buffer too small:
 * INVALID_ARGUMENT; no file mapped there: PATH_DISCOVERY_FAILED. On
 * Windows: the file of the DLL or EXE holding the address, and the
 * address's offset from the module's base. */
kpack_error_t kpack_discover_binary_path(const void* address_in_binary,
                                         char* path_out, size_t path_out_size,
                                         size_t* offset_out);

/* Loads the code object of bundle `bundle_index` of the binary at
 * `binary_path`, whose .rocm_kpack_ref marker is at `metadata`, for the
 * first architecture of `arch_list` (in priority order, each with its
 * compatible feature variants) that a candidate archive serves. Free the
 * result with kpack_free_code_object(). Loading disabled: NOT_IMPLEMENTED;
 * bad marker: INVALID_METADATA; no archive could be opened:
 * ARCHIVE_NOT_FOUND; none serves a requested target: ARCH_NOT_FOUND. Safe
 * to call from many threads on one cache. */
kpack_error_t kpack_load_code_object(kpack_cache_t cache, const void* metadata,
                                     const char* binary_path,
                                     uint32_t bundle_index,
                                     const char* const* arch_list,
                                     size_t arch_count, void** code_object_out,
                                     size_t* code_object_size_out);

/* Frees a buffer from kpack_load_code_object(). NULL is ignored. */
void kpack_free_code_object(void* code_object);

/* Opens the archive at `archive_path` and calls `callback` with each target
 * it serves until the callback returns false. */
kpack_error_t kpack_enumerate_architectures(const char* archive_path,
                                            kpack_arch_callback_t callback,
                                            void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_KPACK_H */
