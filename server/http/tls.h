/* HTTPS through libmicrohttpd's GnuTLS: --tls-cert and --tls-key (PEM files, both or neither),
 * read once at start into memory for MHD_OPTION_HTTPS_MEM_CERT/KEY, and the GnuTLS priority
 * string (--tls-priorities; by default TLS 1.2 and 1.3 with forward-secret key exchange only). */
#ifndef CRUNCHD_TLS_H
#define CRUNCHD_TLS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *cert, *key;                /* PEM text, NUL-terminated; NULL when TLS is off */
    struct MHD_OptionItem options[4]; /* for MHD_OPTION_ARRAY: the two above and the priorities,
                                         or just the end */
} cr_tls;

/* What --tls-priorities is unless given: TLS 1.2+, (EC)DHE key exchange only. */
#define CR_TLS_DEFAULT_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-DHE-DSS:%SERVER_PRECEDENCE"

/* Empty paths: TLS off (options hold only MHD_OPTION_END). priorities: a GnuTLS priority string,
 * "" for CR_TLS_DEFAULT_PRIORITIES; it must stay alive as long as the daemon. -1 with err when
 * only one path is given, a file cannot be read or is empty, or this libmicrohttpd was built
 * without TLS. */
int cr_tls_load(cr_tls *t, const char *cert_path, const char *key_path, const char *priorities, char *err,
                size_t errlen);
bool cr_tls_enabled(const cr_tls *t);
/* Frees both; the key's bytes are overwritten first. */
void cr_tls_free(cr_tls *t);

#endif
