/* Flags and environment variables, one table so --help, env names and parsing cannot drift. */
#include "server/config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_INT, OPT_I64, OPT_STR, OPT_BOOL, OPT_LIST } opt_kind;

typedef struct {
    const char *flag;   /* long option name; env var is CRUNCHD_ + upper snake case */
    opt_kind kind;
    size_t offset;
    size_t size;        /* for strings: buffer size */
    int64_t min, max;   /* for numbers */
    const char *dflt;   /* the default as --help shows it; derived ones say from what */
    const char *help;
} opt_spec;

#define F(field) offsetof(cr_config, field), sizeof(((cr_config *)0)->field)
static const opt_spec specs[] = {
    {"port", OPT_INT, F(port), 0, 65535, "8080", "TCP port to listen on (0: any free port)"},
    {"bind", OPT_STR, F(bind), 0, 0, "127.0.0.1",
     "address to bind (0.0.0.0 in containers; none: no TCP, --unix-socket only)"},
    {"port-file", OPT_STR, F(port_file), 0, 0, "none", "write the bound port to this file once listening"},
    {"grpc-port", OPT_INT, F(grpc_port), -1, 65535, "8001",
     "gRPC port: Triton's KServe v2 inference protocol over HTTP/2 (tritonclient.grpc, perf_analyzer -i grpc) "
     "and grpc.health.v1 (0: off; -1: any free port, written to --grpc-port-file)"},
    {"grpc-bind", OPT_STR, F(grpc_bind), 0, 0, "--bind's address", "address the gRPC port binds"},
    {"grpc-port-file", OPT_STR, F(grpc_port_file), 0, 0, "none", "write the bound gRPC port to this file once listening"},
    {"grpc-unix-socket", OPT_STR, F(grpc_unix_socket), 0, 0, "none",
     "also serve gRPC on this Unix socket (grpc.insecure_channel(\"unix:PATH\")); --unix-socket-mode and "
     "-group apply, no TLS there"},
    {"grpc-threads", OPT_INT, F(grpc_threads), 0, 64, "0: as many as --http-threads",
     "the gRPC listener's event loop threads (each serves its connections; jobs run on the workers)"},
    {"reuse-port", OPT_BOOL, F(reuse_port), 0, 0, "off",
     "share the port with other processes (SO_REUSEPORT; off: a busy port is a start-up error)"},
    {"backend", OPT_STR, F(backend), 0, 0, "auto", "cuda | cpu | auto (cuda when a GPU answers)"},
    {"workers", OPT_INT, F(workers), 0, 64, "0: from the CPUs, cuda 2..4, cpu CPUs/2",
     "workers per device, each with its CUDA streams"},
    {"queue-depth", OPT_INT, F(queue_depth), 0, 1000000, "0: 64 per worker, at least 256",
     "jobs waiting before new ones get 503"},
    {"http-threads", OPT_INT, F(http_threads), 0, 256, "0: cuda CPUs - workers x GPUs, cpu one per CPU, 2..64",
     "HTTP threads, the libmicrohttpd pool (usable CPUs count the cgroup quota)"},
    {"batch-max", OPT_INT, F(batch_max), -1, 1024, "-1: cuda 32, cpu 0",
     "queued jobs of one shape that may share a launch (0: no batching)"},
    {"batch-delay-us", OPT_INT, F(batch_delay_us), 0, 1000000, "0",
     "how long a batchable job may wait for partners before it runs alone, us"},
    {"batch-preferred", OPT_STR, F(batch_preferred), 0, 0, "none",
     "batch sizes to prefer, e.g. 8,16,32 (a batch waits, within the delay, to reach one)"},
    {"host-max-flops", OPT_I64, F(host_max_flops), 0, INT64_MAX / 2, "524288: a 64x64x64 GEMM",
     "jobs of kernel auto doing at most this many floating-point operations (GEMM 2mnk, AtA 2mn^2) run at "
     "once on the HTTP thread that decoded them, with the CPU kernels, where a device's round trip would "
     "cost more than the job (0: never)"},
    {"host-max-values", OPT_I64, F(host_max_values), 0, INT64_MAX / 2, "65536",
     "histograms of kernel auto with at most this many values plus bins run likewise (0: never)"},
    {"max-connections", OPT_INT, F(max_connections), 1, 1000000, "1024", "concurrent connections"},
    {"max-connections-per-ip", OPT_INT, F(max_connections_per_ip), -1, 1000000, "-1: half of --max-connections",
     "concurrent connections from one IP address (0: no limit)"},
    {"conn-memory-kb", OPT_INT, F(conn_memory_kb), 4, 1 << 20, "64",
     "memory per connection for headers and read buffers, KiB (bigger headers get 431)"},
    {"conn-timeout-s", OPT_INT, F(conn_timeout_s), 1, 86400, "60",
     "close a connection idle (nothing received or sent) this long, s"},
    {"read-timeout-s", OPT_INT, F(read_timeout_s), 0, 86400, "30",
     "a request's line and headers must arrive within this long of its connection opening or its "
     "previous answer, however they trickle (0: no deadline), s"},
    {"min-body-rate-kbs", OPT_INT, F(min_body_rate_kbs), 0, 1 << 20, "8",
     "after --read-timeout-s a body must average at least this, KiB/s (0: no rate)"},
    {"max-body-mb", OPT_I64, F(max_body_mb), 1, 1 << 20, "4096, at least --max-json-mb",
     "largest request body, MiB (decoded: a gzip body counts what it inflates to)"},
    {"max-json-mb", OPT_I64, F(max_json_mb), 1, 1 << 20, "256, at most --max-body-mb",
     "largest JSON request body, MiB (decoded)"},
    {"max-elements", OPT_I64, F(max_elements), 1, INT64_MAX / 16, "2147483648", "largest array, elements"},
    {"max-bins", OPT_INT, F(max_bins), 1, 1 << 24, "1048576", "most histogram bins"},
    {"max-stack", OPT_I64, F(max_stack), 1, INT64_MAX / 16, "16777216",
     "most matrices in one stack (a GEMM or AtA of arrays of up to 8 dimensions: the product of all but the last two)"},
    {"job-timeout-ms", OPT_I64, F(job_timeout_ms), 1, INT64_MAX / 2, "60000", "default job deadline, ms"},
    {"result-ttl-s", OPT_INT, F(result_ttl_s), 1, 86400 * 30, "300", "keep finished async results, s"},
    {"result-cap-mb", OPT_I64, F(result_cap_mb), 1, 1 << 20, "4096, at most --max-memory-mb",
     "memory for kept async results, MiB (oldest finished evicted first)"},
    {"max-memory-mb", OPT_I64, F(max_memory_mb), 0, 1 << 30, "0: 3/4 of RAM or the cgroup limit",
     "memory budget for everything requests and jobs hold, MiB"},
    {"shm-max-mb", OPT_I64, F(shm_max_mb), 0, 1 << 30, "0: half of --max-memory-mb",
     "system shared memory clients may register at once, MiB, charged to the budget"},
    {"shm-client-max-mb", OPT_I64, F(shm_client_max_mb), 0, 1 << 30, "0: a quarter of --shm-max-mb",
     "of which one client may register, MiB (client: the token with --auth-token-file, else the "
     "IP address, or the uid on --unix-socket)"},
    {"shm-idle-s", OPT_INT, F(shm_idle_s), 0, 86400 * 30, "600",
     "unregister shared memory regions no request used for this long, s (0: never)"},
    {"tensor-max-mb", OPT_I64, F(tensor_max_mb), 0, 1 << 30,
     "0: half of each GPU's memory; a quarter of --max-memory-mb on cpu",
     "resident tensors (POST /v1/tensors, results kept) per device, MiB; a create past it is 507 tensor_limit"},
    {"tensor-client-max-mb", OPT_I64, F(tensor_client_max_mb), 0, 1 << 30, "0: half of --tensor-max-mb",
     "of which one client's tensors, MiB (client: as for --shm-client-max-mb)"},
    {"tensor-idle-s", OPT_INT, F(tensor_idle_s), 0, 86400 * 365, "3600",
     "free a resident tensor nothing used for this long, s (0: never; never evicted otherwise)"},
    {"stream-idle-s", OPT_INT, F(stream_idle_s), 0, 86400 * 30, "600",
     "an open stream (POST /v1/jobs {\"stream\": true}) with no part for this long fails with stream_idle, s (0: never)"},
    {"stream-max-mb", OPT_I64, F(stream_max_mb), 0, 1 << 30, "0: a quarter of --max-memory-mb",
     "accumulators of the open streams, MiB (one client: half of it); an open past it is 507 stream_limit"},
    {"stream-max", OPT_INT, F(stream_max), 1, 1 << 20, "1024", "open streams at once"},
    {"instance-name", OPT_STR, F(instance_name), 0, 0, "the host name",
     "this replica's name in answers about tensors and jobs (behind a load balancer they live on the "
     "replica that made them)"},
    {"drain-timeout-s", OPT_INT, F(drain_timeout_s), 1, 86400, "30", "SIGTERM grace period, s"},
    {"log-format", OPT_STR, F(log_format), 0, 0, "text", "text | json"},
    {"gpu-wait", OPT_STR, F(gpu_wait), 0, 0, "yield",
     "how a worker waits for its GPU: yield (polls, letting ready threads have the core) | spin "
     "(polls, holding the core) | block (sleeps until the device signals)"},
    {"access-log", OPT_STR, F(access_log), 0, 0, "all",
     "a log line per request: all | errors (4xx and 5xx only) | off"},
    {"gzip-level", OPT_INT, F(gzip_level), 0, 9, "1",
     "zlib level of gzip/deflate answers to clients that send Accept-Encoding (0: never compress)"},
    {"cors-origin", OPT_LIST, F(cors_origin), 0, 0, "none: CORS off",
     "browser origins allowed to call the API (https://app.example:8443; \"*\": any); repeat "
     "the flag or separate with commas"},
    {"auth-token-file", OPT_STR, F(auth_token_file), 0, 0, "none",
     "require 'Authorization: Bearer <token>' (token read from this file at start)"},
    {"metrics-auth", OPT_BOOL, F(metrics_auth), 0, 0, "off", "/metrics needs the token too"},
    {"no-ui", OPT_BOOL, F(no_ui), 0, 0, "off",
     "serve no page at GET / (then / answers 404 as any unknown path, and /ui/ too)"},
    {"tls-cert", OPT_STR, F(tls_cert), 0, 0, "none", "serve HTTPS with this PEM certificate (with --tls-key)"},
    {"tls-key", OPT_STR, F(tls_key), 0, 0, "none", "the PEM private key of --tls-cert"},
    {"tls-priorities", OPT_STR, F(tls_priorities), 0, 0, "TLS 1.2+, forward-secret ECDHE/DHE only",
     "GnuTLS priority string"},
    {"unix-socket", OPT_STR, F(unix_socket), 0, 0, "none",
     "also serve every route on this Unix socket (a stale file is replaced, a live one refused; "
     "no TLS there)"},
    {"unix-socket-mode", OPT_STR, F(unix_socket_mode), 0, 0, "0660",
     "permissions of --unix-socket, octal (0660: the daemon's user and group)"},
    {"unix-socket-group", OPT_STR, F(unix_socket_group), 0, 0, "the daemon's",
     "group of --unix-socket, a name or a gid (the daemon must belong to it)"},
    {"direct-min-kb", OPT_INT, F(direct_min_kb), 0, 1 << 30, "256",
     "binary uploads (.npy, multipart .npy, raw bytes) of at least this many KiB are read by crunchd "
     "itself, straight into the arrays' buffers, instead of through libmicrohttpd's: on --unix-socket, "
     "and over TCP without TLS (0: never; libmicrohttpd then accepts TCP connections itself)"},
    {"auto-cache", OPT_STR, F(auto_cache), 0, 0, "none: measured at every start",
     "keep the table behind kernel \"auto\" in this file: a start by the same binary on the same "
     "device reads it instead of timing every kernel again (most of a cuda start, ~10 s)"},
    {"test-hooks", OPT_BOOL, F(test_hooks), 0, 0, "off",
     "honour X-Crunchd-Debug-Delay-Ms (for tests only)"},
};
#undef F
#define N_SPECS (sizeof specs / sizeof specs[0])
/* getopt_long's value of option i: past every character getopt itself returns ('?', ':', 'h'),
 * which a bare index would reach once there are 58 options. */
