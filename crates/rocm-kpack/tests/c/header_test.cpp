// The header compiles as C++17 and links: every declared function is
// referenced so a missing export fails the link.
#include "rocm_kpack/kpack.h"

#include <cstdio>

int main() {
  const void* functions[] = {
      reinterpret_cast<const void*>(&kpack_open),
      reinterpret_cast<const void*>(&kpack_close),
      reinterpret_cast<const void*>(&kpack_get_architecture_count),
      reinterpret_cast<const void*>(&kpack_get_architecture),
      reinterpret_cast<const void*>(&kpack_get_binary_count),
      reinterpret_cast<const void*>(&kpack_get_binary),
      reinterpret_cast<const void*>(&kpack_get_kernel),
      reinterpret_cast<const void*>(&kpack_free_kernel),
      reinterpret_cast<const void*>(&kpack_cache_create),
      reinterpret_cast<const void*>(&kpack_cache_destroy),
      reinterpret_cast<const void*>(&kpack_discover_binary_path),
      reinterpret_cast<const void*>(&kpack_load_code_object),
      reinterpret_cast<const void*>(&kpack_free_code_object),
      reinterpret_cast<const void*>(&kpack_enumerate_architectures),
  };
  kpack_archive_t archive = nullptr;
  kpack_error_t code = kpack_open(nullptr, &archive);
  std::printf("%zu functions, kpack_open(nullptr) = %d\n",
              sizeof functions / sizeof functions[0], static_cast<int>(code));
  return code == KPACK_ERROR_INVALID_ARGUMENT ? 0 : 1;
}
