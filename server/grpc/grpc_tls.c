/* gRPC over TLS; see grpc_tls.h. */
#include "server/grpc/grpc_tls.h"

#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/http/tls.h"

struct cr_grpc_tls {
    gnutls_certificate_credentials_t creds;
    gnutls_priority_t priorities;
};

typedef struct {
    cr_grpc_transport t;
    gnutls_session_t s;
    size_t again_len; /* a record send that returned EAGAIN: retried with the same bytes */
} tls_transport;

void cr_grpc_tls_free(cr_grpc_tls *t)
{
    if (!t)
        return;
    if (t->priorities)
        gnutls_priority_deinit(t->priorities);
    if (t->creds)
        gnutls_certificate_free_credentials(t->creds);
    free(t);
}

static int load_creds(cr_grpc_tls *t, const cr_tls *pem, const cr_config *cfg, char *err, size_t errlen)
{
    gnutls_datum_t cert = {(unsigned char *)pem->cert, (unsigned)strlen(pem->cert)};
    gnutls_datum_t key = {(unsigned char *)pem->key, (unsigned)strlen(pem->key)};
    const char *prio = cfg->tls_priorities[0] ? cfg->tls_priorities : CR_TLS_DEFAULT_PRIORITIES;
    int rc = gnutls_certificate_allocate_credentials(&t->creds);
    if (rc == GNUTLS_E_SUCCESS)
        rc = gnutls_certificate_set_x509_key_mem(t->creds, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        snprintf(err, errlen, "gRPC TLS: --tls-cert %s and --tls-key %s: %s", cfg->tls_cert, cfg->tls_key,
                 gnutls_strerror(rc));
        return -1;
    }
    const char *where = NULL;
    if ((rc = gnutls_priority_init(&t->priorities, prio, &where)) < 0) {
        snprintf(err, errlen, "gRPC TLS: --tls-priorities: %s at \"%.40s\"", gnutls_strerror(rc), where ? where : "");
        return -1;
    }
    return 0;
}

int cr_grpc_tls_load(const cr_config *cfg, cr_grpc_tls **out, char *err, size_t errlen)
{
    *out = NULL;
    cr_tls pem;
    if (cr_tls_load(&pem, cfg->tls_cert, cfg->tls_key, cfg->tls_priorities, err, errlen) < 0)
        return -1;
    if (!cr_tls_enabled(&pem))
        return 0;
    cr_grpc_tls *t = calloc(1, sizeof *t);
    int rc = t ? load_creds(t, &pem, cfg, err, errlen) : (snprintf(err, errlen, "out of memory"), -1);
    cr_tls_free(&pem); /* GnuTLS keeps its own copy; the key's text is wiped */
    if (rc < 0) {
        cr_grpc_tls_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

static ssize_t tls_read(cr_grpc_transport *t, void *buf, size_t n)
{
    tls_transport *x = (tls_transport *)t;
    for (;;) {
        ssize_t k = gnutls_record_recv(x->s, buf, n);
        if (k >= 0)
            return k;
        if (k == GNUTLS_E_INTERRUPTED)
            continue;
        if (k == GNUTLS_E_AGAIN)
            return CR_IO_AGAIN;
        return k == GNUTLS_E_PREMATURE_TERMINATION ? 0 : CR_IO_ERROR; /* a close without close_notify */
    }
}

/* One record at a time (GnuTLS sends at most a record's bytes per call); after EAGAIN the same
 * bytes again, as GnuTLS requires: the queue's head does not move until they are written. */
static ssize_t tls_writev(cr_grpc_transport *t, const struct iovec *iov, int n)
{
    tls_transport *x = (tls_transport *)t;
    size_t done = 0;
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        while (off < iov[i].iov_len) {
            size_t want = x->again_len ? x->again_len : iov[i].iov_len - off;
            ssize_t k = gnutls_record_send(x->s, (const char *)iov[i].iov_base + off, want);
            if (k == GNUTLS_E_INTERRUPTED)
                continue;
            if (k == GNUTLS_E_AGAIN) {
                x->again_len = want;
                return done ? (ssize_t)done : CR_IO_AGAIN;
            }
            if (k < 0)
                return CR_IO_ERROR;
            x->again_len = 0;
            off += (size_t)k;
            done += (size_t)k;
        }
    }
    return (ssize_t)done;
}

/* A client that negotiated another protocol than h2 cannot speak gRPC; one that negotiated none
 * may still send HTTP/2's preface (prior knowledge). */
static bool alpn_acceptable(gnutls_session_t s)
{
    gnutls_datum_t p;
    if (gnutls_alpn_get_selected_protocol(s, &p) < 0)
        return true;
    return p.size == 2 && memcmp(p.data, "h2", 2) == 0;
}

static int tls_handshake(cr_grpc_transport *t)
{
    tls_transport *x = (tls_transport *)t;
    int rc;
    do
        rc = gnutls_handshake(x->s);
    while (rc == GNUTLS_E_INTERRUPTED);
    if (rc == GNUTLS_E_AGAIN)
        return 0;
    if (rc < 0)
        return -1;
    return alpn_acceptable(x->s) ? 1 : -1;
}

static bool tls_pending(cr_grpc_transport *t)
{
    return gnutls_record_check_pending(((tls_transport *)t)->s) > 0;
}

static bool tls_wants_write(cr_grpc_transport *t)
{
    return gnutls_record_get_direction(((tls_transport *)t)->s) == 1;
}

static void tls_free(cr_grpc_transport *t)
{
    tls_transport *x = (tls_transport *)t;
    gnutls_deinit(x->s);
    if (t->fd >= 0)
        close(t->fd);
    free(x);
}

static const cr_grpc_transport_ops tls_ops = {tls_read, tls_writev, tls_handshake, tls_pending, tls_wants_write,
                                              tls_free};

cr_grpc_transport *cr_grpc_tls_transport(cr_grpc_tls *tls, int fd)
{
    static const gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
    tls_transport *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    if (gnutls_init(&x->s, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) {
        free(x);
        return NULL;
    }
    if (gnutls_priority_set(x->s, tls->priorities) < 0 ||
        gnutls_credentials_set(x->s, GNUTLS_CRD_CERTIFICATE, tls->creds) < 0 ||
        gnutls_alpn_set_protocols(x->s, &h2, 1, GNUTLS_ALPN_SERVER_PRECEDENCE) < 0) {
        gnutls_deinit(x->s);
        free(x);
        return NULL;
    }
    gnutls_certificate_server_set_request(x->s, GNUTLS_CERT_IGNORE);
    gnutls_transport_set_int(x->s, fd);
    x->t.ops = &tls_ops;
    x->t.fd = fd;
    return &x->t;
}
