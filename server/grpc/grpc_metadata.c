/* gRPC request metadata; see grpc_metadata.h. */
#include "server/grpc/grpc_metadata.h"

#include <string.h>
#include <strings.h>

bool cr_grpc_content_type_ok(const char *ct)
{
    static const char base[] = "application/grpc";
    size_t n = sizeof base - 1;
    return ct && strncasecmp(ct, base, n) == 0 && (ct[n] == '\0' || ct[n] == '+' || ct[n] == ';');
}

bool cr_grpc_timeout_parse(const char *v, int64_t *us)
{
    size_t digits = strspn(v, "0123456789");
    if (digits < 1 || digits > 8 || v[digits] == '\0' || v[digits + 1] != '\0')
        return false;
    int64_t n = 0;
    for (size_t i = 0; i < digits; i++)
        n = n * 10 + (v[i] - '0');
    switch (v[digits]) {
    case 'H': *us = n * 3600 * 1000000; return true;
    case 'M': *us = n * 60 * 1000000; return true;
    case 'S': *us = n * 1000000; return true;
    case 'm': *us = n * 1000; return true;
    case 'u': *us = n; return true;
    case 'n': *us = (n + 999) / 1000; return true;
    default: return false;
    }
}

bool cr_grpc_encoding_parse(const char *v, cr_coding *out)
{
    if (strcmp(v, "identity") == 0)
        *out = CR_CODING_IDENTITY;
    else if (strcmp(v, "gzip") == 0)
        *out = CR_CODING_GZIP;
    else if (strcmp(v, "deflate") == 0)
        *out = CR_CODING_DEFLATE;
    else
        return false;
    return true;
}

bool cr_grpc_flag_true(const char *v) { return strcasecmp(v, "true") == 0; }
