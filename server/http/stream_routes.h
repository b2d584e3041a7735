/* Streams over HTTP (server/engine/streams.h): POST /v1/jobs with {"stream": true} opens one,
 * PUT /v1/jobs/{id}/parts/{seq} adds a part (raw rows or .npy, histogram values; or JSON naming
 * rows in a registered shared-memory region, read in place), POST /v1/jobs/{id}/finish closes it;
 * GET /v1/jobs/{id} shows its progress, DELETE abandons it, the result is fetched as any job's. */
#ifndef CRUNCHD_HTTP_STREAM_ROUTES_H
#define CRUNCHD_HTTP_STREAM_ROUTES_H

#include <stdbool.h>

#include "server/http/conn.h"

/* Whether a JSON body of POST /v1/jobs asks for a stream ({"stream": true}); then it answers it. */
bool cr_stream_asked(const cr_conn *c);
enum MHD_Result cr_route_stream_open(cr_conn *c);
enum MHD_Result cr_route_stream_part(cr_conn *c);
enum MHD_Result cr_route_stream_finish(cr_conn *c);

/* GET /v1/jobs/{id} of a stream: the job's status with {"stream": progress}; NULL when j is no
 * open stream. */
char *cr_stream_status_json(const cr_job *j, size_t *len);
/* DELETE of an open stream: it ends now. Whether j was one. */
bool cr_stream_delete(const cr_job *j);

#endif
