/* The OpenAPI document of this daemon's API, served as it was built. */
#ifndef CRUNCHD_HTTP_OPENAPI_H
#define CRUNCHD_HTTP_OPENAPI_H

#include "server/http/conn.h"

enum MHD_Result cr_route_openapi(cr_conn *c); /* GET /openapi.yaml */

#endif
