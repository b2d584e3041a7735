/* Request framing; see framing.h. */
#include "server/http/framing.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *length;     /* the first Content-Length */
    bool lengths_differ;
    int encodings;          /* Transfer-Encoding headers */
    bool not_chunked;       /* one of them is not exactly "chunked" */
} framing;

/* Header values arrive trimmed of surrounding whitespace; "chunked" is case-insensitive. */
static enum MHD_Result note_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    framing *f = cls;
    (void)kind;
    value = value ? value : "";
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->length && strcmp(f->length, value) != 0)
            f->lengths_differ = true;
        f->length = f->length ? f->length : value;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->encodings++;
        f->not_chunked |= strcasecmp(value, "chunked") != 0;
    }
    return MHD_YES;
}

int cr_check_framing(struct MHD_Connection *conn, cr_error *err)
{
    framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, note_header, &f);
    if (f.lengths_differ)
        return cr_fail(err, 400, "invalid_parameter", "Content-Length",
                       "Content-Length is given more than once with different values: where the body "
                       "ends is ambiguous");
    if (f.encodings && f.length)
        return cr_fail(err, 400, "invalid_parameter", "Transfer-Encoding",
                       "Transfer-Encoding and Content-Length together: where the body ends is ambiguous; "
                       "send one of them");
    if (f.encodings > 1 || f.not_chunked)
        return cr_fail(err, 400, "invalid_parameter", "Transfer-Encoding",
                       "Transfer-Encoding must be exactly \"chunked\" (no other coding is decoded)");
    return 0;
}
