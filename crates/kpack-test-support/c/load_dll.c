/*
 * Loads a DLL away from its preferred base, so that the Windows loader
 * must apply its base relocations (IMAGE_REL_BASED_DIR64 entries), as it
 * does whenever the preferred range is taken:
 *
 *   load_dll.exe DLL
 *
 * reads the DLL's ImageBase and SizeOfImage from its headers, reserves
 * that range with VirtualAlloc, then calls LoadLibraryW (its static
 * constructors run then, as a HIP library's registration does). Prints
 * "loaded at 0x... (preferred 0x...)" and exits 0; otherwise says why on
 * stderr and exits 2 (usage), 3 (headers unreadable), 4 (LoadLibraryW
 * failed, with GetLastError) or 5 (the DLL is at its preferred base, so
 * no relocation was applied).
 */

#include <stdint.h>
#include <stdio.h>
#include <windows.h>

/* The DLL's preferred base and size, from its optional header. */
static int read_headers(const wchar_t* path, uint64_t* image_base,
                        uint32_t* image_size) {
  IMAGE_DOS_HEADER dos;
  IMAGE_NT_HEADERS64 nt;
  FILE* f = _wfopen(path, L"rb");
  int ok = 0;

  if (f == NULL) {
    return 0;
  }
  if (fread(&dos, sizeof dos, 1, f) == 1 && dos.e_magic == IMAGE_DOS_SIGNATURE &&
      fseek(f, dos.e_lfanew, SEEK_SET) == 0 && fread(&nt, sizeof nt, 1, f) == 1 &&
      nt.Signature == IMAGE_NT_SIGNATURE &&
      nt.OptionalHeader.Magic == IMAGE_NT_OPTIONAL_HDR64_MAGIC) {
    *image_base = nt.OptionalHeader.ImageBase;
    *image_size = nt.OptionalHeader.SizeOfImage;
    ok = 1;
  }
  fclose(f);
  return ok;
}

int wmain(int argc, wchar_t** argv) {
  uint64_t image_base = 0;
  uint32_t image_size = 0;
  void* reserved;
  HMODULE module;

  if (argc != 2) {
    fprintf(stderr, "usage: load_dll.exe DLL\n");
    return 2;
  }
  if (!read_headers(argv[1], &image_base, &image_size)) {
    fprintf(stderr, "load_dll: cannot read the PE32+ headers of %ls\n", argv[1]);
    return 3;
  }
  /* Taken already (by something else) is as good as taken by us. */
  reserved = VirtualAlloc((void*)(uintptr_t)image_base, image_size, MEM_RESERVE,
                          PAGE_NOACCESS);
  module = LoadLibraryW(argv[1]);
  if (module == NULL) {
    fprintf(stderr, "load_dll: LoadLibraryW(%ls) failed: error %lu\n", argv[1],
            (unsigned long)GetLastError());
    return 4;
  }
  if ((uint64_t)(uintptr_t)module == image_base) {
    fprintf(stderr,
            "load_dll: %ls is at its preferred base 0x%llx (reserved: %s), so "
            "its base relocations were not applied\n",
            argv[1], (unsigned long long)image_base, reserved ? "yes" : "no");
    return 5;
  }
  printf("loaded at 0x%llx (preferred 0x%llx)\n",
         (unsigned long long)(uintptr_t)module, (unsigned long long)image_base);
  fflush(stdout);
  return 0;
}
