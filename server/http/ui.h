/* The page at GET / (docs/operations.md, "The page"): the server, live throughput, queue and
 * latency, the kernel catalogue, and compare mode on generated operands as a chart. HTML, CSS and
 * script are files under server/ui/, built into the binary; the script talks to the daemon's own
 * JSON routes with the token the page's field holds, so the page itself needs none. */
#ifndef CRUNCHD_HTTP_UI_H
#define CRUNCHD_HTTP_UI_H

#include <stdbool.h>

#include "server/http/conn.h"

enum MHD_Result cr_route_ui_page(cr_conn *c);   /* GET /: the HTML (a JSON client gets today's 404) */
enum MHD_Result cr_route_ui_script(cr_conn *c); /* GET /ui/app.js */
enum MHD_Result cr_route_ui_style(cr_conn *c);  /* GET /ui/app.css */

/* Whether the request is for the page's own files, which carry nothing secret and so need no
 * token (a browser cannot send one with a navigation): GET or HEAD of /, /ui/app.js, /ui/app.css
 * while the page is on (--no-ui off), / only for a client that does not ask for JSON. */
bool cr_ui_public(cr_conn *c);

#endif
