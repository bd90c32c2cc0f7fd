/*
 * rocm_kpack.dll as a Windows program uses it, built with mingw and run
 * under wine by crates/rocm-kpack/tests/it/windows.rs, which makes the
 * inputs and checks the output. Paths are UTF-8, '\' or '/', with a drive
 * letter (wine's Z: is the Linux root); its arguments are taken as UTF-16
 * (wmain) and handed to the C API as UTF-8.
 *
 *   kpack_windows_test kernel ARCHIVE BINARY ARCH
 *       kpack_open and kpack_get_kernel; prints "OK <hex bytes>" or
 *       "ERR <code>" (from kpack_open or kpack_get_kernel)
 *   kpack_windows_test load BINARY KERNEL_NAME BUNDLE PATHS ARCH...
 *       builds a marker (PATHS comma-separated) and loads through a new
 *       cache, with the ROCM_KPACK_* variables of the environment; prints
 *       "OK <hex bytes>" or "ERR <code>"
 *   kpack_windows_test discover
 *       kpack_discover_binary_path on this executable's data, on a
 *       function inside rocm_kpack.dll, on memory no module holds and with
 *       a short buffer; prints "exe <path>" and "dll <path>" as
 *       discovered, then "discover ok"
 */

#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "rocm_kpack/kpack.h"

#include "check.h"

static void print_result(kpack_error_t code, const void* data, size_t size) {
  if (code == KPACK_SUCCESS) {
    printf("OK ");
    for (size_t i = 0; i < size; i++) {
      printf("%02x", ((const unsigned char*)data)[i]);
    }
    printf("\n");
  } else {
    printf("ERR %d\n", (int)code);
  }
}

/* ---- kernel mode ------------------------------------------------------- */

static void kernel_mode(const char* path, const char* binary,
                        const char* arch) {
  kpack_archive_t archive = NULL;
  void* data = NULL;
  size_t size = 0;
  kpack_error_t code = kpack_open(path, &archive);
  if (code == KPACK_SUCCESS) {
    code = kpack_get_kernel(archive, binary, arch, &data, &size);
  }
  print_result(code, data, size);
  kpack_free_kernel(data);
  kpack_close(archive);
}

/* ---- load mode --------------------------------------------------------- */

/* Appends a MessagePack str of up to 255 bytes. */
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

static void load_mode(int argc, char** argv) {
  static unsigned char marker[65536];
  const char* list[15];
  size_t count = 0;
  size_t at = 0;
  kpack_cache_t cache = NULL;
  void* data = NULL;
  size_t size = 0;
  kpack_error_t code;

  for (char* p = strtok(argv[5], ","); p != NULL && count < 15;
       p = strtok(NULL, ",")) {
    list[count++] = p;
  }
  marker[at++] = 0x82; /* map of 2 */
  at += put_str(marker + at, "kpack_search_paths");
  marker[at++] = (unsigned char)(0x90 | count);
  for (size_t i = 0; i < count; i++) {
    at += put_str(marker + at, list[i]);
  }
  at += put_str(marker + at, "kernel_name");
  put_str(marker + at, argv[3]);

  CHECK_CODE(kpack_cache_create(&cache), KPACK_SUCCESS);
  code = kpack_load_code_object(cache, marker, argv[2],
                                (uint32_t)strtoul(argv[4], NULL, 10),
                                (const char* const*)(argv + 6),
                                (size_t)(argc - 6), &data, &size);
  print_result(code, data, size);
  kpack_free_code_object(data);
  kpack_cache_destroy(cache);
}

/* ---- discover mode ----------------------------------------------------- */

static int in_executable = 42;

/* The file `module` was loaded from, in UTF-8. */
static void module_path(HMODULE module, char* out, size_t out_size) {
  wchar_t wide[4096];
  DWORD len = GetModuleFileNameW(module, wide, 4096);
  CHECK(len > 0 && len < 4096);
  CHECK(WideCharToMultiByte(CP_UTF8, 0, wide, -1, out, (int)out_size, NULL,
                            NULL) > 0);
}

