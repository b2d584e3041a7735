/* crunchd --check URL; see check.h. Non-blocking sockets and poll() against one deadline, so a
 * server that accepts and then says nothing cannot hold a health check past 2 s. */
#include "server/http/check.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK_TIMEOUT_MS 2000

int cr_check_parse(const char *url, char *host, unsigned host_len, char *port, unsigned port_len,
                   const char **path, const char **err)
{
    static const char scheme[] = "http://";
    if (!url || !*url) {
        *err = "usage: crunchd --check http://HOST[:PORT][/PATH]";
        return -1;
    }
    if ( strncmp(url, scheme, sizeof scheme - 1) != 0) {
        *err = "URL must start with http:// (https is not supported)";
        return -1;
    }
    const char *p = url + sizeof scheme - 1;
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    const char *h = p, *h_end, *colon = NULL;
    if (*p == '[') { /* [v6]:port */
        h = p + 1;
        h_end = memchr(h, ']', (size_t)(end - h));
        if (!h_end) {
            *err = "unterminated [ in host";
            return -1;
        }
        if (h_end + 1 < end) {
            if (h_end[1] != ':') {
                *err = "junk after ] in host";
                return -1;
            }
            colon = h_end + 1;
        }
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        h_end = colon ? colon : end;
    }
    size_t hl = (size_t)(h_end - h);
    if (hl == 0 || hl >= host_len) {
        *err = hl == 0 ? "empty host" : "host too long";
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (colon) {
        size_t pl = (size_t)(end - colon - 1);
        if (pl == 0 || pl >= port_len || pl > 5 || strspn(colon + 1, "0123456789") < pl) {
            *err = "port must be a number";
            return -1;
        }
        memcpy(port, colon + 1, pl);
        port[pl] = '\0';
    } else {
        snprintf(port, port_len, "80");
    }
    *path = slash ? slash : "/";
    for (const char *c = *path; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            *err = "path has spaces or control characters";
            return -1;
        }
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : n > 0 ? 1 : 0;
    }
}

static int connect_any(const char *host, const char *port, long long deadline, const char **why)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        *why = gai_strerror(rc);
        return -1;
    }
    int fd = -1;
    *why = "connection refused";
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        int err = errno, ready = 0;
        if (err == EINPROGRESS) {
            ready = wait_fd(fd, POLLOUT, deadline);
            socklen_t len = sizeof err;
            if (ready > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
                break;
        }
        *why = ready == 0 && err == EINPROGRESS ? "timed out connecting" : strerror(err);
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

int cr_check_url(const char *url)
{
    char host[256], port[8], req[2048], buf[512];
    const char *path, *why = NULL;
    long long deadline = now_ms() + CHECK_TIMEOUT_MS;
    if (cr_check_parse(url, host, sizeof host, port, sizeof port, &path, &why) < 0) {
        fprintf(stderr, "crunchd --check: %s: %s\n", url ? url : "(no URL)", why);
        return 1;
    }
    int fd = connect_any(host, port, deadline, &why);
    if (fd < 0) {
        fprintf(stderr, "crunchd --check: %s: %s\n", url, why);
        return 1;
    }
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: crunchd-check\r\n"
                     "Accept: */*\r\nConnection: close\r\n\r\n",
                     path, host, port);
    if (n < 0 || (size_t)n >= sizeof req) {
        close(fd);
        fprintf(stderr, "crunchd --check: %s: URL too long\n", url);
        return 1;
    }
    size_t sent = 0, got = 0;
    while (sent < (size_t)n) {
        ssize_t w = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) <= 0)
                break;
        } else {
            break;
        }
    }
    /* The status line is all we need: read until a line end, EOF, or the deadline. */
    while (sent == (size_t)n && got < sizeof buf - 1 && !memchr(buf, '\n', got)) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLIN, deadline) <= 0)
                break;
        } else
            break;
    }
    close(fd);
    buf[got] = '\0';
    int major, minor, status = 0;
    if (sscanf(buf, "HTTP/%d.%d %3d", &major, &minor, &status) != 3) {
        fprintf(stderr, "crunchd --check: %s: %s\n", url,
                sent < (size_t)n ? "could not send the request"
                : got == 0       ? "no answer within 2 s"
                                 : "not an HTTP answer");
        return 1;
    }
    if (status < 200 || status > 299) {
        fprintf(stderr, "crunchd --check: %s: HTTP %d\n", url, status);
        return 1;
    }
    return 0;
}
