/* The KServe v2 / Triton inference protocol on the same engine: /v2 (server metadata),
 * /v2/health/{live,ready}, /v2/models/{gemm|ata|histogram}[/versions/1][/ready|/infer].
 * Requests carry JSON tensors or, with Triton's binary tensor data extension, a JSON header of
 * Inference-Header-Content-Length bytes followed by the raw little-endian tensors. Errors on
 * these routes are KServe's {"error": "message"} with the status of server/error.h's codes. */
#ifndef CRUNCHD_KSERVE_H
#define CRUNCHD_KSERVE_H

#include <stddef.h>

#include "server/error.h"
#include "server/http/body_stream.h"
#include "server/http/conn.h"

/* Route handlers (rows of server/http/routes.c's table marked kserve). */
enum MHD_Result cr_kserve_server_metadata(cr_conn *c); /* GET /v2 */
enum MHD_Result cr_kserve_live(cr_conn *c);            /* GET /v2/health/live */
enum MHD_Result cr_kserve_ready(cr_conn *c);           /* GET /v2/health/ready */
enum MHD_Result cr_kserve_model_metadata(cr_conn *c);  /* GET /v2/models/{model}[/versions/v] */
enum MHD_Result cr_kserve_model_ready(cr_conn *c);     /* GET .../ready */
enum MHD_Result cr_kserve_infer(cr_conn *c);           /* POST .../infer */
enum MHD_Result cr_kserve_model_config(cr_conn *c);    /* GET .../config (Triton) */
enum MHD_Result cr_kserve_model_stats(cr_conn *c);     /* GET /v2/models[/{model}[/versions/v]]/stats */
enum MHD_Result cr_kserve_repository_index(cr_conn *c);/* POST /v2/repository/index */
enum MHD_Result cr_kserve_repository_load(cr_conn *c); /* POST /v2/repository/models/{model}/(un)load */
/* Triton's system shared memory extension (kserve_shm_routes.c); {name} is a region. */
enum MHD_Result cr_kserve_shm_status(cr_conn *c);     /* GET /v2/systemsharedmemory[/region/{name}]/status */
enum MHD_Result cr_kserve_shm_register(cr_conn *c);   /* POST .../region/{name}/register */
enum MHD_Result cr_kserve_shm_unregister(cr_conn *c); /* POST /v2/systemsharedmemory[/region/{name}]/unregister */
/* Triton's CUDA shared memory extension, the same routes under /v2/cudasharedmemory. */
enum MHD_Result cr_kserve_cuda_shm_status(cr_conn *c);
enum MHD_Result cr_kserve_cuda_shm_register(cr_conn *c);
enum MHD_Result cr_kserve_cuda_shm_unregister(cr_conn *c);

/* First call of a POST on a kserve route: accepted content types (none, application/json,
 * application/octet-stream), a well-formed Inference-Header-Content-Length, and the body limit
 * (--max-body-mb with binary tensors, --max-json-mb without). MHD_YES, or the refusal sent. */
enum MHD_Result cr_kserve_begin(cr_conn *c);

/* An inference request with binary tensors on the direct path (server/http/direct.h), read by us
 * instead of libmicrohttpd (kserve_direct.c): begin checks the head as cr_kserve_begin does (a
 * refusal is answered once the body has been read and dropped); receive reads the JSON header
 * into memory, decodes it, and receives each binary tensor straight into its buffer (0, or -1
 * when the connection failed); cr_kserve_infer then runs what was decoded. */
enum MHD_Result cr_kserve_direct_begin(cr_conn *c);
int cr_kserve_direct_receive(cr_conn *c, cr_body_stream *s);
void cr_kserve_direct_free(cr_conn *c);

#endif
