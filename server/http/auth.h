/* Optional bearer-token authentication (--auth-token-file): one shared secret, read once at
 * start, compared in constant time against "Authorization: Bearer <token>". */
#ifndef CRUNCHD_AUTH_H
#define CRUNCHD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#define CR_AUTH_TOKEN_MAX 4096

typedef struct {
    bool enabled;
    bool protect_metrics;       /* --metrics-auth: /metrics needs the token too */
    size_t len;
    char token[CR_AUTH_TOKEN_MAX];
} cr_auth;

/* Reads the token from path (trailing CR/LF stripped). An empty path leaves auth disabled.
 * -1 with err when the file cannot be read, is empty, or is longer than CR_AUTH_TOKEN_MAX. */
int cr_auth_load(cr_auth *a, const char *path, bool protect_metrics, char *err, size_t errlen);

/* Whether a request for path may skip the token: liveness and readiness always (probes carry
 * no secrets), /metrics unless --metrics-auth. */
bool cr_auth_exempt(const cr_auth *a, const char *path);

/* Whether an Authorization header value carries the token. Constant time in the token's and
 * the header's contents: an attacker learns nothing from how long a wrong guess took. */
bool cr_auth_check(const cr_auth *a, const char *authorization);

/* Equality of two byte strings, touching every byte of the longer one whatever they hold. */
bool cr_auth_equal(const char *a, size_t alen, const char *b, size_t blen);

/* Overwrites the token in memory. */
void cr_auth_clear(cr_auth *a);

#endif
