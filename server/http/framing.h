/* Where a request's body ends must be beyond doubt. libmicrohttpd 0.9.75 takes a request with two
 * Content-Length headers that disagree (it uses one), and one with both Content-Length and
 * Transfer-Encoding: chunked (chunked wins): a proxy in front that reads the other one would see
 * a different body and a different next request on the same connection (request smuggling).
 * RFC 9112 6.3 says such a request is a 400 and the connection must close. */
#ifndef CRUNCHD_HTTP_FRAMING_H
#define CRUNCHD_HTTP_FRAMING_H

#include <microhttpd.h>

#include "server/error.h"

/* 0 when the framing headers are unambiguous; -1 with err (400 invalid_parameter naming the
 * header) for Content-Length headers that disagree, Content-Length with Transfer-Encoding, or a
 * Transfer-Encoding other than a single "chunked" (libmicrohttpd decodes no other). */
int cr_check_framing(struct MHD_Connection *conn, cr_error *err);

#endif
