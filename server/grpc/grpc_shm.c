/* Triton's system and CUDA shared memory extensions over gRPC (grpc_handlers.h), on the same
 * region tables as /v2/systemsharedmemory and /v2/cudasharedmemory (server/kserve/shm_region.h,
 * cuda_shm_region.h): a region registered by one protocol is used and unregistered by either.
 * A registration counts against its client's cap: the token when the call carried it, else the
 * peer's IP address, as over HTTP. */
#include <stdlib.h>
#include <string.h>

#include "api/grpc/grpc_service.pb-c.h"
#include "server/grpc/grpc_handlers.h"
#include "server/grpc/grpc_pb.h"
#include "server/kserve/cuda_shm_region.h"
#include "server/kserve/shm_region.h"

#define UNPACK(type, fn, c, m) ((type *)cr_grpc_unpack((c), &fn##__descriptor, (m)))

/* A region name the tables could hold, or the call ended. */
static bool name_fits(cr_grpc_call *c, const char *name)
{
    if (strlen(name) <= CR_SHM_NAME_MAX)
        return true;
    cr_grpc_failf(c, 400, "invalid_field", "name", "a region name has at most %d characters", CR_SHM_NAME_MAX);
    return false;
}

static void reply_empty(cr_grpc_call *c, const ProtobufCMessageDescriptor *d)
{
    ProtobufCMessage m;
    protobuf_c_message_init(d, &m);
    cr_grpc_reply_pb(c, &m);
}

/* ---- system shared memory ------------------------------------------------------------------- */

