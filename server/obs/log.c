/* Logging; see log.h. Each line is written with one fprintf so lines from threads don't mix. */
#include "server/obs/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static bool as_json;

void cr_log_init(bool json) { as_json = json; }

static void timestamp(char *out, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* JSON string escaping for the few free-text values we log (paths, messages). */
static void escape(char *out, size_t n, const char *s)
{
    size_t j = 0;
    for (; s && *s && j + 7 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            j += (size_t)snprintf(out + j, n - j, "\\%c", c);
        else if (c < 0x20)
            j += (size_t)snprintf(out + j, n - j, "\\u%04x", c);
        else
            out[j++] = (char)c;
    }
    out[j] = '\0';
}

void cr_log(const char *level, const char *fmt, ...)
{
    char ts[40], msg[1024], esc[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    timestamp(ts, sizeof ts);
    if (as_json) {
        escape(esc, sizeof esc, msg);
        fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", ts, level, esc);
    } else {
        fprintf(stderr, "%s %s %s\n", ts, level, msg);
    }
}

const char *cr_log_level_of_status(int status)
{
    return status >= 500 ? "error" : status >= 400 ? "warn" : "info";
}

/* request_id is safe as it is: request_id.c admits only [A-Za-z0-9._:-]. */
void cr_log_req(const cr_log_request *r)
{
    char ts[40], path[512];
    const char *level = cr_log_level_of_status(r->status), *rid = r->request_id ? r->request_id : "";
    timestamp(ts, sizeof ts);
    escape(path, sizeof path, r->path);
    if (as_json) {
        fprintf(stderr,
                "{\"ts\":\"%s\",\"level\":\"%s\",\"request_id\":\"%s\",\"method\":\"%s\",\"path\":\"%s\","
                "\"peer\":\"%s\",\"status\":%d,\"ms\":%.3f,\"bytes_in\":%llu,\"id\":\"%s\",\"op\":\"%s\","
                "\"shape\":\"%s\",\"kernel\":\"%s\",\"error\":\"%s\",\"queue_ms\":%.3f,\"h2d_ms\":%.3f,"
                "\"kernel_ms\":%.3f,\"d2h_ms\":%.3f}\n",
                ts, level, rid, r->method, path, r->peer ? r->peer : "", r->status, r->ms, r->bytes_in,
                r->id ? r->id : "",
                r->op ? r->op : "", r->shape ? r->shape : "", r->kernel ? r->kernel : "",
                r->error_code ? r->error_code : "", r->queue_ms, r->h2d_ms, r->kernel_ms, r->d2h_ms);
        return;
    }
    /* path is escaped in text too: a %0a in a URL must not forge a log line */
    fprintf(stderr, "%s %s %s %s %d %.3fms rid=%s in=%llu peer=%s%s%s%s%s%s%s%s%s%s%s queue=%.3f h2d=%.3f kernel=%.3f d2h=%.3f\n",
            ts, level, r->method, path, r->status, r->ms, rid, r->bytes_in, r->peer ? r->peer : "-", r->id ? " id=" : "",
            r->id ? r->id : "",
            r->op ? " op=" : "", r->op ? r->op : "", r->shape ? " shape=" : "", r->shape ? r->shape : "",
            r->kernel ? " kernel=" : "", r->kernel ? r->kernel : "", r->error_code ? " error=" : "",
            r->error_code ? r->error_code : "", r->queue_ms, r->h2d_ms, r->kernel_ms, r->d2h_ms);
}
