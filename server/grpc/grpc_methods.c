/* The table of RPCs; see grpc_methods.h. */
#include "server/grpc/grpc_methods.h"

#include <string.h>

#include "server/grpc/grpc_handlers.h"

#define SVC "/inference.GRPCInferenceService/"
#define UNARY(name, fn) {SVC name, name, false, false, fn, NULL, NULL}

static const cr_grpc_method methods[] = {
    UNARY("ServerLive", cr_grpc_server_live),
    UNARY("ServerReady", cr_grpc_server_ready),
    UNARY("ModelReady", cr_grpc_model_ready),
    UNARY("ServerMetadata", cr_grpc_server_metadata),
    UNARY("ModelMetadata", cr_grpc_model_metadata),
    {SVC "ModelInfer", "ModelInfer", false, true, cr_grpc_model_infer, NULL, NULL},
    {SVC "ModelStreamInfer", "ModelStreamInfer", false, true, cr_grpc_stream_infer, cr_grpc_stream_infer_end, NULL},
    UNARY("ModelConfig", cr_grpc_model_config),
    UNARY("ModelStatistics", cr_grpc_model_statistics),
    UNARY("RepositoryIndex", cr_grpc_repository_index),
    UNARY("RepositoryModelLoad", cr_grpc_repository_load),
    UNARY("RepositoryModelUnload", cr_grpc_repository_unload),
    UNARY("SystemSharedMemoryStatus", cr_grpc_shm_status),
    UNARY("SystemSharedMemoryRegister", cr_grpc_shm_register),
    UNARY("SystemSharedMemoryUnregister", cr_grpc_shm_unregister),
    UNARY("CudaSharedMemoryStatus", cr_grpc_cuda_shm_status),
    UNARY("CudaSharedMemoryRegister", cr_grpc_cuda_shm_register),
    UNARY("CudaSharedMemoryUnregister", cr_grpc_cuda_shm_unregister),
    /* Kubernetes' grpc probe sends no credentials: open, as /healthz and /readyz are */
    {"/grpc.health.v1.Health/Check", "Health.Check", true, false, cr_grpc_health_check, NULL, NULL},
    {"/grpc.health.v1.Health/Watch", "Health.Watch", true, false, cr_grpc_health_watch, cr_grpc_health_watch_end,
     cr_grpc_health_watch_tick},
};

const cr_grpc_method *cr_grpc_method_find(const char *path)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].path, path) == 0)
            return &methods[i];
    return NULL;
}
