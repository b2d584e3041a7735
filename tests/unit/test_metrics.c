/* The metrics exposition text: names, labels, cumulative buckets, escaping. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "server/obs/metrics.h"

static void test_render(void)
{
    cr_metrics_reset();
    cr_metrics_request(CR_ROUTE_GEMM, 200, 0.003);
    cr_metrics_request(CR_ROUTE_GEMM, 200, 0.2);
    cr_metrics_request(CR_ROUTE_OTHER, 404, 0.0001);
    cr_metrics_request(CR_ROUTE_GEMM, 9999, 1.0); /* out of range: ignored, not a crash */
    cr_metrics_bytes_in(1234);
    cr_phase_ms ms = {.receive = 0.7, .queue = 0.05, .h2d = 0.2, .kernel = 3.0, .d2h = 0.2, .total = 4.0};
    cr_metrics_job(CR_OP_GEMM, &ms, 2e9, 4);
    cr_metrics_gauges g = {.queued = 3, .running = 1, .n_devices = 1, .backend = "cpu",
                           .version = "1.2.3", .cuda = "none"};
    strcpy(g.dev[0].name, "0:weird \"name\"\\");
    g.dev[0].used_bytes = 42;
    g.dev[0].stream_cap_bytes = 1 << 30;
    g.dev[0].ready = true;
    size_t len = 0;
    char *t = cr_metrics_render(&g, &len);
    CHECK(t != NULL && strlen(t) == len);
    CHECK(strstr(t, "crunchd_requests_total{op=\"gemm\",code=\"200\"} 2\n") != NULL);
    CHECK(strstr(t, "crunchd_requests_total{op=\"other\",code=\"404\"} 1\n") != NULL);
    CHECK(strstr(t, "code=\"9999\"") == NULL);
    CHECK(strstr(t, "crunchd_received_bytes_total 1234\n") != NULL);
    CHECK(strstr(t, "crunchd_jobs_in_queue 3\n") != NULL);
    CHECK(strstr(t, "crunchd_jobs_running 1\n") != NULL);
    CHECK(strstr(t, "crunchd_flops_total{op=\"gemm\"} 2000000000\n") != NULL);
    CHECK(strstr(t, "crunchd_jobs_done_total{op=\"gemm\"} 1\n") != NULL);
    CHECK(strstr(t, "crunchd_matrices_total{op=\"gemm\"} 4\n") != NULL);
    /* 3 ms lands in the 0.005 s bucket and every bucket after it: cumulative counts */
    CHECK(strstr(t, "crunchd_job_duration_seconds_bucket{op=\"gemm\",phase=\"kernel\",le=\"0.0025\"} 0\n") != NULL);
    CHECK(strstr(t, "crunchd_job_duration_seconds_bucket{op=\"gemm\",phase=\"kernel\",le=\"0.005\"} 1\n") != NULL);
    CHECK(strstr(t, "crunchd_job_duration_seconds_bucket{op=\"gemm\",phase=\"kernel\",le=\"+Inf\"} 1\n") != NULL);
    CHECK(strstr(t, "crunchd_job_duration_seconds_count{op=\"gemm\",phase=\"total\"} 1\n") != NULL);
    CHECK(strstr(t, "crunchd_device_memory_used_bytes{device=\"0:weird \\\"name\\\"\\\\\"} 42\n") != NULL);
    CHECK(strstr(t, "crunchd_device_stream_cap_bytes{device=\"0:weird \\\"name\\\"\\\\\"} 1073741824\n") != NULL);
    CHECK(strstr(t, "crunchd_device_ready{device=") != NULL);
    CHECK(strstr(t, "crunchd_build_info{version=\"1.2.3\",backend=\"cpu\",cuda=\"none\"} 1\n") != NULL);
    CHECK(strstr(t, "# TYPE crunchd_job_duration_seconds histogram\n") != NULL);
    CHECK(strstr(t, "crunchd_job_duration_seconds_bucket{op=\"gemm\",phase=\"receive\",le=\"0.001\"} 1\n") != NULL);
    /* first byte to last, by route and code: 3 ms and 200 ms of gemm 200, 0.1 ms of other 404 */
    CHECK(strstr(t, "# TYPE crunchd_request_duration_seconds histogram\n") != NULL);
    CHECK(strstr(t, "crunchd_request_duration_seconds_bucket{route=\"gemm\",code=\"200\",le=\"0.005\"} 1\n") != NULL);
    CHECK(strstr(t, "crunchd_request_duration_seconds_bucket{route=\"gemm\",code=\"200\",le=\"0.25\"} 2\n") != NULL);
    CHECK(strstr(t, "crunchd_request_duration_seconds_count{route=\"other\",code=\"404\"} 1\n") != NULL);
    CHECK(strstr(t, "crunchd_request_duration_seconds_count{route=\"gemm\",code=\"9999\"}") == NULL);
    CHECK(strstr(t, "process_resident_memory_bytes ") != NULL && strstr(t, "process_open_fds ") != NULL);
    CHECK(strstr(t, "process_start_time_seconds ") != NULL && strstr(t, "process_cpu_seconds_total ") != NULL);
    CHECK(strstr(t, "crunchd_pinned_host_bytes") == NULL); /* a backend without pinned memory */
    free(t);
    g.shm_regions = 2;
    g.shm_registered_bytes = 12345;
    g.has_pinned = true;
    g.pinned_in_use = 5 << 20;
    g.pinned_cached = 7 << 20;
    g.pinned_staging = 3 << 20;
    t = cr_metrics_render(&g, &len);
    CHECK(t != NULL);
    CHECK(strstr(t, "crunchd_pinned_host_bytes{state=\"in_use\"} 5242880\n") != NULL);
    CHECK(strstr(t, "crunchd_pinned_host_bytes{state=\"cached\"} 7340032\n") != NULL);
    CHECK(strstr(t, "crunchd_pinned_host_bytes{state=\"staging\"} 3145728\n") != NULL);
    CHECK(strstr(t, "# TYPE crunchd_shm_regions gauge\ncrunchd_shm_regions 2\n") != NULL);
    CHECK(strstr(t, "# TYPE crunchd_shm_registered_bytes gauge\ncrunchd_shm_registered_bytes 12345\n") != NULL);
    free(t);
}

int main(void)
{
    test_render();
    return check_summary("test_metrics");
}
