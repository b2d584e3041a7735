/* The end of a request, whichever transport served it (libmicrohttpd's completion callback in
 * listener.c, or the Unix socket's direct path in direct.c): its metrics and access-log line,
 * its job forgotten, its memory given back. */
#ifndef CRUNCHD_HTTP_REQUEST_END_H
#define CRUNCHD_HTTP_REQUEST_END_H

#include "server/http/conn.h"

/* A request is over (answered, or not: then its status is unanswered, 408 or 499): its metrics
 * and log line, its job forgotten, its memory freed, c too. */
void cr_conn_end(cr_conn *c, int unanswered);

#endif