#define OPT_VAL_BASE 256
_Static_assert(N_SPECS <= 64, "cr_config.given has one bit per option");

static void set_defaults(cr_config *c)
{
    memset(c, 0, sizeof *c);
    c->port = 8080;
    c->grpc_port = 8001; /* Triton's: 8000 HTTP, 8001 gRPC */
    strcpy(c->bind, "127.0.0.1");
    strcpy(c->backend, "auto");
    c->batch_max = -1; /* workers, queue depth and HTTP threads: 0, sized from the machine */
    /* A 64x64x64 GEMM is ~20 us of one core's OpenBLAS: about a device round trip with its queue
     * hand-offs, so smaller jobs are answered on the spot (server/engine/host_path.c). */
    c->host_max_flops = 2 * 64 * 64 * 64;
    c->host_max_values = 65536;
    c->max_connections = 1024;
    /* One address may hold half the connections: a single misbehaving client (or host) cannot
     * lock the others out, and one load generator or proxy still gets hundreds. */
    c->max_connections_per_ip = -1;
    /* Slow (trickling) requests: 30 s for the headers, then 8 KiB/s, a 64 kbit/s line; any
     * real client is far faster, a slowloris far slower (server/http/read_deadline.h). */
    c->read_timeout_s = 30;
    c->min_body_rate_kbs = 8;
    /* libmicrohttpd's default is 32: its read buffer, half of this, then takes 16 KiB per
     * recv() and a 128 MiB upload ~8000 of them; at 256 the GEMM of bench-e2e went from 100 to
     * 74 ms on the H100 machine, level with a bare loopback sink (more gained nothing). Pages
     * are touched only as a connection uses them. */
    c->conn_memory_kb = 64;
    c->conn_timeout_s = 60;
    c->max_body_mb = 4096;
    c->max_json_mb = 256; /* derive_limits: at most --max-body-mb unless given */
    c->max_elements = (int64_t)1 << 31;
    c->max_bins = 1 << 20;
    c->max_stack = (int64_t)1 << 24;
    c->job_timeout_ms = 60000;
    c->result_ttl_s = 300;
    c->result_cap_mb = 4096; /* at most the memory budget: cr_config_size */
    c->drain_timeout_s = 30;
    c->shm_idle_s = 600;
    c->tensor_idle_s = 3600;
    c->stream_idle_s = 600;
    c->stream_max = 1024;
    c->gzip_level = 1; /* JSON shrinks 3-4x at level 1 for a fraction of level 6's time */
    strcpy(c->log_format, "text");
    strcpy(c->access_log, "all");
    /* The HTTP threads parse and encode on the same cores: a worker spinning on its GPU (CUDA's
     * default with more cores than contexts) takes a core from them. H200 machine, two rounds
     * each: 64x64 JSON GEMMs 24.7k and 24.4k/s with yield against 23.2k and 22.6k spinning, the
     * other rows within 3%; block woke late under load (p99 up to 28 ms on 16x16). */
    strcpy(c->gpu_wait, "yield");
    strcpy(c->unix_socket_mode, "0660");
    c->direct_min_kb = 256;
}

