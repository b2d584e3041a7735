/* libFuzzer harness for the gRPC listener's frame and message handling, end to end without a
 * socket: each input becomes the bytes a client sends on one HTTP/2 connection, fed to a real
 * connection (server/grpc/grpc_conn.h: nghttp2's server session, the calls, the gRPC message
 * reader, the methods and, for inference, the KServe decoder and the cpu engine) through a memory
 * transport, in reads of varying size; what the connection writes back is parsed by an nghttp2
 * client session.
 *
 * Input layout: byte 0 says how the rest is sent.
 *   bit 5 set: raw. The rest is the client's byte stream after its preface (any frames).
 *   bit 5 clear: one call. Bits 0-3 pick the method (methods[] below: every RPC, an unknown one
 *   and Health/Check), bit 4 adds grpc-encoding gzip, bit 6 frames the rest as one uncompressed
 *   message (else the rest is the call's message stream as it is: prefixes and all), bit 7 adds
 *   grpc-timeout 1m. Byte 1 sets the DATA frames' size and the reads' sizes.
 * The oracle: a call sent whole ends (within ANSWER_TIMEOUT_S, its job included: a hang is a
 * bug; raw frames may leave a stream open, which the connection's close then ends), every stream the server answered with HEADERS carries grpc-status
 * (trailers or trailers-only), and no status is INTERNAL or UNKNOWN (a bug); the sanitizers watch
 * the rest. Run with -detect_leaks=0: a worker may drop its reference to a job after the harness's
 * wait ends (fuzz_grpc_conn.options). */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/config.h"
#include "server/engine/engine.h"
#include "server/grpc/grpc_conn.h"
#include "server/grpc/grpc_done.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/infer_request.h"
#include "server/kserve/cuda_shm_region.h"
#include "server/kserve/shm_region.h"
#include "server/memory.h"
#include "server/obs/log.h"

#define ANSWER_TIMEOUT_S 20

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const methods[16] = {
    "ModelInfer", "ModelStreamInfer", "ServerLive", "ServerReady", "ModelReady", "ServerMetadata",
    "ModelMetadata", "ModelConfig", "ModelStatistics", "RepositoryIndex", "SystemSharedMemoryRegister",
    "SystemSharedMemoryStatus", "SystemSharedMemoryUnregister", "CudaSharedMemoryRegister", "NoSuchMethod",
    "Health",
};

static cr_config cfg;
static cr_grpc_server srv;
static cr_grpc_done done;

/* ---- the memory transport ------------------------------------------------------------------- */

typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
} bytes;

typedef struct {
    cr_grpc_transport t;
    bytes in;                /* what the client sent so far */
    size_t at, chunk;
    nghttp2_session *client; /* reads what the server writes; NULL in raw mode */
} mem_transport;

static ssize_t mem_read(cr_grpc_transport *t, void *buf, size_t n)
{
    mem_transport *m = (mem_transport *)t;
    if (m->at == m->in.len)
        return CR_IO_AGAIN; /* the client waits for its answers: not a close */
    size_t k = m->in.len - m->at;
    k = k < n ? k : n;
    k = k < m->chunk ? k : m->chunk;
    memcpy(buf, m->in.p + m->at, k);
    m->at += k;
    return (ssize_t)k;
}

static ssize_t mem_writev(cr_grpc_transport *t, const struct iovec *iov, int n)
{
    mem_transport *m = (mem_transport *)t;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (m->client && nghttp2_session_mem_recv(m->client, iov[i].iov_base, iov[i].iov_len) < 0)
            abort(); /* the server wrote something that is not HTTP/2 */
        total += iov[i].iov_len;
    }
    return (ssize_t)total;
}

static int mem_handshake(cr_grpc_transport *t)
{
    (void)t;
    return 1;
}

static bool mem_none(cr_grpc_transport *t)
{
    (void)t;
    return false;
}

static void mem_free(cr_grpc_transport *t) { (void)t; }

static const cr_grpc_transport_ops mem_ops = {mem_read, mem_writev, mem_handshake, mem_none, mem_none, mem_free};

/* ---- the client's view of the answers -------------------------------------------------------- */

typedef struct {
    uint64_t headers, status; /* a bit per stream id below 64 */
} answers;

