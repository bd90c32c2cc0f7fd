/*
 * A stand-in for the HIP runtime (libamdhip64): what a binary's static
 * constructor calls. __hipRegisterFatBinary chooses a code object for the
 * agent targets in $KPACK_STANDIN_ARCHES (comma-separated, in priority
 * order) from either wrapper:
 *
 * - HIPK (split): finds the binary's path from the marker pointer and
 *   loads the code object through librocm_kpack;
 * - HIPF (fat): reads the offload bundle the pointer points at (built
 *   with STANDIN_CCOB, as on Linux, a compressed one too: CCOB version 3,
 *   zstd, decompressed with libzstd as a ROCm 6.2+ runtime does) and takes
 *   the entry hipv4-amdgcn-amd-amdhsa--<target> for the first
 *   target compatible with an agent, as the runtime chooses (the agent's
 *   feature-dropping variants, most specific first; generic targets are
 *   not followed).
 *
 * Each registration N writes $KPACK_STANDIN_OUT/N.co (the code object) or
 * N.err (the error number: kpack_error_t, KPACK_ERROR_INVALID_FORMAT for a
 * HIPF pointer that is not a bundle, KPACK_ERROR_ARCH_NOT_FOUND when no
 * entry fits, -1 for another magic). Every other imported function is a
 * generated no-op.
 *
 * Built for Windows (amdhip64_7.dll, with mingw), each registration first
 * writes N.wrapper, before anything follows the wrapper's pointer:
 *
 *   magic 0x48495046
 *   pointer_rva 0x5000
 *
 * the wrapper's magic and its pointer minus the base of the module (DLL or
 * EXE) holding the wrapper, in hexadecimal: where the relocated pointer
 * lands, as an offset a test compares with the image's section table
 * (pointer_rva is "none" when no module holds the wrapper or the pointer
 * is below the module's base).
 */

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#define STANDIN_EXPORT __declspec(dllexport)
#else
#define STANDIN_EXPORT
#endif

#ifdef STANDIN_CCOB
#include <zstd.h>
#endif

#include "rocm_kpack/kpack.h"

#define HIPF_MAGIC 0x48495046u
#define HIPK_MAGIC 0x4B504948u
#define BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define TRIPLE_PREFIX "hipv4-amdgcn-amd-amdhsa--"
#define MAX_ARCHES 16
#define MAX_FEATURES 8

struct wrapper {
  uint32_t magic;
  uint32_t version;
  const void* binary;
  uint64_t reserved;
};

/* The agent targets of $KPACK_STANDIN_ARCHES, pointing into `text`. */
struct arches {
  char text[1024];
  const char* names[MAX_ARCHES];
  size_t count;
};

/* A code object's place in a bundle. */
struct extent {
  uint64_t offset;
  uint64_t size;
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

#ifdef _WIN32
/* Writes N.wrapper: the magic and where the pointer lands in the module
 * holding the wrapper. */
static void write_wrapper(int n, const struct wrapper* w) {
  const DWORD flags = GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                      GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT;
  HMODULE module = NULL;
  uintptr_t pointer = (uintptr_t)w->binary;
  char text[96];
  int len;

  if (GetModuleHandleExW(flags, (LPCWSTR)w, &module) &&
      pointer >= (uintptr_t)module) {
    len = snprintf(text, sizeof text,
                   "magic 0x%08" PRIx32 "\npointer_rva 0x%" PRIx64 "\n",
                   w->magic, (uint64_t)(pointer - (uintptr_t)module));
  } else {
    len = snprintf(text, sizeof text,
                   "magic 0x%08" PRIx32 "\npointer_rva none\n", w->magic);
  }
  write_result(n, "wrapper", text, (size_t)len);
}
#endif

static void read_arches(struct arches* arches) {
  const char* env = getenv("KPACK_STANDIN_ARCHES");
  arches->count = 0;
  snprintf(arches->text, sizeof arches->text, "%s", env ? env : "");
  for (char* p = strtok(arches->text, ","); p != NULL && arches->count < MAX_ARCHES;
       p = strtok(NULL, ",")) {
    arches->names[arches->count++] = p;
  }
}

/* Loads the code object of a split binary's wrapper through librocm_kpack. */
static void register_kpack(int n, const struct wrapper* w) {
  char path[4096];
  size_t offset = 0;
  struct arches arches;
  void* code = NULL;
  size_t size = 0;
  kpack_error_t status;

  status = kpack_discover_binary_path(w->binary, path, sizeof path, &offset);
  if (status != KPACK_SUCCESS) {
    write_error(n, (int)status);
    return;
  }
  if (cache == NULL && kpack_cache_create(&cache) != KPACK_SUCCESS) {
    write_error(n, -2);
    return;
  }
  read_arches(&arches);
  status = kpack_load_code_object(cache, w->binary, path,
                                  (uint32_t)(w->reserved & 0xffffffffu),
                                  arches.names, arches.count, &code, &size);
  if (status == KPACK_SUCCESS) {
    write_result(n, "co", code, size);
    kpack_free_code_object(code);
  } else {
    write_error(n, (int)status);
  }
}

static uint64_t read_u64(const unsigned char* p) {
  uint64_t value;
  memcpy(&value, p, sizeof value);
  return value;
}

/* Finds the bundle entry whose triple is TRIPLE_PREFIX followed by
 * `target`; returns 1 and its extent, or 0. */
static int find_entry(const unsigned char* bundle, const char* target,
                      struct extent* found) {
  const unsigned char* at = bundle + strlen(BUNDLE_MAGIC) + 8;
  uint64_t count = read_u64(bundle + strlen(BUNDLE_MAGIC));
  char triple[512];
  size_t len = (size_t)snprintf(triple, sizeof triple, "%s%s", TRIPLE_PREFIX,
                                target);

