/*
 * Exercises every function of rocm_kpack/kpack.h through the shared (or
 * static) library. Driven by crates/rocm-kpack/tests/c_api.rs, which builds the
 * inputs and checks the output.
 *
 *   kpack_api_test archive NOOP.kpack ZSTD.kpack
 *       the archive API on the reference fixtures; prints "archive ok"
 *   kpack_api_test load BINARY KERNEL_NAME BUNDLE PATHS ARCH...
 *       builds a marker (PATHS comma-separated) and loads through a new
 *       cache; prints "OK <code object text>" or "ERR <code>"
 *   kpack_api_test load-raw BINARY BUNDLE HEX ARCH...
 *       the same with marker bytes given in hex
 *   kpack_api_test discover LIBRARY SYMBOL
 *       kpack_discover_binary_path on this executable, a dlopen'ed
 *       library, an anonymous mapping and a short buffer; prints
 *       "discover ok"
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rocm_kpack/kpack.h"

#include "check.h"

/* ---- archive mode ------------------------------------------------------ */

static int starts_with(const void* data, size_t size, const char* prefix) {
  size_t n = strlen(prefix);
  return size >= n && memcmp(data, prefix, n) == 0;
}

static void check_kernel(kpack_archive_t archive, const char* binary,
                         const char* arch, size_t size, const char* prefix,
                         unsigned char tail) {
  void* data = NULL;
  size_t got = 0;
  CHECK_CODE(kpack_get_kernel(archive, binary, arch, &data, &got),
             KPACK_SUCCESS);
  CHECK(got == size);
  CHECK(data != NULL && starts_with(data, got, prefix));
  CHECK(data != NULL && ((unsigned char*)data)[got - 1] == tail);
  kpack_free_kernel(data);
}

struct enum_state {
  int calls;
  int stop_after;
  char seen[4][32];
};

static bool on_arch(const char* arch, void* user_data) {
  struct enum_state* state = (struct enum_state*)user_data;
  if (state->calls < 4) {
    snprintf(state->seen[state->calls], sizeof state->seen[0], "%s", arch);
  }
  state->calls++;
  return state->calls < state->stop_after;
}

