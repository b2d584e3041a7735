/* The page's three files; see ui.h. Built in with .incbin as the spec is (openapi.c), so the page
 * a binary serves is the one it was built with; the Makefile rebuilds this file when they change. */
#include "server/http/ui.h"

#include <string.h>

#include "server/http/answer_coding.h"
#include "server/http/respond.h"

#define EMBED(sym, path)                                                                                    \
    __asm__(".section .rodata\n.global " #sym "\n" #sym ":\n.incbin \"" path "\"\n.global " #sym "_end\n" #sym \
            "_end:\n.byte 0\n.previous\n")

EMBED(cr_ui_index_html, "server/ui/index.html");
EMBED(cr_ui_app_js, "server/ui/app.js");
EMBED(cr_ui_app_css, "server/ui/app.css");

extern const char cr_ui_index_html[], cr_ui_index_html_end[], cr_ui_app_js[], cr_ui_app_js_end[], cr_ui_app_css[],
    cr_ui_app_css_end[];

/* Nothing but the daemon's own files and its own API: no inline script or style, no other origin,
 * no framing by another page. */
#define UI_CSP                                                                                                   \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "      \
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static bool ui_on(const cr_conn *c) { return !c->h->deps.cfg->no_ui; }

/* A client that asks for JSON and not HTML (Accept: application/json) gets what / gave before
 * the page: 404. Browsers, curl's *\/\* and no Accept at all get the page. */
static bool wants_page(cr_conn *c)
{
    const char *accept = cr_header(c, "Accept");
    return !accept || strstr(accept, "text/html") || !strstr(accept, "application/json");
}

static enum MHD_Result not_found(cr_conn *c)
{
    return cr_refuse(c, 404, "not_found", "", "no such route (see /v1/info and api/openapi.yaml)");
}

static enum MHD_Result send_file(cr_conn *c, const char *type, const char *start, const char *end)
{
    if (!ui_on(c))
        return not_found(c);
    cr_span body = {start, (size_t)(end - start)};
    struct MHD_Response *r = cr_answer_response(c, type, &body, 1, NULL, NULL);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Security-Policy", UI_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return cr_queue(c, 200, r);
}

enum MHD_Result cr_route_ui_page(cr_conn *c)
{
    if (!wants_page(c))
        return not_found(c);
    return send_file(c, "text/html; charset=utf-8", cr_ui_index_html, cr_ui_index_html_end);
}

enum MHD_Result cr_route_ui_script(cr_conn *c)
{
    return send_file(c, "text/javascript; charset=utf-8", cr_ui_app_js, cr_ui_app_js_end);
}

enum MHD_Result cr_route_ui_style(cr_conn *c)
{
    return send_file(c, "text/css; charset=utf-8", cr_ui_app_css, cr_ui_app_css_end);
}

bool cr_ui_public(cr_conn *c)
{
    if (!ui_on(c) || (strcmp(c->method, "GET") != 0 && strcmp(c->method, "HEAD") != 0))
        return false;
    if (strcmp(c->path, "/ui/app.js") == 0 || strcmp(c->path, "/ui/app.css") == 0)
        return true;
    return strcmp(c->path, "/") == 0 && wants_page(c);
}
