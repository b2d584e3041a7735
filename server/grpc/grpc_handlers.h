/* The methods' handlers, one file per family: grpc_models.c (health of the server and models,
 * metadata, configuration, statistics, the repository), grpc_infer.c (ModelInfer and
 * ModelStreamInfer), grpc_shm.c (system and CUDA shared memory), grpc_health.c
 * (grpc.health.v1). Each gets a request message of its call (grpc_call.h) and ends the call. */
#ifndef CRUNCHD_GRPC_HANDLERS_H
#define CRUNCHD_GRPC_HANDLERS_H

#include "server/grpc/grpc_call.h"

void cr_grpc_server_live(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_server_ready(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_model_ready(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_server_metadata(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_model_metadata(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_model_config(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_model_statistics(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_repository_index(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_repository_load(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_repository_unload(cr_grpc_call *c, cr_grpc_msg *m);

void cr_grpc_model_infer(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_stream_infer(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_stream_infer_end(cr_grpc_call *c);

void cr_grpc_shm_status(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_shm_register(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_shm_unregister(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_cuda_shm_status(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_cuda_shm_register(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_cuda_shm_unregister(cr_grpc_call *c, cr_grpc_msg *m);

void cr_grpc_health_check(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_health_watch(cr_grpc_call *c, cr_grpc_msg *m);
void cr_grpc_health_watch_end(cr_grpc_call *c);
void cr_grpc_health_watch_tick(cr_grpc_call *c, double now);

#endif