static int client_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                         const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)s, (void)flags;
    answers *a = user;
    int32_t sid = f->hd.stream_id;
    if (sid <= 0 || sid >= 64)
        return 0;
    a->headers |= 1ull << sid;
    if (nlen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        a->status |= 1ull << sid;
        if ((vlen == 1 && (value[0] == '2')) || (vlen == 2 && value[0] == '1' && value[1] == '3')) {
            fprintf(stderr, "fuzz_grpc_conn: stream %d ended %.*s (UNKNOWN or INTERNAL: a bug)\n", sid, (int)vlen,
                    value);
            abort();
        }
    }
    return 0;
}

static int client_close(nghttp2_session *s, int32_t sid, uint32_t code, void *user)
{
    (void)s;
    answers *a = user;
    if (sid > 0 && sid < 64 && (a->headers >> sid & 1) && !(a->status >> sid & 1) && code == NGHTTP2_NO_ERROR) {
        fprintf(stderr, "fuzz_grpc_conn: stream %d answered without grpc-status\n", sid);
        abort();
    }
    return 0;
}

static nghttp2_session *client_session(answers *a)
{
    nghttp2_session_callbacks *cb;
    nghttp2_session *s = NULL;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        abort();
    nghttp2_session_callbacks_set_on_header_callback(cb, client_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, client_close);
    if (nghttp2_session_client_new(&s, cb, a) != 0)
        abort();
    nghttp2_session_callbacks_del(cb);
    return s;
}

/* ---- the client's bytes ---------------------------------------------------------------------- */

