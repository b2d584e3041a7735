/* --max-connections and --max-connections-per-ip for a socket we accept on ourselves
 * (acceptor.h). libmicrohttpd counts only the connections it holds; the acceptor's connections
 * are ours while their first request head is awaited or a direct request runs, and libmicrohttpd's
 * after the hand-over, so both are counted here, from accept() to the last close(), wherever it
 * happens (our close, or libmicrohttpd's MHD_CONNECTION_NOTIFY_CLOSED). */
#ifndef CRUNCHD_HTTP_CONN_LIMITS_H
#define CRUNCHD_HTTP_CONN_LIMITS_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

#define CR_CONN_LIMITS_BUCKETS 256

typedef struct cr_ip_count cr_ip_count;

typedef struct {
    pthread_mutex_t mu;
    unsigned total, max_total;
    unsigned max_per_ip;                       /* 0: no per-address limit */
    cr_ip_count *bucket[CR_CONN_LIMITS_BUCKETS]; /* addresses with open connections */
} cr_conn_limits;

void cr_conn_limits_init(cr_conn_limits *l, unsigned max_total, unsigned max_per_ip);
void cr_conn_limits_destroy(cr_conn_limits *l);

typedef enum { CR_ADMIT, CR_FULL, CR_IP_FULL } cr_admission;

/* Counts a new connection from sa (a Unix peer counts only in the total) when there is room. */
cr_admission cr_conn_limits_take(cr_conn_limits *l, const struct sockaddr *sa);
/* A connection counted by take() has closed. */
void cr_conn_limits_release(cr_conn_limits *l, const struct sockaddr *sa);
/* Whether the total has room for one more (the acceptor stops accepting while it has none). */
bool cr_conn_limits_room(cr_conn_limits *l);

#endif
