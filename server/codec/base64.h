/* Strict standard base64 (RFC 4648 §4, padded): how Triton's CUDA shared memory registration
 * carries a cudaIpcMemHandle ({"raw_handle": {"b64": "..."}}). */
#ifndef CRUNCHD_BASE64_H
#define CRUNCHD_BASE64_H

#include <stddef.h>

/* Decodes len characters of s into out (room for cap bytes); the decoded length, or -1 for
 * anything but canonical padded base64 (bad characters, length not a multiple of 4, misplaced
 * '=', nonzero bits under the padding) or a result longer than cap. */
long cr_base64_decode(const char *s, size_t len, unsigned char *out, size_t cap);

#endif
