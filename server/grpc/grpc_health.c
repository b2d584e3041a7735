/* grpc.health.v1.Health (grpc_handlers.h): what Kubernetes' native grpc probe, grpcio-health-
 * checking and service meshes ask. "" (the server) and inference.GRPCInferenceService are SERVING
 * while the engine is ready and NOT_SERVING otherwise (draining, a device fault, a saturated
 * queue), as /readyz; "liveness" is SERVING while the process answers at all, as /healthz, so a
 * liveness probe does not restart a daemon that drains. Check: any other name is NOT_FOUND, as
 * the protocol says. Watch: the status now, then each change as it happens (looked at a few times
 * a second); SERVICE_UNKNOWN for another name, the stream kept; at the drain NOT_SERVING, then the
 * stream ends UNAVAILABLE so that it does not hold the drain. Open without the token: probes carry
 * no secrets. */
#include <stdlib.h>
#include <string.h>

#include "api/grpc/health.pb-c.h"
#include "server/grpc/grpc_handlers.h"
#include "server/grpc/grpc_pb.h"

typedef enum { SERVICE_UNKNOWN, SERVICE_READY, SERVICE_LIVE } service;

static service service_of(const char *name)
{
    if (strcmp(name, "liveness") == 0)
        return SERVICE_LIVE;
    return !name[0] || strcmp(name, "inference.GRPCInferenceService") == 0 ? SERVICE_READY : SERVICE_UNKNOWN;
}

static Grpc__Health__V1__HealthCheckResponse__ServingStatus status_of(cr_grpc_call *c, service s)
{
    const char *reason = "";
    if (s == SERVICE_UNKNOWN)
        return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
    return s == SERVICE_LIVE || cr_engine_ready(c->srv->engine, &reason)
               ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
               : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
}

/* The request's service; -1 with the call ended when the message does not parse. */
static int requested(cr_grpc_call *c, cr_grpc_msg *m)
{
    Grpc__Health__V1__HealthCheckRequest *rq =
        (Grpc__Health__V1__HealthCheckRequest *)cr_grpc_unpack(c, &grpc__health__v1__health_check_request__descriptor, m);
    if (!rq)
        return -1;
    service s = service_of(rq->service);
    if (s == SERVICE_UNKNOWN && c->method->on_message == cr_grpc_health_check)
        cr_grpc_failf(c, 404, "not_found", "service", "unknown service \"%.64s\" (\"\", "
                      "\"inference.GRPCInferenceService\", \"liveness\")", rq->service);
    grpc__health__v1__health_check_request__free_unpacked(rq, NULL);
    return (int)s;
}

void cr_grpc_health_check(cr_grpc_call *c, cr_grpc_msg *m)
{
    int s = requested(c, m);
    if (s < 0 || s == SERVICE_UNKNOWN)
        return;
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = status_of(c, (service)s);
    cr_grpc_reply_pb(c, &r.base);
}

/* ---- Watch ---------------------------------------------------------------------------------- */

typedef struct {
    service service;
    int sent; /* the status last sent; -1: none yet */
} watch;

static void watch_free(cr_grpc_call *c)
{
    free(c->ctx);
    c->ctx = NULL;
}

/* One HealthCheckResponse on the stream, the call left open. */
static int send_status(cr_grpc_call *c, Grpc__Health__V1__HealthCheckResponse__ServingStatus st)
{
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = st;
    uint8_t *body;
    cr_grpc_out *out = cr_grpc_out_bytes(protobuf_c_message_get_packed_size(&r.base), &body);
    if (!out) {
        cr_grpc_failf(c, 503, "host_memory", "", "out of memory for the answer");
        return -1;
    }
    protobuf_c_message_pack(&r.base, body);
    cr_grpc_call_send(c, out);
    ((watch *)c->ctx)->sent = (int)st;
    return 0;
}

void cr_grpc_health_watch(cr_grpc_call *c, cr_grpc_msg *m)
{
    if (c->ctx) /* a server-streaming call takes one request */
        return cr_grpc_failf(c, 400, "invalid_field", "message", "Watch takes one request message");
    int s = requested(c, m);
    if (s < 0)
        return;
    watch *w = malloc(sizeof *w);
    if (!w)
        return cr_grpc_failf(c, 503, "host_memory", "", "out of memory");
    *w = (watch){(service)s, -1};
    c->ctx = w;
    c->ctx_free = watch_free;
    send_status(c, status_of(c, w->service));
}

void cr_grpc_health_watch_end(cr_grpc_call *c)
{
    if (!c->ctx) /* half-closed before asking */
        cr_grpc_failf(c, 400, "invalid_field", "message", "Watch needs a HealthCheckRequest");
}

void cr_grpc_health_watch_tick(cr_grpc_call *c, double now)
{
    (void)now;
    watch *w = c->ctx;
    if (!w)
        return;
    bool draining = atomic_load(&c->srv->draining);
    Grpc__Health__V1__HealthCheckResponse__ServingStatus st =
        draining && w->service != SERVICE_UNKNOWN ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                                                  : status_of(c, w->service);
    if ((int)st != w->sent && send_status(c, st) < 0)
        return;
    if (draining)
        cr_grpc_call_finish(c, CR_GRPC_UNAVAILABLE, "the daemon is draining (it stops serving)");
}
