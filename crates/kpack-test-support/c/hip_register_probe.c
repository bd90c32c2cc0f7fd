/*
 * An LD_PRELOAD interposer on a real HIP runtime's __hipRegisterFatBinary:
 * forwards each call to the real function (hip_4.2, the version binaries
 * import) and appends one line per call to $KPACK_HIP_PROBE_OUT:
 *
 *     <magic in hex> <1 if the handle is non-null, else 0> <runtime file>
 *
 * The runtime file is the library the real function lives in, so the
 * caller can check which runtime answered. A missing real function or an
 * unwritable record aborts the program with a message.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void** (*register_fn)(const void*);

static void fail(const char* what, const char* detail) {
  fprintf(stderr, "hip_register_probe: %s: %s\n", what, detail);
  abort();
}

static register_fn real_register(void) {
  static register_fn real = NULL;
  if (real == NULL) {
    real = (register_fn)dlvsym(RTLD_NEXT, "__hipRegisterFatBinary", "hip_4.2");
    if (real == NULL) {
      fail("no real __hipRegisterFatBinary@hip_4.2", dlerror());
    }
  }
  return real;
}

static void record(uint32_t magic, int handle, const char* runtime) {
  const char* path = getenv("KPACK_HIP_PROBE_OUT");
  FILE* out;
  if (path == NULL) {
    fail("KPACK_HIP_PROBE_OUT", "not set");
  }
  out = fopen(path, "a");
  if (out == NULL) {
    fail("cannot open", path);
  }
  fprintf(out, "%08x %d %s\n", magic, handle, runtime);
  fclose(out);
}

void** __hipRegisterFatBinary(const void* data) {
  register_fn real = real_register();
  Dl_info info;
  uint32_t magic;
  void** handle;

  memcpy(&magic, data, sizeof magic);
  handle = real(data);
  if (dladdr((void*)real, &info) == 0 || info.dli_fname == NULL) {
    fail("dladdr", "no file for the real __hipRegisterFatBinary");
  }
  record(magic, handle != NULL, info.dli_fname);
  return handle;
}