void cr_grpc_shm_status(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__SystemSharedMemoryStatusRequest *rq =
        UNPACK(Inference__SystemSharedMemoryStatusRequest, inference__system_shared_memory_status_request, c, m);
    if (!rq)
        return;
    cr_shm_info *list = NULL;
    size_t n = 0;
    cr_error err;
    int rc = name_fits(c, rq->name) ? cr_shm_status(rq->name[0] ? rq->name : NULL, &list, &n, &err) : 1;
    inference__system_shared_memory_status_request__free_unpacked(rq, NULL);
    if (rc < 0)
        cr_grpc_call_fail(c, &err);
    if (rc != 0)
        return;
    Inference__SystemSharedMemoryStatusResponse__RegionStatus *st = calloc(n ? n : 1, sizeof *st);
    Inference__SystemSharedMemoryStatusResponse__RegionsEntry *en = calloc(n ? n : 1, sizeof *en), **ptr =
        calloc(n ? n : 1, sizeof *ptr);
    if (!st || !en || !ptr) {
        cr_grpc_failf(c, 503, "host_memory", "", "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        st[i] = (Inference__SystemSharedMemoryStatusResponse__RegionStatus)
            INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__REGION_STATUS__INIT;
        st[i].name = list[i].name;
        st[i].key = list[i].key;
        st[i].offset = list[i].offset;
        st[i].byte_size = list[i].byte_size;
        en[i] = (Inference__SystemSharedMemoryStatusResponse__RegionsEntry)
            INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__REGIONS_ENTRY__INIT;
        en[i].key = list[i].name;
        en[i].value = &st[i];
        ptr[i] = &en[i];
    }
    Inference__SystemSharedMemoryStatusResponse r = INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    r.n_regions = n;
    r.regions = ptr;
    cr_grpc_reply_pb(c, &r.base);
cleanup:
    free(ptr);
    free(en);
    free(st);
    free(list);
}

void cr_grpc_shm_register(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__SystemSharedMemoryRegisterRequest *rq =
        UNPACK(Inference__SystemSharedMemoryRegisterRequest, inference__system_shared_memory_register_request, c, m);
    if (!rq)
        return;
    cr_shm_owner owner = {.pid = 0}; /* TCP: no process to watch */
    cr_peer_client(c->peer, c->authenticated, owner.client, sizeof owner.client);
    cr_error err;
    int rc = !name_fits(c, rq->name) ? 1
             : cr_cuda_shm_registered(rq->name) /* one namespace for both kinds, as Triton's */
                 ? cr_fail(&err, 409, "already_exists", "name",
                           "'%s' is registered as a CUDA shared memory region (unregister it first)", rq->name)
                 : cr_shm_register(rq->name, rq->key, rq->offset, rq->byte_size, &owner, &err);
    inference__system_shared_memory_register_request__free_unpacked(rq, NULL);
    if (rc < 0)
        cr_grpc_call_fail(c, &err);
    else if (rc == 0)
        reply_empty(c, &inference__system_shared_memory_register_response__descriptor);
}

void cr_grpc_shm_unregister(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__SystemSharedMemoryUnregisterRequest *rq = UNPACK(
        Inference__SystemSharedMemoryUnregisterRequest, inference__system_shared_memory_unregister_request, c, m);
    if (!rq)
        return;
    cr_error err;
    int rc = !name_fits(c, rq->name) ? 1
             : rq->name[0]           ? cr_shm_unregister(rq->name, &err)
                                     : cr_shm_unregister_all(&err);
    inference__system_shared_memory_unregister_request__free_unpacked(rq, NULL);
    if (rc < 0)
        cr_grpc_call_fail(c, &err);
    else if (rc == 0)
        reply_empty(c, &inference__system_shared_memory_unregister_response__descriptor);
}

/* ---- CUDA shared memory --------------------------------------------------------------------- */

void cr_grpc_cuda_shm_status(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__CudaSharedMemoryStatusRequest *rq =
        UNPACK(Inference__CudaSharedMemoryStatusRequest, inference__cuda_shared_memory_status_request, c, m);
    if (!rq)
        return;
    cr_cuda_shm_info *list = NULL;
    size_t n = 0;
    cr_error err;
    int rc = name_fits(c, rq->name) ? cr_cuda_shm_status(rq->name[0] ? rq->name : NULL, &list, &n, &err) : 1;
    inference__cuda_shared_memory_status_request__free_unpacked(rq, NULL);
    if (rc < 0)
        cr_grpc_call_fail(c, &err);
    if (rc != 0)
        return;
    Inference__CudaSharedMemoryStatusResponse__RegionStatus *st = calloc(n ? n : 1, sizeof *st);
    Inference__CudaSharedMemoryStatusResponse__RegionsEntry *en = calloc(n ? n : 1, sizeof *en), **ptr =
        calloc(n ? n : 1, sizeof *ptr);
    if (!st || !en || !ptr) {
        cr_grpc_failf(c, 503, "host_memory", "", "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        st[i] = (Inference__CudaSharedMemoryStatusResponse__RegionStatus)
            INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__REGION_STATUS__INIT;
        st[i].name = list[i].name;
        st[i].device_id = (uint64_t)list[i].device_id;
        st[i].byte_size = list[i].byte_size;
        en[i] = (Inference__CudaSharedMemoryStatusResponse__RegionsEntry)
            INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__REGIONS_ENTRY__INIT;
        en[i].key = list[i].name;
        en[i].value = &st[i];
        ptr[i] = &en[i];
    }
    Inference__CudaSharedMemoryStatusResponse r = INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    r.n_regions = n;
    r.regions = ptr;
    cr_grpc_reply_pb(c, &r.base);
cleanup:
    free(ptr);
    free(en);
    free(st);
    free(list);
}

void cr_grpc_cuda_shm_register(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__CudaSharedMemoryRegisterRequest *rq =
        UNPACK(Inference__CudaSharedMemoryRegisterRequest, inference__cuda_shared_memory_register_request, c, m);
    if (!rq)
        return;
    cr_error err;
    int rc = !name_fits(c, rq->name) ? 1
             : rq->device_id < 0 || rq->device_id > 1024
                 ? cr_fail(&err, 400, "invalid_field", "device_id", "device_id %lld is not a device",
                           (long long)rq->device_id)
                 : cr_cuda_shm_register(rq->name, rq->raw_handle.data, rq->raw_handle.len, (int)rq->device_id,
                                        rq->byte_size, &err);
    inference__cuda_shared_memory_register_request__free_unpacked(rq, NULL);
    if (rc < 0)
        cr_grpc_call_fail(c, &err);
    else if (rc == 0)
        reply_empty(c, &inference__cuda_shared_memory_register_response__descriptor);
}

void cr_grpc_cuda_shm_unregister(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__CudaSharedMemoryUnregisterRequest *rq =
        UNPACK(Inference__CudaSharedMemoryUnregisterRequest, inference__cuda_shared_memory_unregister_request, c, m);
    if (!rq)
        return;
    cr_error err;
    int rc = !name_fits(c, rq->name) ? 1
             : rq->name[0]           ? cr_cuda_shm_unregister(rq->name, &err)
                                     : cr_cuda_shm_unregister_all(&err);
    inference__cuda_shared_memory_unregister_request__free_unpacked(rq, NULL);
    if (rc < 0)
        cr_grpc_call_fail(c, &err);
    else if (rc == 0)
        reply_empty(c, &inference__cuda_shared_memory_unregister_response__descriptor);
}
