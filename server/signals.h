/* SIGTERM, SIGINT and SIGHUP, whichever thread they reach. The handler only writes the signal's
 * number to a pipe; the main thread reads it (cr_signals_wait) and does the work (drain, exit).
 *
 * Why a handler and not a blocked mask with sigtimedwait, as before: a mask must be in place
 * before the first thread is created, since threads inherit it, and libopenblas starts its
 * thread pool in a library constructor, before main(). A constructor of our own cannot run
 * earlier: the dynamic loader runs every shared library's initialisers before the executable's,
 * whatever their priority (priorities order constructors within one object only), so OpenBLAS's
 * threads had no mask and a SIGTERM the kernel handed to one of them killed the process without
 * a drain. And even a mask set in time is not enough: a signal sent to one thread (tgkill) that
 * blocks it stays pending on that thread forever, so nothing would drain either. A handler
 * installed before any thread exists (main.c puts cr_signals_install in the executable's
 * .preinit_array, which the loader runs before any library's constructor) is process-wide: any
 * thread that takes the signal, OpenBLAS's, libmicrohttpd's, a worker, CUDA's, hands it to the
 * main thread. SA_RESTART, so a system call it interrupts resumes where it can (the rest, poll
 * and the like, return EINTR, which libmicrohttpd retries). */
#ifndef CRUNCHD_SIGNALS_H
#define CRUNCHD_SIGNALS_H

/* Installs the handler (and ignores SIGPIPE). Safe to call again; -1 when the pipe or a
 * sigaction failed (errno set). */
int cr_signals_install(void);
/* Puts the default dispositions back (for modes that are not the daemon: --check). */
void cr_signals_default(void);
/* Waits up to `seconds` for a signal taken by the handler: its number, 0 when none came. */
int cr_signals_wait(double seconds);

#endif
