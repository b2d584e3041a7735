/* Logging; see log.h. Lines are formatted into the caller's own buffer, outside any lock:
 * fprintf to stderr held the stream's lock for the formatting and the write, which serialised
 * every HTTP thread at tens of thousands of requests a second.
 *
 * Access lines are then gathered per thread (a 32 KiB buffer each, behind its own, uncontended
 * mutex) and written a buffer at a time: one write(2) per request cost a quarter of the small
 * jobs' throughput on the 16-core GPU machine (--access-log off: 99k jobs/s against 75k). A
 * buffer goes out when full, at every housekeeping tick (cr_log_flush, ~0.1 s), before any
 * lifecycle line, and at exit. Writes hold write_mu, so buffers of different threads never
 * interleave, even on a pipe where only PIPE_BUF bytes are atomic. */
#include "server/obs/log.h"

#include "server/codec/numfmt.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool as_json;
static cr_access_log access_mode = CR_ACCESS_LOG_ALL;

#define LINE_BUF_BYTES (32 << 10)

typedef struct line_buf {
    pthread_mutex_t mu;
    size_t len;
    struct line_buf *next;
    char data[LINE_BUF_BYTES];
} line_buf;

static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t bufs_mu = PTHREAD_MUTEX_INITIALIZER; /* the list; buffers live to the end */
static line_buf *bufs;
static _Thread_local line_buf *mine;

static void write_all(const char *p, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to log to: nothing else to do with the lines */
        off += (size_t)w;
    }
}

static void write_locked(const char *p, size_t len)
{
    pthread_mutex_lock(&write_mu);
    write_all(p, len);
    pthread_mutex_unlock(&write_mu);
}

/* Under b->mu. */
static void drain_buf(line_buf *b)
{
    if (b->len)
        write_locked(b->data, b->len);
    b->len = 0;
}

void cr_log_flush(void)
{
    pthread_mutex_lock(&bufs_mu);
    for (line_buf *b = bufs; b; b = b->next) {
        pthread_mutex_lock(&b->mu);
        drain_buf(b);
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&bufs_mu);
}

void cr_log_init(bool json, cr_access_log access)
{
    as_json = json;
    access_mode = access;
    static bool registered;
    if (!registered)
        registered = atexit(cr_log_flush) == 0;
}

/* This thread's buffer, made on its first line; NULL when out of memory (lines then go out one
 * by one). */
static line_buf *my_buf(void)
{
    if (mine)
        return mine;
    line_buf *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_init(&b->mu, NULL);
    b->len = 0;
    pthread_mutex_lock(&bufs_mu);
    b->next = bufs;
    bufs = b;
    pthread_mutex_unlock(&bufs_mu);
    return mine = b;
}

/* len is snprintf's: a line too long for cap is cut, and still ends with a newline. */
static size_t line_length(char *line, int len, size_t cap)
{
    if (len < 0)
        return 0;
    if ((size_t)len >= cap) {
        line[cap - 2] = '\n';
        return cap - 1;
    }
    return (size_t)len;
}

static void emit_now(char *line, int len, size_t cap)
{
    size_t n = line_length(line, len, cap);
    cr_log_flush(); /* access lines before it stay before it */
    write_locked(line, n);
}

static void emit_buffered(char *line, int len, size_t cap)
{
    size_t n = line_length(line, len, cap);
    line_buf *b = my_buf();
    if (!b) {
        write_locked(line, n);
        return;
    }
    pthread_mutex_lock(&b->mu);
    if (b->len + n > sizeof b->data)
        drain_buf(b);
    memcpy(b->data + b->len, line, n);
    b->len += n;
    pthread_mutex_unlock(&b->mu);
}

/* ISO 8601 UTC to the millisecond. The date and time to the second are formatted once a second
 * per thread: gmtime and strftime cost more than the rest of a request's log line. */
