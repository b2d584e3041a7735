/* Signals through a self-pipe; see signals.h. */
#include "server/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const int taken[] = {SIGTERM, SIGINT, SIGHUP};
static int pipe_fd[2] = {-1, -1}; /* [0]: the main thread reads; [1]: the handler writes */

/* Async-signal-safe: one write(2). A full pipe (64 Ki signals unread) drops the byte, which
 * loses nothing: the main thread has that many still to read. */
static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(pipe_fd[1], &b, 1);
    (void)n;
    errno = saved;
}

int cr_signals_install(void)
{
    if (pipe_fd[0] < 0 && pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask); /* one handler at a time per thread; it is short */
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        if (sigaction(taken[i], &sa, NULL) != 0)
            return -1;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

void cr_signals_default(void)
{
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        signal(taken[i], SIG_DFL);
}

int cr_signals_wait(double seconds)
{
    struct pollfd p = {.fd = pipe_fd[0], .events = POLLIN};
    int ms = seconds > 0 ? (int)(seconds * 1e3) : 0;
    if (pipe_fd[0] < 0 || poll(&p, 1, ms) <= 0) /* EINTR (the handler ran here) reads as none yet */
        return 0;
    unsigned char b = 0;
    return read(pipe_fd[0], &b, 1) == 1 ? b : 0;
}