static void discover_mode(void) {
  char path[8192];
  char expected[8192];
  size_t offset = 0;
  HMODULE exe = GetModuleHandleW(NULL);
  HMODULE dll = GetModuleHandleW(L"rocm_kpack.dll");
  void* in_dll = NULL;
  void* anonymous;

  /* This executable's data: its path, the offset from its base. */
  CHECK_CODE(
      kpack_discover_binary_path(&in_executable, path, sizeof path, &offset),
      KPACK_SUCCESS);
  module_path(exe, expected, sizeof expected);
  CHECK(strcmp(path, expected) == 0);
  CHECK(offset == (size_t)((char*)&in_executable - (char*)exe));
  printf("exe %s\n", path);
  CHECK_CODE(
      kpack_discover_binary_path(&in_executable, path, sizeof path, NULL),
      KPACK_SUCCESS);
  /* Too small for the path and its NUL, then just big enough. */
  CHECK_CODE(kpack_discover_binary_path(&in_executable, path,
                                        strlen(expected), &offset),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_discover_binary_path(&in_executable, path,
                                        strlen(expected) + 1, &offset),
             KPACK_SUCCESS);

  /* A function inside the DLL (not this executable's import stub). */
  CHECK(dll != NULL);
  if (dll != NULL) {
    /* ISO C has no cast from a function pointer to void*. */
    FARPROC function = GetProcAddress(dll, "kpack_open");
    CHECK(function != NULL);
    memcpy(&in_dll, &function, sizeof in_dll);
  }
  if (in_dll != NULL) {
    CHECK_CODE(kpack_discover_binary_path(in_dll, path, sizeof path, &offset),
               KPACK_SUCCESS);
    module_path(dll, expected, sizeof expected);
    CHECK(strcmp(path, expected) == 0);
    CHECK(offset == (size_t)((char*)in_dll - (char*)dll));
    printf("dll %s\n", path);
  }

  /* Memory no module holds. */
  anonymous = VirtualAlloc(NULL, 4096, MEM_COMMIT | MEM_RESERVE,
                           PAGE_READWRITE);
  CHECK(anonymous != NULL);
  CHECK_CODE(kpack_discover_binary_path(anonymous, path, sizeof path, &offset),
             KPACK_ERROR_PATH_DISCOVERY_FAILED);
  VirtualFree(anonymous, 0, MEM_RELEASE);

  CHECK_CODE(kpack_discover_binary_path(NULL, path, sizeof path, &offset),
             KPACK_ERROR_INVALID_ARGUMENT);
  CHECK_CODE(kpack_discover_binary_path(&in_executable, NULL, 10, &offset),
             KPACK_ERROR_INVALID_ARGUMENT);
  if (failures == 0) {
    printf("discover ok\n");
  }
}

/* The arguments in UTF-8, as the C API takes paths (built with -municode:
 * main's char arguments would be in the ANSI code page). */
int wmain(int argc, wchar_t** wide) {
  char** argv = calloc((size_t)argc + 1, sizeof *argv);
  for (int i = 0; argv != NULL && i < argc; i++) {
    int len = WideCharToMultiByte(CP_UTF8, 0, wide[i], -1, NULL, 0, NULL, NULL);
    argv[i] = malloc((size_t)len);
    if (argv[i] == NULL || len == 0) {
      return 3;
    }
    WideCharToMultiByte(CP_UTF8, 0, wide[i], -1, argv[i], len, NULL, NULL);
  }
  if (argv == NULL) {
    return 3;
  }
  /* "\n", not the C runtime's "\r\n" for text mode. */
  _setmode(_fileno(stdout), _O_BINARY);
  if (argc == 5 && strcmp(argv[1], "kernel") == 0) {
    kernel_mode(argv[2], argv[3], argv[4]);
  } else if (argc >= 7 && strcmp(argv[1], "load") == 0) {
    load_mode(argc, argv);
  } else if (argc == 2 && strcmp(argv[1], "discover") == 0) {
    discover_mode();
  } else {
    fprintf(stderr,
            "usage: see the comment at the top of kpack_windows_test.c\n");
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