static void timestamp(char *out, size_t n)
{
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[32];
    static _Thread_local size_t cached_len;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        cached_len = strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
        cached_sec = ts.tv_sec;
    }
    unsigned ms = (unsigned)(ts.tv_nsec / 1000000);
    if (n < cached_len + 6) {
        out[0] = '\0';
        return;
    }
    memcpy(out, cached, cached_len);
    char *p = out + cached_len;
    p[0] = '.';
    p[1] = (char)('0' + ms / 100);
    p[2] = (char)('0' + ms / 10 % 10);
    p[3] = (char)('0' + ms % 10);
    p[4] = 'Z';
    p[5] = '\0';
}

/* Anything a client chose (method, path, a region's name, libmicrohttpd's messages about a
 * request) reaches the log only through these, so no client can end a JSON string and add fields
 * of its own, start a new line, or write terminal escapes into a text log. */

/* As a JSON string's contents: quote, backslash, control bytes, DEL and bytes >= 0x80 (which
 * may not be UTF-8) as \uXXXX; the line stays one valid JSON object whatever the input. */
static void escape_json(char *out, size_t n, const char *s)
{
    size_t j = 0;
    for (; s && *s && j + 7 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            j += (size_t)snprintf(out + j, n - j, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            j += (size_t)snprintf(out + j, n - j, "\\u%04x", c);
        else
            out[j++] = (char)c;
    }
    out[j] = '\0';
}

/* For a text line: printable ASCII stays, a backslash doubles, anything else is \xHH. Fields of a
 * request line are separated by spaces, so there a space is escaped too (a path "/x 200" must not
 * read as a status); a message keeps its spaces. */
static void escape_text(char *out, size_t n, const char *s, bool keep_spaces)
{
    size_t j = 0;
    for (; s && *s && j + 5 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\')
            j += (size_t)snprintf(out + j, n - j, "\\\\");
        else if ((c == ' ' && keep_spaces) || (c > ' ' && c < 0x7f))
            out[j++] = (char)c;
        else
            j += (size_t)snprintf(out + j, n - j, "\\x%02x", c);
    }
    out[j] = '\0';
}

void cr_log(const char *level, const char *fmt, ...)
{
    char ts[40], msg[1024], esc[6 * sizeof msg], line[sizeof esc + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    timestamp(ts, sizeof ts);
    if (as_json) {
        escape_json(esc, sizeof esc, msg);
        emit_now(line, snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", ts, level, esc),
             sizeof line);
    } else {
        escape_text(esc, sizeof esc, msg, true);
        emit_now(line, snprintf(line, sizeof line, "%s %s %s\n", ts, level, esc), sizeof line);
    }
}

const char *cr_log_level_of_status(int status)
{
    return status >= 500 ? "error" : status >= 400 ? "warn" : "info";
}

/* A line built piece by piece; what does not fit is cut (end is one short of the buffer's end,
 * so the newline always fits). */
typedef struct {
    char *p, *end;
} line_out;

/* Appends each string up to the NULL that ends the list. */
static void put(line_out *o, const char *s, ...)
{
    va_list ap;
    va_start(ap, s);
    for (; s; s = va_arg(ap, const char *)) {
        size_t n = strlen(s), room = (size_t)(o->end - o->p);
        n = n < room ? n : room;
        memcpy(o->p, s, n);
        o->p += n;
    }
    va_end(ap);
}

static void put_u64(line_out *o, uint64_t v)
{
    char t[CR_NUMFMT_MAX];
    cr_fmt_u64(t, v);
    put(o, t, NULL);
}

static void put_ms(line_out *o, double v)
{
    char t[CR_NUMFMT_MAX];
    cr_fmt_fixed3(t, v);
    put(o, t, NULL);
}

/* The job's device-side phases, each after its key in the line's format. */
static void put_phases(line_out *o, const char *const keys[4], const cr_log_request *r)
{
    const double ms[] = {r->queue_ms, r->h2d_ms, r->kernel_ms, r->d2h_ms};
    for (int i = 0; i < 4; i++) {
        put(o, keys[i], NULL);
        put_ms(o, ms[i]);
    }
}

/* A request line's string fields, each escaped for the log's format (NULL fields stay NULL). */
typedef struct {
    char method[6 * 16 + 1], path[6 * 256 + 1], id[6 * 40 + 1], op[6 * 16 + 1], shape[6 * 64 + 1],
        kernel[6 * 32 + 1], error[6 * 32 + 1], peer[6 * 64 + 1];
} escaped_fields;

static const char *esc_field(char *out, size_t n, const char *s, bool json)
{
    if (!s)
        return NULL;
    if (json)
        escape_json(out, n, s);
    else
        escape_text(out, n, s, false);
    return out;
}

void cr_log_req(const cr_log_request *r)
{
    if (access_mode == CR_ACCESS_LOG_OFF || (access_mode == CR_ACCESS_LOG_ERRORS && r->status < 400))
        return;
    char ts[40], line[sizeof(escaped_fields) + 512];
    escaped_fields e;
    bool j = as_json;
    const char *method = esc_field(e.method, sizeof e.method, r->method, j);
    const char *path = esc_field(e.path, sizeof e.path, r->path, j);
    const char *id = esc_field(e.id, sizeof e.id, r->id, j);
    const char *op = esc_field(e.op, sizeof e.op, r->op, j);
    const char *shape = esc_field(e.shape, sizeof e.shape, r->shape, j);
    const char *kernel = esc_field(e.kernel, sizeof e.kernel, r->kernel, j);
    const char *error = esc_field(e.error, sizeof e.error, r->error_code, j);
    const char *peer = esc_field(e.peer, sizeof e.peer, r->peer, j);
    /* request_id is safe as it is: request_id.c admits only [A-Za-z0-9._:-] */
    const char *level = cr_log_level_of_status(r->status), *rid = r->request_id ? r->request_id : "";
    timestamp(ts, sizeof ts);
    /* appended piece by piece: one snprintf of two dozen arguments cost more than the rest */
    line_out o = {line, line + sizeof line - 1}; /* room kept for the newline */
    if (j) {
        put(&o, "{\"ts\":\"", ts, "\",\"level\":\"", level, "\",\"request_id\":\"", rid, "\",\"method\":\"",
            method ? method : "", "\",\"path\":\"", path ? path : "", "\",\"peer\":\"", peer ? peer : "",
            "\",\"status\":", NULL);
        put_u64(&o, (uint64_t)r->status);
        put(&o, ",\"ms\":", NULL);
        put_ms(&o, r->ms);
        put(&o, ",\"bytes_in\":", NULL);
        put_u64(&o, r->bytes_in);
        put(&o, ",\"id\":\"", id ? id : "", "\",\"op\":\"", op ? op : "", "\",\"shape\":\"", shape ? shape : "",
            "\",\"kernel\":\"", kernel ? kernel : "", "\",\"error\":\"", error ? error : "", "\"", NULL);
        if (r->grpc_status) /* our own names: nothing to escape */
            put(&o, ",\"grpc_status\":\"", r->grpc_status, "\"", NULL);
        static const char *const keys[] = {",\"queue_ms\":", ",\"h2d_ms\":", ",\"kernel_ms\":", ",\"d2h_ms\":"};
        put_phases(&o, keys, r);
        put(&o, "}", NULL);
    } else {
        put(&o, ts, " ", level, " ", method ? method : "-", " ", path ? path : "-", " ", NULL);
        put_u64(&o, (uint64_t)r->status);
        put(&o, " ", NULL);
        put_ms(&o, r->ms);
        put(&o, "ms rid=", rid, " in=", NULL);
        put_u64(&o, r->bytes_in);
        put(&o, " peer=", peer ? peer : "-", id ? " id=" : "", id ? id : "", op ? " op=" : "", op ? op : "",
            shape ? " shape=" : "", shape ? shape : "", kernel ? " kernel=" : "", kernel ? kernel : "",
            error ? " error=" : "", error ? error : "", r->grpc_status ? " grpc=" : "",
            r->grpc_status ? r->grpc_status : "", NULL);
        static const char *const keys[] = {" queue=", " h2d=", " kernel=", " d2h="};
        put_phases(&o, keys, r);
    }
    *o.p++ = '\n';
    emit_buffered(line, (int)(o.p - line), sizeof line);
}
