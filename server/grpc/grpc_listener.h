/* The gRPC listener (issue 38): Triton's KServe v2 gRPC protocol (inference.GRPCInferenceService)
 * and grpc.health.v1 on --grpc-port, beside the HTTP listener, on the same engine, limits and
 * budget. main.c prepares it before the engine starts (so a busy port or a bad key pair is a
 * start-up error at once), starts it once the engine is up, drains and cuts it off with HTTP's
 * drain, and stops it after the engine. Every function takes NULL (gRPC off: --grpc-port 0). */
#ifndef CRUNCHD_GRPC_LISTENER_H
#define CRUNCHD_GRPC_LISTENER_H

#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "server/engine/engine.h"

typedef struct cr_grpc cr_grpc;

/* Loads the token and TLS credentials and checks that the port is free. *out NULL when gRPC is
 * off (--grpc-port 0, or nowhere to bind: --bind none without --grpc-bind). -1 with err. */
int cr_grpc_prepare(const cr_config *cfg, cr_grpc **out, char *err, size_t errlen);
/* Binds and starts the event loops on engine e (cfg sized by it: --grpc-threads 0 follows its
 * --http-threads); the bound port in *port. -1 with err (g is still the caller's to stop). */
int cr_grpc_listen(cr_grpc *g, cr_engine *e, uint16_t *port, char *err, size_t errlen);
/* "0.0.0.0:8001" (and ", TLS"): for the start-up line. */
void cr_grpc_describe(const cr_grpc *g, char *out, size_t n);
/* SIGTERM: GOAWAY on every connection; what they started goes on. */
void cr_grpc_drain(cr_grpc *g);
/* The drain's grace period is over: calls still waiting for a job are answered UNAVAILABLE now
 * (their jobs are the engine's cut-off's). Returns how many were waiting. */
int cr_grpc_cut_off(cr_grpc *g);
/* Calls begun and not yet ended. */
int cr_grpc_active(const cr_grpc *g);
/* Closes everything and frees g. After cr_engine_stop: no job may finish later. */
void cr_grpc_stop(cr_grpc *g);

#endif