static void put(bytes *b, const void *p, size_t n)
{
    if (!n)
        return;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 256;
        if (!(b->p = realloc(b->p, b->cap)))
            abort();
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* The call's message stream, given to the client session's DATA frames piece by piece. */
typedef struct {
    bytes body;
    size_t at, piece;
} request_body;

static ssize_t body_read(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *user)
{
    (void)s, (void)sid, (void)user;
    request_body *r = src->ptr;
    size_t k = r->body.len - r->at;
    k = k < length ? k : length;
    k = k < r->piece ? k : r->piece;
    if (k)
        memcpy(buf, r->body.p + r->at, k);
    if ((r->at += k) == r->body.len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

/* One call through the client session: its headers as byte 0 says, its body the rest. */
static void submit_call(nghttp2_session *client, const uint8_t *data, size_t size, request_body *rb)
{
    uint8_t mode = data[0];
    char path[96];
    const char *m = methods[mode & 15];
    snprintf(path, sizeof path, strcmp(m, "Health") == 0 ? "/grpc.health.v1.Health/Check"
                                                          : "/inference.GRPCInferenceService/%s", m);
    nghttp2_nv nv[8] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":authority", "fuzz"), NV(":path", path),
                        NV("content-type", "application/grpc"), NV("te", "trailers")};
    size_t n = 6;
    if (mode & 0x10)
        nv[n++] = (nghttp2_nv)NV("grpc-encoding", "gzip");
    if (mode & 0x80)
        nv[n++] = (nghttp2_nv)NV("grpc-timeout", "1m");
    const uint8_t *p = data + (size > 1 ? 2 : 1);
    size_t len = size > 1 ? size - 2 : 0;
    if (mode & 0x40) {
        uint8_t pre[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
        put(&rb->body, pre, 5);
    }
    put(&rb->body, p, len);
    rb->piece = 1 + (size > 1 ? data[1] : 255) * 67u;
    nghttp2_data_provider dp = {.source.ptr = rb, .read_callback = body_read};
    if (nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, NULL, 0) != 0 ||
        nghttp2_submit_request(client, NULL, nv, n, &dp, NULL) < 0)
        abort();
}

/* What the client session has to send, onto the transport's input. */
static void client_send(mem_transport *m)
{
    const uint8_t *out;
    ssize_t n;
    while (m->client && (n = nghttp2_session_mem_send(m->client, &out)) > 0)
        put(&m->in, out, (size_t)n);
}

/* ---- the harness ----------------------------------------------------------------------------- */

static void *housekeeping(void *arg)
{
    (void)arg;
    for (;;) {
        cr_engine_tick(srv.engine, cr_now());
        usleep(20 * 1000);
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char a0[] = "fuzz_grpc_conn", *args[] = {a0, NULL}, err[256];
    if (cr_config_load(&cfg, 1, args, stderr) != 0)
        abort();
    snprintf(cfg.backend, sizeof cfg.backend, "cpu");
    cfg.workers = 1;
    cfg.queue_depth = 16;
    cfg.max_body_mb = 4;
    cfg.max_json_mb = 1;
    cfg.max_elements = 1 << 14;
    cfg.max_bins = 1 << 10;
    cfg.job_timeout_ms = 10000;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    cr_log_init(false, CR_ACCESS_LOG_OFF);
    cr_mem_set_limit(256u << 20);
    cr_engine *e = cr_engine_start(&cr_backend_cpu, &cfg, err, sizeof err);
    if (!e || cr_grpc_done_init(&done) < 0) {
        fprintf(stderr, "fuzz_grpc_conn: %s\n", err);
        abort();
    }
    cr_shm_limits shm = {.max_bytes = 64u << 20, .client_max_bytes = 16u << 20, .backend = &cr_backend_cpu};
    cr_shm_init(&shm);
    cr_cuda_shm_init(&cr_backend_cpu, 1, 0);
    srv.cfg = &cfg;
    srv.engine = e;
    srv.lim = cr_request_limits(&cfg);
    srv.max_message = (uint64_t)cfg.max_body_mb << 20;
    srv.messages = (cr_grpc_alloc){NULL, NULL, cr_grpc_infer_align};
    pthread_t t;
    if (pthread_create(&t, NULL, housekeeping, NULL) != 0)
        abort();
    return 0;
}

/* Runs the exchange until its calls are over; a hang is a bug. */
static void settle(cr_grpc_conn *c, cr_grpc_conn **dirty, mem_transport *m)
{
    double until = cr_now() + ANSWER_TIMEOUT_S;
    for (;;) {
        client_send(m);
        cr_grpc_done_run(&done);
        cr_grpc_conn_read(c);
        while (*dirty)
            cr_grpc_conn_flush(*dirty), *dirty = cr_grpc_conn_next_dirty(*dirty);
        cr_grpc_conn_tick(c, cr_now());
        bool sent = (!m->client || !nghttp2_session_want_write(m->client)) && m->at == m->in.len;
        /* raw frames may leave a stream open for good, as a client may: once everything was read
         * and no job is out, the connection is closed, which ends it */
        bool quiet = sent && atomic_load(&srv.waiting) == 0 && !*dirty;
        if ((sent && atomic_load(&srv.active) == 0) || !cr_grpc_conn_alive(c) || (!m->client && quiet))
            return;
        if (cr_now() > until) {
            fprintf(stderr, "fuzz_grpc_conn: a call did not end within %d s\n", ANSWER_TIMEOUT_S);
            abort();
        }
        usleep(200);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    answers a = {0};
    request_body rb = {0};
    mem_transport m = {.t = {&mem_ops, -1}, .chunk = 1 + (size > 1 ? data[1] : 0) * 97u};
    put(&m.in, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
    if (data[0] & 0x20) { /* raw: an empty SETTINGS, then the input's frames */
        static const uint8_t settings[9] = {0, 0, 0, 0x4, 0, 0, 0, 0, 0};
        put(&m.in, settings, sizeof settings);
        put(&m.in, data + 1, size - 1);
    } else {
        m.client = client_session(&a);
        m.in.len = 0; /* the client session writes its own magic */
        submit_call(m.client, data, size, &rb);
    }
    cr_grpc_conn *dirty = NULL;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    static uint8_t rbuf[CR_GRPC_READ_BUF];
    cr_grpc_conn *c = cr_grpc_conn_new(&srv, &done, &m.t, (struct sockaddr *)&sa, rbuf, &dirty);
    if (!c)
        abort();
    settle(c, &dirty, &m);
    cr_grpc_conn_free(c); /* what is left open ends here, its jobs come back below */
    double until = cr_now() + ANSWER_TIMEOUT_S;
    while (atomic_load(&srv.active) > 0) {
        if (cr_now() > until)
            abort();
        usleep(1000);
        cr_grpc_done_run(&done);
    }
    if (m.client)
        nghttp2_session_del(m.client);
    free(m.in.p);
    free(rb.body.p);
    return 0;
}