static void env_name(const opt_spec *s, char *out, size_t n)
{
    size_t j = (size_t)snprintf(out, n, "CRUNCHD_");
    for (const char *p = s->flag; *p && j + 1 < n; p++)
        out[j++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[j] = '\0';
}

/* A list option given again appends (comma-separated); `fresh` starts it over (the first flag
 * replaces what the environment said). */
static int append_list(char *base, size_t size, const char *v, bool fresh, const char *from, FILE *err)
{
    size_t have = fresh ? 0 : strlen(base);
    if (have + (have > 0) + strlen(v) >= size) {
        fprintf(err, "crunchd: %s: list too long (max %zu characters)\n", from, size - 1);
        return -1;
    }
    snprintf(base + have, size - have, "%s%s", have ? "," : "", v);
    return 0;
}

static int parse_value(cr_config *c, const opt_spec *s, const char *v, const char *from, FILE *err)
{
    char *base = (char *)c + s->offset;
    c->given |= (uint64_t)1 << (s - specs);
    if (s->kind == OPT_LIST)
        return append_list(base, s->size, v, false, from, err);
    if (s->kind == OPT_STR) {
        if (strlen(v) >= s->size) {
            fprintf(err, "crunchd: %s: value too long (max %zu)\n", from, s->size - 1);
            return -1;
        }
        strcpy(base, v);
        return 0;
    }
    if (s->kind == OPT_BOOL) {
        bool on = strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0;
        if (!on && strcmp(v, "0") && strcmp(v, "false") && strcmp(v, "no")) {
            fprintf(err, "crunchd: %s: expected true or false, got '%s'\n", from, v);
            return -1;
        }
        *(bool *)base = on;
        return 0;
    }
    errno = 0;
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < s->min || x > s->max) {
        fprintf(err, "crunchd: %s: expected an integer in [%lld, %lld], got '%s'\n", from,
                (long long)s->min, (long long)s->max, v);
        return -1;
    }
    if (s->kind == OPT_INT)
        *(int *)base = (int)x;
    else
        *(int64_t *)base = x;
    return 0;
}

