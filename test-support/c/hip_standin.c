/*
 * A stand-in for the HIP runtime (libamdhip64): what a split binary's
 * static constructor calls. __hipRegisterFatBinary takes the HIPK wrapper,
 * finds the binary's path from the marker pointer and loads the code
 * object through librocm_kpack for the agent targets in
 * $KPACK_STANDIN_ARCHES (comma-separated). Each registration N writes
 * $KPACK_STANDIN_OUT/N.co (the code object) or N.err (the error number).
 * Every other imported function is a generated no-op.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack.h"

struct wrapper {
  uint32_t magic;
  uint32_t version;
  const void* binary;
  uint64_t reserved;
};

static int registrations = 0;
static kpack_cache_t cache = NULL;

static void write_result(int n, const char* suffix, const void* data,
                         size_t size) {
  const char* dir = getenv("KPACK_STANDIN_OUT");
  char path[4096];
  FILE* f;
  if (dir == NULL) {
    return;
  }
  snprintf(path, sizeof path, "%s/%d.%s", dir, n, suffix);
  f = fopen(path, "wb");
  if (f != NULL) {
    fwrite(data, 1, size, f);
    fclose(f);
  }
}

static void write_error(int n, int code) {
  char text[32];
  int len = snprintf(text, sizeof text, "%d", code);
  write_result(n, "err", text, (size_t)len);
}

void** __hipRegisterFatBinary(const void* data) {
  static void* handle = NULL;
  const struct wrapper* w = (const struct wrapper*)data;
  int n = registrations++;
  char path[4096];
  size_t offset = 0;
  char arches_text[1024];
  const char* arches[16];
  size_t count = 0;
  void* code = NULL;
  size_t size = 0;
  kpack_error_t status;
  const char* env = getenv("KPACK_STANDIN_ARCHES");

  if (w->magic != 0x4B504948u) {
    write_error(n, -1); /* not a split binary */
    return &handle;
  }
  status = kpack_discover_binary_path(w->binary, path, sizeof path, &offset);
  if (status != KPACK_SUCCESS) {
    write_error(n, (int)status);
    return &handle;
  }
  if (cache == NULL && kpack_cache_create(&cache) != KPACK_SUCCESS) {
    write_error(n, -2);
    return &handle;
  }
  snprintf(arches_text, sizeof arches_text, "%s", env ? env : "");
  for (char* p = strtok(arches_text, ","); p != NULL && count < 16;
       p = strtok(NULL, ",")) {
    arches[count++] = p;
  }
  status = kpack_load_code_object(cache, w->binary, path,
                                  (uint32_t)(w->reserved & 0xffffffffu),
                                  arches, count, &code, &size);
  if (status == KPACK_SUCCESS) {
    write_result(n, "co", code, size);
    kpack_free_code_object(code);
  } else {
    write_error(n, (int)status);
  }
  return &handle;
}

void __hipUnregisterFatBinary(void** handle) { (void)handle; }
