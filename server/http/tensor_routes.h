/* /v1/tensors: create, list, read and delete resident tensors (tensor_routes.c). */
#ifndef CRUNCHD_HTTP_TENSOR_ROUTES_H
#define CRUNCHD_HTTP_TENSOR_ROUTES_H

#include "server/http/conn.h"

enum MHD_Result cr_route_tensor_create(cr_conn *c); /* POST /v1/tensors */
enum MHD_Result cr_route_tensor_list(cr_conn *c);   /* GET /v1/tensors */
enum MHD_Result cr_route_tensor_get(cr_conn *c);    /* GET /v1/tensors/{id} */
enum MHD_Result cr_route_tensor_delete(cr_conn *c); /* DELETE /v1/tensors/{id} */

#endif