static int load_env(cr_config *c, FILE *err)
{
    for (size_t i = 0; i < N_SPECS; i++) {
        char name[64];
        env_name(&specs[i], name, sizeof name);
        const char *v = getenv(name);
        if (v && *v && parse_value(c, &specs[i], v, name, err) < 0)
            return -1;
    }
    return 0;
}

bool cr_config_tcp(const cr_config *c) { return strcmp(c->bind, "none") != 0; }

/* The mode is octal text (0660, 660, 0600), at most 0777: no setuid bits on a socket. */
static int check_unix_socket(cr_config *c, FILE *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long mode = strtoul(c->unix_socket_mode, &end, 8);
    if (errno || end == c->unix_socket_mode || *end || mode > 0777) {
        fprintf(err, "crunchd: --unix-socket-mode: expected octal permissions up to 0777, got '%s'\n",
                c->unix_socket_mode);
        return -1;
    }
    c->unix_mode = (unsigned)mode;
    if (!cr_config_tcp(c) && !c->unix_socket[0]) {
        fprintf(err, "crunchd: --bind none serves no TCP: give --unix-socket PATH, or an address\n");
        return -1;
    }
    if (!c->unix_socket[0] && !c->grpc_unix_socket[0] && c->unix_socket_group[0]) {
        fprintf(err, "crunchd: --unix-socket-group needs --unix-socket or --grpc-unix-socket\n");
        return -1;
    }
    if (c->unix_socket[0] && strcmp(c->unix_socket, c->grpc_unix_socket) == 0) {
        fprintf(err, "crunchd: --unix-socket and --grpc-unix-socket need paths of their own\n");
        return -1;
    }
    return 0;
}