static void archive_mode(const char* noop_path, const char* zstd_path) {
  kpack_archive_t noop = NULL;
  kpack_archive_t zstd = NULL;
  size_t count = 0;
  const char* name = NULL;
  void* data = NULL;
  size_t size = 0;

  CHECK_CODE(kpack_open(NULL, &noop), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_open(noop_path, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_open("/nonexistent/none.kpack", &noop),
             KPACK_ERROR_FILE_NOT_FOUND);
  CHECK_CODE(kpack_open(noop_path, &noop), KPACK_SUCCESS);
  CHECK_CODE(kpack_open(zstd_path, &zstd), KPACK_SUCCESS);

  /* Architectures. */
  CHECK_CODE(kpack_get_architecture_count(noop, &count), KPACK_SUCCESS);
  CHECK(count == 2);
  CHECK_CODE(kpack_get_architecture(noop, 0, &name), KPACK_SUCCESS);
  CHECK(strcmp(name, "gfx900") == 0);
  CHECK_CODE(kpack_get_architecture(noop, 1, &name), KPACK_SUCCESS);
  CHECK(strcmp(name, "gfx906") == 0);
  CHECK_CODE(kpack_get_architecture(noop, 2, &name),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_architecture(noop, 0, NULL),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_architecture_count(NULL, &count),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_architecture_count(noop, NULL),
             KPACK_ERROR_INVALID_ARGUMENT);

  /* Binaries, sorted. */
  CHECK_CODE(kpack_get_binary_count(zstd, &count), KPACK_SUCCESS);
  CHECK(count == 2);
  CHECK_CODE(kpack_get_binary(zstd, 0, &name), KPACK_SUCCESS);
  CHECK(strcmp(name, "bin/hiptest#0") == 0);
  CHECK_CODE(kpack_get_binary(zstd, 1, &name), KPACK_SUCCESS);
  CHECK(strcmp(name, "lib/libhip.so#0") == 0);
  CHECK_CODE(kpack_get_binary(zstd, 2, &name), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_binary(NULL, 0, &name), KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_binary_count(zstd, NULL), KPACK_ERROR_INVALID_ARGUMENT);

  /* Kernels, uncompressed and zstd. */
  check_kernel(noop, "lib/libtest.so#0", "gfx900", 119, "KERNEL1_GFX900_DATA",
               0);
  check_kernel(noop, "lib/libtest.so#0", "gfx906", 219, "KERNEL2_GFX906_DATA",
               0);
  check_kernel(noop, "bin/testapp#0", "gfx900", 168, "KERNEL3_APP_GFX900",
               0xff);
  check_kernel(zstd, "lib/libhip.so#0", "gfx1100", 1019,
               "HIP_KERNEL_GFX1100_AAAA", 'B');
  check_kernel(zstd, "lib/libhip.so#0", "gfx1101", 619,
               "HIP_KERNEL_GFX1101_XXXX", 'Y');
  check_kernel(zstd, "bin/hiptest#0", "amdgcn-amd-amdhsa--gfx1100", 1018,
               "TEST_APP_KERNEL___BBBB", 0x42);
  CHECK_CODE(kpack_get_kernel(zstd, "bin/hiptest#0", "gfx1101", &data, &size),
             KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK_CODE(kpack_get_kernel(zstd, "bin/nothing#0", "gfx1100", &data, &size),
             KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK_CODE(kpack_get_kernel(zstd, NULL, "gfx1100", &data, &size),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_kernel(zstd, "bin/hiptest#0", "gfx1100", NULL, &size),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_get_kernel(NULL, "bin/hiptest#0", "gfx1100", &data, &size),
             KPACK_ERROR_INVALID_ARGUMENT);
  kpack_free_kernel(NULL);

  /* Enumeration, complete and stopped early. */
  {
    struct enum_state all = {0, 100, {{0}}};
    struct enum_state first = {0, 1, {{0}}};
    CHECK_CODE(kpack_enumerate_architectures(zstd_path, on_arch, &all),
               KPACK_SUCCESS);
    CHECK(all.calls == 2);
    CHECK(strcmp(all.seen[0], "gfx1100") == 0);
    CHECK(strcmp(all.seen[1], "gfx1101") == 0);
    CHECK_CODE(kpack_enumerate_architectures(zstd_path, on_arch, &first),
               KPACK_SUCCESS);
    CHECK(first.calls == 1);
    CHECK_CODE(kpack_enumerate_architectures(NULL, on_arch, &all),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_enumerate_architectures(zstd_path, NULL, &all),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(
        kpack_enumerate_architectures("/nonexistent/x.kpack", on_arch, &all),
        KPACK_ERROR_FILE_NOT_FOUND);
  }

  /* Cache lifecycle and loader argument checks. */
  {
    kpack_cache_t cache = NULL;
    const char* arches[] = {"gfx1100"};
    static const unsigned char marker[] = {0x80};
    CHECK_CODE(kpack_cache_create(NULL), KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_cache_create(&cache), KPACK_SUCCESS);
    CHECK_CODE(kpack_load_code_object(NULL, marker, "/x", 0, arches, 1, &data,
                                      &size),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_load_code_object(cache, NULL, "/x", 0, arches, 1, &data,
                                      &size),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_load_code_object(cache, marker, NULL, 0, arches, 1, &data,
                                      &size),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_load_code_object(cache, marker, "/x", 0, NULL, 1, &data,
                                      &size),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_load_code_object(cache, marker, "/x", 0, arches, 0, &data,
                                      &size),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_load_code_object(cache, marker, "/x", 0, arches, 1, NULL,
                                      &size),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_load_code_object(cache, marker, "/x", 0, arches, 1, &data,
                                      NULL),
               KPACK_ERROR_INVALID_ARGUMENT);
    /* An empty map is not a marker. */
    CHECK_CODE(kpack_load_code_object(cache, marker, "/x", 0, arches, 1, &data,
                                      &size),
               KPACK_ERROR_INVALID_METADATA);
    kpack_free_code_object(NULL);
    kpack_cache_destroy(cache);
    kpack_cache_destroy(NULL);
  }

  kpack_close(noop);
  kpack_close(zstd);
  kpack_close(NULL);
  if (failures == 0) {
    printf("archive ok\n");
  }
}

/* ---- load mode --------------------------------------------------------- */

/* Appends a MessagePack str. */
static size_t put_str(unsigned char* out, const char* s) {
  size_t n = strlen(s);
  size_t at = 0;
  if (n < 32) {
    out[at++] = (unsigned char)(0xa0 | n);
  } else {
    out[at++] = 0xd9;
    out[at++] = (unsigned char)n;
  }
  memcpy(out + at, s, n);
  return at + n;
}

static size_t build_marker(unsigned char* out, const char* kernel_name,
                           char* paths) {
  const char* list[15];
  size_t count = 0;
  size_t at = 0;
  for (char* p = strtok(paths, ","); p != NULL && count < 15;
       p = strtok(NULL, ",")) {
    list[count++] = p;
  }
  out[at++] = 0x82; /* map of 2 */
  at += put_str(out + at, "kpack_search_paths");
  out[at++] = (unsigned char)(0x90 | count);
  for (size_t i = 0; i < count; i++) {
    at += put_str(out + at, list[i]);
  }
  at += put_str(out + at, "kernel_name");
  at += put_str(out + at, kernel_name);
  return at;
}

static void load_and_print(const void* marker, const char* binary,
                           unsigned bundle, const char* const* arches,
                           size_t count) {
  kpack_cache_t cache = NULL;
  void* data = NULL;
  size_t size = 0;
  kpack_error_t code;
  CHECK_CODE(kpack_cache_create(&cache), KPACK_SUCCESS);
  code = kpack_load_code_object(cache, marker, binary, bundle, arches, count,
                                &data, &size);
  if (code == KPACK_SUCCESS) {
    /* Twice through the same cache: the archive is reused. */
    void* again = NULL;
    size_t again_size = 0;
    CHECK_CODE(kpack_load_code_object(cache, marker, binary, bundle, arches,
                                      count, &again, &again_size),
               KPACK_SUCCESS);
    CHECK(again_size == size && memcmp(again, data, size) == 0);
    kpack_free_code_object(again);
    printf("OK %.*s\n", (int)size, (const char*)data);
  } else {
    CHECK(data == NULL);
    printf("ERR %d\n", (int)code);
  }
  kpack_free_code_object(data);
  kpack_cache_destroy(cache);
}

static void load_mode(int argc, char** argv) {
  static unsigned char marker[65536];
  size_t len;
  if (argc < 7) {
    fprintf(stderr, "usage: load BINARY KERNEL_NAME BUNDLE PATHS ARCH...\n");
    exit(2);
  }
  len = build_marker(marker, argv[3], argv[5]);
  CHECK(len < sizeof marker);
  load_and_print(marker, argv[2], (unsigned)strtoul(argv[4], NULL, 10),
                 (const char* const*)(argv + 6), (size_t)(argc - 6));
}

static void load_raw_mode(int argc, char** argv) {
  static unsigned char marker[65536];
  const char* hex;
  size_t len = 0;
  if (argc < 6) {
    fprintf(stderr, "usage: load-raw BINARY BUNDLE HEX ARCH...\n");
    exit(2);
  }
  hex = argv[4];
  while (hex[0] && hex[1] && len < sizeof marker) {
    unsigned value = 0;
    sscanf(hex, "%2x", &value);
    marker[len++] = (unsigned char)value;
    hex += 2;
  }
  load_and_print(marker, argv[2], (unsigned)strtoul(argv[3], NULL, 10),
                 (const char* const*)(argv + 5), (size_t)(argc - 5));
}

/* ---- discover mode ----------------------------------------------------- */

static int in_executable = 42;

static void discover_mode(const char* library, const char* symbol) {
  char path[PATH_MAX];
  char expected[PATH_MAX];
  size_t offset = 0;
  void* handle;
  void* address;
  void* anonymous;

  /* An address in this executable's data. */
  CHECK_CODE(kpack_discover_binary_path(&in_executable, path, sizeof path,
                                        &offset),
             KPACK_SUCCESS);
  CHECK(realpath("/proc/self/exe", expected) != NULL);
  CHECK(strcmp(path, expected) == 0);
  CHECK(offset > 0);
  /* Offset is optional. */
  CHECK_CODE(
      kpack_discover_binary_path(&in_executable, path, sizeof path, NULL),
      KPACK_SUCCESS);

  /* A symbol in a dlopen'ed library (its path may contain spaces). */
  handle = dlopen(library, RTLD_NOW);
  CHECK(handle != NULL);
  if (handle != NULL) {
    address = dlsym(handle, symbol);
    CHECK(address != NULL);
    CHECK_CODE(kpack_discover_binary_path(address, path, sizeof path, &offset),
               KPACK_SUCCESS);
    CHECK(realpath(library, expected) != NULL);
    CHECK(strcmp(path, expected) == 0);
    /* Too small for the path and its NUL. */
    CHECK_CODE(kpack_discover_binary_path(address, path, strlen(expected),
                                          &offset),
               KPACK_ERROR_INVALID_ARGUMENT);
    CHECK_CODE(kpack_discover_binary_path(address, path,
                                          strlen(expected) + 1, &offset),
               KPACK_SUCCESS);
  }

  /* An anonymous mapping belongs to no file. */
  anonymous = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(anonymous != MAP_FAILED);
  CHECK_CODE(kpack_discover_binary_path(anonymous, path, sizeof path, &offset),
             KPACK_ERROR_PATH_DISCOVERY_FAILED);
  munmap(anonymous, 4096);

  CHECK_CODE(kpack_discover_binary_path(NULL, path, sizeof path, &offset),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_discover_binary_path(&in_executable, NULL, 10, &offset),
             KPACK_ERROR_INVALID_ARGUMENT);
  if (failures == 0) {
    printf("discover ok\n");
  }
}

int main(int argc, char** argv) {
  if (argc >= 4 && strcmp(argv[1], "archive") == 0) {
    archive_mode(argv[2], argv[3]);
  } else if (argc >= 2 && strcmp(argv[1], "load") == 0) {
    load_mode(argc, argv);
  } else if (argc >= 2 && strcmp(argv[1], "load-raw") == 0) {
    load_raw_mode(argc, argv);
  } else if (argc >= 4 && strcmp(argv[1], "discover") == 0) {
    discover_mode(argv[2], argv[3]);
  } else {
    fprintf(stderr, "usage: see the comment at the top of kpack_api_test.c\n");
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
