/* TLS material for libmicrohttpd; see tls.h. */
#include "server/http/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEM_MAX (1 << 20) /* a certificate chain or key is a few KiB; refuse anything absurd */

/* The whole file as a NUL-terminated string; NULL with err. */
static char *read_pem(const char *flag, const char *path, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
        return NULL;
    }
    if (!(buf = malloc(PEM_MAX + 1))) {
        snprintf(err, errlen, "%s: out of memory", flag);
        goto cleanup;
    }
    n = fread(buf, 1, PEM_MAX + 1, f);
    if (ferror(f) || n == 0 || n > PEM_MAX) {
        snprintf(err, errlen, "%s %s: %s", flag, path,
                 ferror(f) ? "read error" : n == 0 ? "empty file" : "larger than 1 MiB");
        free(buf);
        buf = NULL;
        goto cleanup;
    }
    buf[n] = '\0';
cleanup:
    fclose(f);
    return buf;
}

int cr_tls_load(cr_tls *t, const char *cert_path, const char *key_path, const char *priorities, char *err,
                size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->options[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    bool has_cert = cert_path && cert_path[0], has_key = key_path && key_path[0];
    if (!has_cert && !has_key)
        return 0;
    if (has_cert != has_key) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together: give both or neither");
        return -1;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "this libmicrohttpd was built without TLS (GnuTLS)");
        return -1;
    }
    if (!(t->cert = read_pem("--tls-cert", cert_path, err, errlen)) ||
        !(t->key = read_pem("--tls-key", key_path, err, errlen))) {
        cr_tls_free(t);
        return -1;
    }
    /* GnuTLS's NORMAL still offers TLS 1.0/1.1 and the static RSA key exchange, whose recorded
     * traffic a later leak of the key decrypts; the default keeps TLS 1.2+ with (EC)DHE only,
     * which every client of the last decade speaks. An invalid string fails the start. */
    t->options[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t->cert};
    t->options[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t->key};
    t->options[2] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                            (void *)(priorities && priorities[0] ? priorities
                                                                                 : CR_TLS_DEFAULT_PRIORITIES)};
    t->options[3] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return 0;
}

bool cr_tls_enabled(const cr_tls *t) { return t->cert != NULL; }

void cr_tls_free(cr_tls *t)
{
    if (t->key) {
        volatile char *p = t->key;
        size_t n = strlen(t->key);
        for (size_t i = 0; i < n; i++)
            p[i] = 0;
    }
    free(t->key);
    free(t->cert);
    memset(t, 0, sizeof *t);
    t->options[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}