/* Whether value is one of the three choices (c may be NULL: two), else says so. */
static bool one_of(const char *flag, const char *value, const char *a, const char *b, const char *c, FILE *err)
{
    if (!strcmp(value, a) || !strcmp(value, b) || (c && !strcmp(value, c)))
        return true;
    if (c)
        fprintf(err, "crunchd: --%s: expected %s, %s or %s, got '%s'\n", flag, a, b, c, value);
    else
        fprintf(err, "crunchd: --%s: expected %s or %s, got '%s'\n", flag, a, b, value);
    return false;
}

static int check_choices(cr_config *c, FILE *err)
{
    if (!one_of("backend", c->backend, "cuda", "cpu", "auto", err) ||
        !one_of("access-log", c->access_log, "all", "errors", "off", err) ||
        !one_of("log-format", c->log_format, "text", "json", NULL, err) ||
        !one_of("gpu-wait", c->gpu_wait, "yield", "spin", "block", err))
        return -1;
    if (!c->tls_cert[0] != !c->tls_key[0]) {
        fprintf(err, "crunchd: --tls-cert and --tls-key go together: give both or neither\n");
        return -1;
    }
    if (cr_config_preferred(c, NULL, 0) < 0) {
        fprintf(err, "crunchd: --batch-preferred: expected sizes 1..1024 separated by commas, got '%s'\n",
                c->batch_preferred);
        return -1;
    }
    if (check_unix_socket(c, err) < 0)
        return -1;
    return 0;
}

bool cr_config_given(const cr_config *c, const char *flag)
{
    for (size_t i = 0; i < N_SPECS; i++)
        if (strcmp(specs[i].flag, flag) == 0)
            return c->given & ((uint64_t)1 << i);
    return false;
}

/* A limit whose default follows another follows it unless given: --max-body-mb 1 alone lowers
 * the JSON limit with it, --max-json-mb 8192 alone raises the body limit. Two given limits that
 * contradict each other are an error. */
