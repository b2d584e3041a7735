/* The /v1 routes and the service endpoints (health, readiness, metrics, info, kernels): what each
 * URL does, in terms of the engine, the job table, the decoders and the answers. */
#ifndef CRUNCHD_HTTP_V1_H
#define CRUNCHD_HTTP_V1_H

#include "server/http/conn.h"

enum MHD_Result cr_route_healthz(cr_conn *c);
enum MHD_Result cr_route_readyz(cr_conn *c);
enum MHD_Result cr_route_metrics(cr_conn *c);
enum MHD_Result cr_route_info(cr_conn *c);
enum MHD_Result cr_route_kernels(cr_conn *c);
enum MHD_Result cr_route_op(cr_conn *c);         /* POST /v1/{gemm,ata,histogram} */
enum MHD_Result cr_route_job_submit(cr_conn *c); /* POST /v1/jobs */
enum MHD_Result cr_route_job_status(cr_conn *c);
enum MHD_Result cr_route_job_result(cr_conn *c);
enum MHD_Result cr_route_job_delete(cr_conn *c);

#endif
