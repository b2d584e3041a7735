/* Read deadlines: a request must arrive in time, however it trickles.
 *
 * libmicrohttpd's --conn-timeout-s is an idle timeout that restarts with every byte, so a client
 * sending a header byte every few seconds holds its connection (and its share of
 * --max-connections) forever: a thousand such sockets cost an attacker nothing (slowloris). Here
 * each connection carries a clock, started when it opens and again when its previous answer is
 * done: its request line and headers must arrive within --read-timeout-s, and from then on its
 * body must keep up --min-body-rate-kbs on average (allowed: read-timeout + bytes received /
 * rate). A connection that falls behind is shut down from the main thread's tick. The clock stops
 * once the request is complete (while its job runs and its answer is sent, other limits apply:
 * the job's deadline, --conn-timeout-s). libmicrohttpd does not say when the first byte of a
 * request arrives, so an idle keep-alive connection waiting for its next request is on the same
 * clock: it is closed after --read-timeout-s too. */
#ifndef CRUNCHD_HTTP_READ_DEADLINE_H
#define CRUNCHD_HTTP_READ_DEADLINE_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct cr_read_clock cr_read_clock;

typedef struct {
    pthread_mutex_t mu;      /* guards the list; a clock's fd is valid while it is in it */
    cr_read_clock *head;     /* every open connection */
    double timeout_s;        /* request line and headers within this; 0: no deadline */
    double min_rate;         /* bytes/s a body must average after that; 0: none */
} cr_read_deadlines;

void cr_read_deadlines_init(cr_read_deadlines *d, int timeout_s, int min_rate_kbs);
void cr_read_deadlines_destroy(cr_read_deadlines *d);

/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the cr_read_deadlines): a clock per connection,
 * its socket_context, from open to close. */
void cr_read_deadlines_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code);

/* From the access handler: n more bytes of the request (its headers, parts of its body). */
void cr_read_clock_received(struct MHD_Connection *conn, size_t n);
/* The request is complete: no deadline while it is served. */
void cr_read_clock_stop(struct MHD_Connection *conn);
/* Its answer is done: the next request is on the clock. */
void cr_read_clock_restart(struct MHD_Connection *conn);

/* Whether the sweep shut this connection down (its request is logged 408, not 499). */
bool cr_read_clock_was_cut(struct MHD_Connection *conn);

/* Shuts down every connection past its deadline (libmicrohttpd then sees the socket closed and
 * cleans it up). Returns how many. Called a few times a second. */
int cr_read_deadlines_sweep(cr_read_deadlines *d, double now);

#endif
