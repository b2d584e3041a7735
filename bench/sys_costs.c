/* What the operating system charges for what a request does, on the machine it runs on:
 * a system call, a clock read, a thread wake-up (futex/condition variable, eventfd through poll),
 * a page fault on fresh memory, a loopback TCP round trip. A request's cost on the GPU machine
 * (a virtual machine) was ~4x this machine's; these figures say which of its parts to cut.
 *
 *   build/bench/sys_costs          prints one line per measure, ns per operation */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(const char *what, double secs, long n)
{
    printf("%-44s %10.0f ns\n", what, secs / (double)n * 1e9);
    fflush(stdout);
}

/* ---- ping-pong between two threads through a mutex + condition variable ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn, rounds;

static void *cond_peer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (long i = 0; i < rounds; i++) {
        while (turn != 1)
            pthread_cond_wait(&cv, &mu);
        turn = 0;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void cond_pingpong(long n)
{
    pthread_t t;
    rounds = n;
    turn = 0;
    pthread_create(&t, NULL, cond_peer, NULL);
    double t0 = now();
    pthread_mutex_lock(&mu);
    for (long i = 0; i < n; i++) {
        turn = 1;
        pthread_cond_signal(&cv);
        while (turn != 0)
            pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    report("cond var round trip (2 wake-ups)", now() - t0, n);
    pthread_join(t, NULL);
}

/* ---- the same through eventfds and poll(), as a worker resumes an HTTP thread ---- */
static int efd[2];

static void *poll_peer(void *arg)
{
    long n = *(long *)arg;
    uint64_t v;
    for (long i = 0; i < n; i++) {
        struct pollfd p = {.fd = efd[0], .events = POLLIN};
        poll(&p, 1, -1);
        if (read(efd[0], &v, sizeof v) < 0)
            return NULL;
        v = 1;
        if (write(efd[1], &v, sizeof v) < 0)
            return NULL;
    }
    return NULL;
}

static void poll_pingpong(long n)
{
    pthread_t t;
    uint64_t v = 1;
    efd[0] = eventfd(0, 0);
    efd[1] = eventfd(0, 0);
    pthread_create(&t, NULL, poll_peer, &n);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        if (write(efd[0], &v, sizeof v) < 0)
            break;
        struct pollfd p = {.fd = efd[1], .events = POLLIN};
        poll(&p, 1, -1);
        if (read(efd[1], &v, sizeof v) < 0)
            break;
    }
    report("eventfd+poll round trip (2 wake-ups)", now() - t0, n);
    pthread_join(t, NULL);
    close(efd[0]);
    close(efd[1]);
}

/* ---- loopback TCP: 1-byte request, 1-byte answer, one connection ---- */
static int listen_fd;

static void *tcp_peer(void *arg)
{
    long n = *(long *)arg;
    char b;
    int c = accept(listen_fd, NULL, NULL);
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (long i = 0; i < n; i++)
        if (recv(c, &b, 1, 0) != 1 || send(c, &b, 1, 0) != 1)
            break;
    close(c);
    return NULL;
}

static void tcp_pingpong(long n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    bind(listen_fd, (struct sockaddr *)&a, sizeof a);
    getsockname(listen_fd, (struct sockaddr *)&a, &len);
    listen(listen_fd, 1);
    pthread_t t;
    pthread_create(&t, NULL, tcp_peer, &n);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
        return;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char b = 'x';
    double t0 = now();
    for (long i = 0; i < n; i++)
        if (send(s, &b, 1, 0) != 1 || recv(s, &b, 1, 0) != 1)
            break;
    report("loopback TCP round trip, 1 byte", now() - t0, n);
    pthread_join(t, NULL);
    close(s);
    close(listen_fd);
}

int main(void)
{
    long n = 200000;
    double t0 = now();
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    report("system call (getppid)", now() - t0, n);
    t0 = now();
    volatile double sink = 0;
    for (long i = 0; i < n; i++)
        sink += now();
    report("clock_gettime(CLOCK_MONOTONIC)", now() - t0, n);
    unsigned char buf[128] = {0};
    t0 = now();
    for (long i = 0; i < n / 10; i++)
        if (getrandom(buf, sizeof buf, 0) < 0)
            break;
    report("getrandom, 16 bytes", now() - t0, n / 10);
    int dn = open("/dev/null", 1);
    t0 = now();
    for (long i = 0; i < n; i++)
        if (write(dn, buf, 100) < 0)
            break;
    report("write 100 bytes to /dev/null", now() - t0, n);
    close(dn);
    size_t sz = (size_t)256 << 20;
    char *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    t0 = now();
    for (size_t off = 0; off < sz; off += 4096)
        p[off] = 1;
    report("page fault, fresh 4 KiB page", now() - t0, (long)(sz / 4096));
    t0 = now();
    for (int r = 0; r < 4; r++)
        memset(p, r, sz);
    report("memset per 4 KiB (warm pages)", now() - t0, (long)(4 * sz / 4096));
    munmap(p, sz);
    t0 = now();
    for (long i = 0; i < 2000; i++) {
        char *volatile q = malloc(256 << 10);
        memset(q, (int)i, 256 << 10);
        sink += q[i * 97 % (256 << 10)];
        free(q);
    }
    report("malloc+touch+free 256 KiB", now() - t0, 2000);
    cond_pingpong(50000);
    poll_pingpong(50000);
    tcp_pingpong(50000);
    (void)sink;
    return 0;
}
