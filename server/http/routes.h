/* The route table: every URL the daemon serves, its method, handler and metrics label. */
#ifndef CRUNCHD_HTTP_ROUTES_H
#define CRUNCHD_HTTP_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

#include "server/http/conn.h"

typedef struct {
    const char *path;       /* exact but for {holes}, each one path segment: /v1/jobs/{id} */
    const char *method;
    cr_handler handler;
    cr_route_label label;
    bool kserve;            /* a KServe v2 route: its body types, limits and error bodies */
} cr_route;

/* The route for method and path (HEAD matches GET); *id points at the first hole's text inside
 * path. NULL when none: then allow holds the methods the path takes (for a 405), or is empty. */
const cr_route *cr_route_find(const char *method, const char *path, const char **id, char *allow,
                              size_t allow_len);

#endif
