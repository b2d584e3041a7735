/* grpc.health.v1.Health/Check (grpc_handlers.h): what Kubernetes' native grpc probe and
 * grpcio-health-checking ask. "" (the server) and inference.GRPCInferenceService are SERVING
 * while the engine is ready and NOT_SERVING otherwise (draining, a device fault, a saturated
 * queue), as /readyz; "liveness" is SERVING while the process answers at all, as /healthz, so a
 * liveness probe does not restart a daemon that drains. Any other name is NOT_FOUND, as the
 * protocol says. Open without the token: probes carry no secrets. */
#include <string.h>

#include "api/grpc/health.pb-c.h"
#include "server/grpc/grpc_handlers.h"
#include "server/grpc/grpc_pb.h"

void cr_grpc_health_check(cr_grpc_call *c, cr_grpc_msg *m)
{
    Grpc__Health__V1__HealthCheckRequest *rq =
        (Grpc__Health__V1__HealthCheckRequest *)cr_grpc_unpack(c, &grpc__health__v1__health_check_request__descriptor, m);
    if (!rq)
        return;
    const char *reason = "";
    bool live = strcmp(rq->service, "liveness") == 0;
    bool known = live || !rq->service[0] || strcmp(rq->service, "inference.GRPCInferenceService") == 0;
    if (!known)
        cr_grpc_failf(c, 404, "not_found", "service", "unknown service \"%.64s\" (\"\", "
                      "\"inference.GRPCInferenceService\", \"liveness\")", rq->service);
    grpc__health__v1__health_check_request__free_unpacked(rq, NULL);
    if (!known)
        return;
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = live || cr_engine_ready(c->srv->engine, &reason)
                   ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                   : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    cr_grpc_reply_pb(c, &r.base);
}
