/* CORS preflights: a browser's OPTIONS with Origin and Access-Control-Request-Method, asked
 * before a cross-origin request it may not send unasked (JSON bodies, Authorization). Answered
 * before authentication (browsers send no credentials on a preflight). */
#ifndef CRUNCHD_HTTP_PREFLIGHT_H
#define CRUNCHD_HTTP_PREFLIGHT_H

#include <stdbool.h>

#include "server/http/conn.h"

/* Whether c is a preflight this daemon answers: CORS on, method OPTIONS, both headers there.
 * Without --cors-origin OPTIONS stays what it was: 405 with Allow. */
bool cr_is_preflight(cr_conn *c);

/* 204 with the path's methods, the headers we take and how long to cache it; 403
 * origin_not_allowed for an origin not in --cors-origin; 404 for an unknown path. */
enum MHD_Result cr_preflight(cr_conn *c);

#endif
