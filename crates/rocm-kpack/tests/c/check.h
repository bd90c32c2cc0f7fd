/*
 * The checks the C test programs make: each failed check prints where and
 * what, and counts in `failures`, which decides the exit code.
 */
#ifndef KPACK_TEST_CHECK_H
#define KPACK_TEST_CHECK_H

#include <stdio.h>

#include "rocm_kpack/kpack.h"

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                  \
      failures++;                                                      \
    }                                                                  \
  } while (0)

#define CHECK_CODE(expr, code)                                          \
  do {                                                                  \
    kpack_error_t got_ = (expr);                                        \
    if (got_ != (code)) {                                               \
      fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, \
              __LINE__, #expr, (int)got_, (int)(code));                 \
      failures++;                                                       \
    }                                                                   \
  } while (0)

#endif