  for (uint64_t i = 0; i < count; i++) {
    uint64_t triple_len = read_u64(at + 16);
    if (triple_len == len && memcmp(at + 24, triple, len) == 0) {
      found->offset = read_u64(at);
      found->size = read_u64(at + 8);
      return 1;
    }
    at += 24 + triple_len;
  }
  return 0;
}

static int compare_features(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Finds the entry for the first target compatible with agent `arch`: all
 * subsets of its features (sorted by name), as a bitmask counting down
 * from all set, the first feature the most significant bit. */
static int find_compatible(const unsigned char* bundle, const char* arch,
                           struct extent* found) {
  char text[256];
  char target[512];
  char* features[MAX_FEATURES];
  size_t count = 0;
  char* processor;

  snprintf(text, sizeof text, "%s", arch);
  processor = strtok(text, ":");
  if (processor == NULL) {
    return 0;
  }
  for (char* f = strtok(NULL, ":"); f != NULL && count < MAX_FEATURES;
       f = strtok(NULL, ":")) {
    features[count++] = f;
  }
  qsort(features, count, sizeof features[0], compare_features);
  for (unsigned mask = (1u << count); mask-- > 0;) {
    size_t len = (size_t)snprintf(target, sizeof target, "%s", processor);
    for (size_t i = 0; i < count; i++) {
      if (mask & (1u << (count - 1 - i))) {
        len += (size_t)snprintf(target + len, sizeof target - len, ":%s",
                                features[i]);
      }
    }
    if (find_entry(bundle, target, found)) {
      return 1;
    }
  }
  return 0;
}

#ifdef STANDIN_CCOB
/* The plain bundle inside a compressed one (CCOB version 3, zstd:
 * "CCOB", u16 version, u16 method, u64 total size, u64 plain size, u64
 * hash, then the zstd frame), in a buffer the caller frees; NULL when it
 * is not one this reads. */
static unsigned char* decompress_ccob(const unsigned char* ccob) {
  uint16_t version, method;
  memcpy(&version, ccob + 4, 2);
  memcpy(&method, ccob + 6, 2);
  if (memcmp(ccob, "CCOB", 4) != 0 || version != 3 || method != 1) {
    return NULL;
  }
  uint64_t total = read_u64(ccob + 8), plain = read_u64(ccob + 16);
  unsigned char* out = malloc(plain ? plain : 1);
  if (out == NULL) {
    return NULL;
  }
  size_t got = ZSTD_decompress(out, plain, ccob + 32, total - 32);
  if (ZSTD_isError(got) || got != plain) {
    free(out);
    return NULL;
  }
  return out;
}
#endif

/* Takes a fat binary's code object out of the bundle its wrapper points at. */
static void register_fat(int n, const struct wrapper* w) {
  const unsigned char* bundle = (const unsigned char*)w->binary;
  unsigned char* decompressed = NULL;
  struct arches arches;
  struct extent found;

#ifdef STANDIN_CCOB
  if (memcmp(bundle, "CCOB", 4) == 0) {
    decompressed = decompress_ccob(bundle);
    bundle = decompressed;
  }
#endif
  if (bundle == NULL || memcmp(bundle, BUNDLE_MAGIC, strlen(BUNDLE_MAGIC)) != 0) {
    write_error(n, KPACK_ERROR_INVALID_FORMAT);
    free(decompressed);
    return;
  }
  read_arches(&arches);
  for (size_t i = 0; i < arches.count; i++) {
    if (find_compatible(bundle, arches.names[i], &found)) {
      write_result(n, "co", bundle + found.offset, (size_t)found.size);
      free(decompressed);
      return;
    }
  }
  write_error(n, KPACK_ERROR_ARCH_NOT_FOUND);
  free(decompressed);
}

STANDIN_EXPORT void** __hipRegisterFatBinary(const void* data) {
  static void* handle = NULL;
  const struct wrapper* w = (const struct wrapper*)data;
  int n = registrations++;

#ifdef _WIN32
  write_wrapper(n, w);
#endif
  if (w->magic == HIPK_MAGIC) {
    register_kpack(n, w);
  } else if (w->magic == HIPF_MAGIC) {
    register_fat(n, w);
  } else {
    write_error(n, -1);
  }
  return &handle;
}

STANDIN_EXPORT void __hipUnregisterFatBinary(void** handle) { (void)handle; }
