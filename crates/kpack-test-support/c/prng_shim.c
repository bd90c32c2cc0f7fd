/*
 * bcryptprimitives.dll with the one function Rust's standard library for
 * Windows imports from it, ProcessPrng, which wine 8.0 lacks: a Rust
 * program or DLL fails to load under wine 8.0 (status c0000135, exit code
 * 53) unless this shim is beside the program. Debian's wine 8.0 ships no
 * bcryptprimitives.dll at all, so the shim in the application's directory
 * is the one loaded; a wine with a builtin one could prefer it, which the
 * tests' WINEDLLOVERRIDES=bcryptprimitives=n,b (native first) rules out.
 *
 * ProcessPrng fills the buffer from advapi32's SystemFunction036
 * (RtlGenRandom), the generator Rust's std used before ProcessPrng, at
 * most 1 GiB a call (its length is a ULONG); it returns FALSE only if
 * that fails.
 */

#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG piece = length > 0x40000000u ? 0x40000000u : (ULONG)length;
    if (!SystemFunction036(data, piece)) {
      return FALSE;
    }
    data += piece;
    length -= piece;
  }
  return TRUE;
}
