/* HTTPS through libmicrohttpd's GnuTLS: --tls-cert and --tls-key (PEM files, both or neither),
 * read once at start into memory for MHD_OPTION_HTTPS_MEM_CERT/KEY. */
#ifndef CRUNCHD_TLS_H
#define CRUNCHD_TLS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *cert, *key;                /* PEM text, NUL-terminated; NULL when TLS is off */
    struct MHD_OptionItem options[3]; /* for MHD_OPTION_ARRAY: the two above, or just the end */
} cr_tls;

/* Empty paths: TLS off (options hold only MHD_OPTION_END). -1 with err when only one path is
 * given, a file cannot be read or is empty, or this libmicrohttpd was built without TLS. */
int cr_tls_load(cr_tls *t, const char *cert_path, const char *key_path, char *err, size_t errlen);
bool cr_tls_enabled(const cr_tls *t);
/* Frees both; the key's bytes are overwritten first. */
void cr_tls_free(cr_tls *t);

#endif
