/* CORS preflights; see preflight.h. */
#include "server/http/preflight.h"

#include <string.h>

#include "server/http/respond.h"
#include "server/http/routes.h"

bool cr_is_preflight(cr_conn *c)
{
    return c->h->cors.enabled && strcmp(c->method, "OPTIONS") == 0 && cr_header(c, "Origin") &&
           cr_header(c, "Access-Control-Request-Method");
}

enum MHD_Result cr_preflight(cr_conn *c)
{
    const char *origin = cr_header(c, "Origin");
    if (!cr_cors_allows(&c->h->cors, origin))
        return cr_refuse(c, 403, "origin_not_allowed", "Origin",
                         "origin %.100s may not call this API from a browser (see --cors-origin)", origin);
    char allow[128];
    const char *id = NULL;
    /* No route takes OPTIONS: the lookup fails and lists the methods the path takes. */
    if (cr_route_find("OPTIONS", c->path, &id, allow, sizeof allow) || !allow[0])
        return cr_refuse(c, 404, "not_found", "", "no such route (see /v1/info and api/openapi.yaml)");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
    MHD_add_response_header(r, "Access-Control-Allow-Headers", CR_CORS_ALLOW_HEADERS);
    MHD_add_response_header(r, "Access-Control-Max-Age", CR_CORS_MAX_AGE_S);
    return cr_queue(c, 204, r);
}
