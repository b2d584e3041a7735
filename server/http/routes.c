/* The route table; see routes.h. */
#include "server/http/routes.h"

#include <stdio.h>
#include <string.h>

#include "server/http/openapi.h"
#include "server/http/tensor_routes.h"
#include "server/http/v1.h"
#include "server/kserve/kserve.h"

static const cr_route routes[] = {
    {"/healthz", "GET", cr_route_healthz, CR_ROUTE_OTHER, false},
    {"/readyz", "GET", cr_route_readyz, CR_ROUTE_OTHER, false},
    {"/metrics", "GET", cr_route_metrics, CR_ROUTE_OTHER, false},
    {"/v1/info", "GET", cr_route_info, CR_ROUTE_OTHER, false},
    {"/openapi.yaml", "GET", cr_route_openapi, CR_ROUTE_OTHER, false},
    {"/v1/kernels", "GET", cr_route_kernels, CR_ROUTE_OTHER, false},
    {"/v1/gemm", "POST", cr_route_op, CR_ROUTE_GEMM, false},
    {"/v1/ata", "POST", cr_route_op, CR_ROUTE_ATA, false},
    {"/v1/histogram", "POST", cr_route_op, CR_ROUTE_HISTOGRAM, false},
    {"/v1/jobs", "POST", cr_route_job_submit, CR_ROUTE_JOBS, false},
    {"/v1/jobs/{id}", "GET", cr_route_job_status, CR_ROUTE_JOBS, false},
    {"/v1/jobs/{id}", "DELETE", cr_route_job_delete, CR_ROUTE_JOBS, false},
    {"/v1/jobs/{id}/result", "GET", cr_route_job_result, CR_ROUTE_JOBS, false},
    {"/v1/tensors", "POST", cr_route_tensor_create, CR_ROUTE_TENSORS, false},
    {"/v1/tensors", "GET", cr_route_tensor_list, CR_ROUTE_TENSORS, false},
    {"/v1/tensors/{id}", "GET", cr_route_tensor_get, CR_ROUTE_TENSORS, false},
    {"/v1/tensors/{id}", "DELETE", cr_route_tensor_delete, CR_ROUTE_TENSORS, false},
    {"/v2", "GET", cr_kserve_server_metadata, CR_ROUTE_OTHER, true},
    {"/v2/health/live", "GET", cr_kserve_live, CR_ROUTE_OTHER, true},
    {"/v2/health/ready", "GET", cr_kserve_ready, CR_ROUTE_OTHER, true},
    {"/v2/models/stats", "GET", cr_kserve_model_stats, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}", "GET", cr_kserve_model_metadata, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/versions/{version}", "GET", cr_kserve_model_metadata, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/ready", "GET", cr_kserve_model_ready, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/versions/{version}/ready", "GET", cr_kserve_model_ready, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/infer", "POST", cr_kserve_infer, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/versions/{version}/infer", "POST", cr_kserve_infer, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/config", "GET", cr_kserve_model_config, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/versions/{version}/config", "GET", cr_kserve_model_config, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/stats", "GET", cr_kserve_model_stats, CR_ROUTE_OTHER, true},
    {"/v2/models/{model}/versions/{version}/stats", "GET", cr_kserve_model_stats, CR_ROUTE_OTHER, true},
    {"/v2/repository/index", "POST", cr_kserve_repository_index, CR_ROUTE_OTHER, true},
    {"/v2/repository/models/{model}/load", "POST", cr_kserve_repository_load, CR_ROUTE_OTHER, true},
    {"/v2/repository/models/{model}/unload", "POST", cr_kserve_repository_load, CR_ROUTE_OTHER, true},
    {"/v2/systemsharedmemory/status", "GET", cr_kserve_shm_status, CR_ROUTE_OTHER, true},
    {"/v2/systemsharedmemory/region/{name}/status", "GET", cr_kserve_shm_status, CR_ROUTE_OTHER, true},
    {"/v2/systemsharedmemory/region/{name}/register", "POST", cr_kserve_shm_register, CR_ROUTE_OTHER, true},
    {"/v2/systemsharedmemory/region/{name}/unregister", "POST", cr_kserve_shm_unregister, CR_ROUTE_OTHER, true},
    {"/v2/systemsharedmemory/unregister", "POST", cr_kserve_shm_unregister, CR_ROUTE_OTHER, true},
    {"/v2/cudasharedmemory/status", "GET", cr_kserve_cuda_shm_status, CR_ROUTE_OTHER, true},
    {"/v2/cudasharedmemory/region/{name}/status", "GET", cr_kserve_cuda_shm_status, CR_ROUTE_OTHER, true},
    {"/v2/cudasharedmemory/region/{name}/register", "POST", cr_kserve_cuda_shm_register, CR_ROUTE_OTHER, true},
    {"/v2/cudasharedmemory/region/{name}/unregister", "POST", cr_kserve_cuda_shm_unregister, CR_ROUTE_OTHER, true},
    {"/v2/cudasharedmemory/unregister", "POST", cr_kserve_cuda_shm_unregister, CR_ROUTE_OTHER, true},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

/* Matches a pattern whose {holes} each take one non-empty path segment; *id points at the
 * first hole's text inside path. */
static bool path_matches(const char *pattern, const char *path, const char **id)
{
    const char *first = NULL;
    while (*pattern) {
        if (*pattern == '{') {
            size_t seg = strcspn(path, "/");
            if (seg == 0)
                return false;
            first = first ? first : path;
            path += seg;
            pattern += strcspn(pattern, "}");
            pattern += *pattern ? 1 : 0;
        } else if (*pattern++ != *path++) {
            return false;
        }
    }
    if (*path)
        return false;
    *id = first;
    return true;
}

const cr_route *cr_route_find(const char *method, const char *path, const char **id, char *allow,
                              size_t allow_len)
{
    allow[0] = '\0';
    bool head = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const char *rid = NULL;
        if (!path_matches(routes[i].path, path, &rid))
            continue;
        if (strcmp(routes[i].method, method) == 0 || (head && strcmp(routes[i].method, "GET") == 0)) {
            *id = rid;
            return &routes[i];
        }
        size_t n = strlen(allow);
        snprintf(allow + n, allow_len - n, "%s%s%s", n ? ", " : "", routes[i].method,
                 strcmp(routes[i].method, "GET") == 0 ? ", HEAD" : "");
    }
    return NULL;
}