static int derive_limits(cr_config *c, FILE *err)
{
    bool body = cr_config_given(c, "max-body-mb"), json = cr_config_given(c, "max-json-mb");
    if (!json && c->max_json_mb > c->max_body_mb)
        c->max_json_mb = c->max_body_mb;
    if (json && !body && c->max_json_mb > c->max_body_mb)
        c->max_body_mb = c->max_json_mb;
    if (c->max_json_mb > c->max_body_mb) {
        fprintf(err, "crunchd: --max-json-mb (%lld) must not exceed --max-body-mb (%lld)\n",
                (long long)c->max_json_mb, (long long)c->max_body_mb);
        return -1;
    }
    return 0;
}

int cr_config_preferred(const cr_config *c, int *sizes, int max)
{
    int n = 0;
    const char *p = c->batch_preferred;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024 || (*end && *end != ','))
            return -1;
        if (sizes && n < max)
            sizes[n] = (int)v;
        n++;
        p = *end ? end + 1 : end;
    }
    return n;
}

void cr_config_usage(FILE *out)
{
    fprintf(out, "usage: crunchd [options]\n\n"
                 "GPU linear algebra and histograms over HTTP. Every option can also be set\n"
                 "through the environment variable shown; flags win over the environment.\n\n");
    for (size_t i = 0; i < N_SPECS; i++) {
        char name[64], arg[24] = "";
        env_name(&specs[i], name, sizeof name);
        if (specs[i].kind != OPT_BOOL)
            snprintf(arg, sizeof arg, specs[i].kind == OPT_STR    ? " STR"
                                      : specs[i].kind == OPT_LIST ? " LIST"
                                                                  : " N");
        fprintf(out, "  --%s%s\n      %s (default: %s) [%s]\n", specs[i].flag, arg, specs[i].help,
                specs[i].dflt, name);
    }
    fprintf(out, "  --check URL\n      GET an http:// URL (2 s); exit 0 on 2xx, else 1: a health probe\n");
    fprintf(out, "  --version\n      the version, git revision, build flags and CUDA versions\n");
    fprintf(out, "  --help\n      this text\n");
}

int cr_config_load(cr_config *c, int argc, char **argv, FILE *err)
{
    _Static_assert(N_SPECS <= 64, "cr_config.given has a bit per option");
    struct option longopts[N_SPECS + 3];
    bool list_from_flag[N_SPECS] = {false};
    set_defaults(c);
    if (load_env(c, err) < 0)
        return -1;
    for (size_t i = 0; i < N_SPECS; i++)
        longopts[i] = (struct option){specs[i].flag,
                                      specs[i].kind == OPT_BOOL ? no_argument : required_argument,
                                      NULL, OPT_VAL_BASE + (int)i};
    longopts[N_SPECS] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[N_SPECS + 1] = (struct option){"version", no_argument, NULL, 'V'};
    longopts[N_SPECS + 2] = (struct option){0, 0, 0, 0};
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = 0;
        int r = getopt_long(argc, argv, "h", longopts, &idx);
        if (r == -1)
            break;
        if (r == 'h') {
            cr_config_usage(stdout);
            return 1;
        }
        if (r == 'V')
            return 2;
        if (r == '?' || r == ':') {
            fprintf(err, "crunchd: unknown option or missing value: %s (see --help)\n",
                    argv[optind - 1]);
            return -1;
        }
        char from[64];
        r -= OPT_VAL_BASE;
        snprintf(from, sizeof from, "--%s", specs[r].flag);
        if (specs[r].kind == OPT_LIST && !list_from_flag[r]) { /* flags win over the environment */
            list_from_flag[r] = true;
            ((char *)c + specs[r].offset)[0] = '\0';
        }
        if (parse_value(c, &specs[r], specs[r].kind == OPT_BOOL ? "true" : optarg, from, err) < 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(err, "crunchd: unexpected argument '%s' (see --help)\n", argv[optind]);
        return -1;
    }
    if (check_choices(c, err) < 0 || derive_limits(c, err) < 0)
        return -1;
    if (c->max_connections_per_ip < 0)
        c->max_connections_per_ip = c->max_connections / 2 > 0 ? c->max_connections / 2 : 1;
    return 0;
}
