/* The bytes of an id that weft-run passes as hex (WEFT_UNIQUE_ID), for the C tests of both APIs.
 * Returns 1 when `hex` is exactly 2 * n hex digits (and fills out[0..n)), else 0. */
#ifndef WEFT_TESTS_CAPI_HEX_ID_H_
#define WEFT_TESTS_CAPI_HEX_ID_H_

#include <string.h>

static inline int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static inline int bytes_from_hex(const char* hex, char* out, int n) {
  if (hex == NULL || strlen(hex) != 2 * (size_t)n) return 0;
  for (int i = 0; i < n; ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return 0;
    out[i] = (char)(hi << 4 | lo);
  }
  return 1;
}

#endif /* WEFT_TESTS_CAPI_HEX_ID_H_ */
