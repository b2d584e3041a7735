/* Coded request bodies; see body_coding.h. */
#include "server/http/body_coding.h"

#include <stdio.h>
#include <stdlib.h>

#include "server/codec/body_inflate.h"
#include "server/http/body.h"
#include "server/http/respond.h"
#include "server/http/upload.h"

int cr_body_coding_begin(cr_conn *c, cr_error *err)
{
    cr_coding coding;
    if (cr_coding_from_content_encoding(cr_header(c, MHD_HTTP_HEADER_CONTENT_ENCODING), &coding, err) < 0)
        return -1;
    if (coding == CR_CODING_IDENTITY)
        return 0;
    if (!(c->inflater = cr_inflater_new(coding)))
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    return 0;
}

typedef struct {
    cr_conn *c;
    cr_body_reader read;
    enum MHD_Result rc;
} decode_target;

/* Decoding stops at the first refusal: what follows would only be dropped. */
static bool refused(const cr_conn *c)
{
    return c->status || c->body_refused || (c->upload && cr_upload_failed(c));
}

static int to_reader(void *cls, const char *data, size_t n)
{
    decode_target *t = cls;
    t->rc = t->read(t->c, data, n);
    return t->rc != MHD_YES || refused(t->c);
}

enum MHD_Result cr_body_coding_feed(cr_conn *c, const char *data, size_t n, cr_body_reader read)
{
    c->wire_len += n;
    if (c->wire_len > c->limit) { /* chunked, unbounded as sent: reading on could never end */
        c->status = 413;
        snprintf(c->error_code, sizeof c->error_code, "too_large");
        return MHD_NO;
    }
    if (refused(c))
        return MHD_YES;
    cr_error err;
    decode_target t = {c, read, MHD_YES};
    if (cr_inflater_feed(c->inflater, data, n, to_reader, &t, &err) < 0) {
        cr_upload_free(c); /* its arrays go now, not when the rest of the body has been read */
        cr_body_refuse_later(c, &err);
    }
    return t.rc;
}

int cr_body_coding_end(cr_conn *c)
{
    cr_error err;
    if (!c->inflater || refused(c) || cr_inflater_finish(c->inflater, &err) == 0)
        return 0;
    cr_upload_free(c);
    cr_body_refuse_later(c, &err);
    return -1;
}

void cr_body_coding_free(cr_conn *c)
{
    cr_inflater_free(c->inflater);
    c->inflater = NULL;
}
