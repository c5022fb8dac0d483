/* A stand-in for libnccl.so.2 / librccl.so.1 that exports only ncclGetVersion.
 *
 * Built by tests/doctor/conftest.py with `cc -shared -fPIC`; the version and misbehaviour
 * are chosen at compile time:
 *   -DFAKE_VERSION_CODE=22703   what ncclGetVersion reports (X*10000+Y*100+Z: 2.27.3)
 *   -DFAKE_CRASH                ncclGetVersion aborts the process
 *   -DFAKE_HANG                 the library constructor never returns (dlopen hangs)
 *   -DFAKE_FAIL                 ncclGetVersion returns ncclSystemError (2)
 */
#include <stdlib.h>
#include <unistd.h>

#ifndef FAKE_VERSION_CODE
#define FAKE_VERSION_CODE 23007
#endif

#ifdef FAKE_HANG
__attribute__((constructor)) static void fake_hang(void) {
  for (;;) pause();
}
#endif

int ncclGetVersion(int *version) {
#ifdef FAKE_CRASH
  abort();
#endif
#ifdef FAKE_FAIL
  return 2;
#endif
  *version = FAKE_VERSION_CODE;
  return 0;
}
