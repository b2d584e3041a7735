/* Media types as Content-Type carries them (RFC 9110 §8.3.1): "type/subtype", optionally followed
 * by parameters ("; boundary=..."). One test for every place that asks which type a body or an
 * answer is. */
#ifndef CRUNCHD_MEDIA_TYPE_H
#define CRUNCHD_MEDIA_TYPE_H

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* Whether ct is the media type `type` (case-insensitive), with or without parameters; false for
 * NULL and for a longer type that merely starts the same ("application/jsonx"). */
static inline bool cr_media_type_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    return ct && strncasecmp(ct, type, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

#endif
