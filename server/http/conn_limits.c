/* Connection counts per listening socket; see conn_limits.h. */
#include "server/http/conn_limits.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct cr_ip_count {
    unsigned char key[17]; /* the family, then 4 or 16 address bytes */
    size_t len;
    unsigned n;
    cr_ip_count *next;
};

void cr_conn_limits_init(cr_conn_limits *l, unsigned max_total, unsigned max_per_ip)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    l->max_total = max_total;
    l->max_per_ip = max_per_ip;
}

void cr_conn_limits_destroy(cr_conn_limits *l)
{
    for (int i = 0; i < CR_CONN_LIMITS_BUCKETS; i++)
        for (cr_ip_count *c = l->bucket[i], *next; c; c = next) {
            next = c->next;
            free(c);
        }
    pthread_mutex_destroy(&l->mu);
}

/* The address's key, or 0 when it has none that the per-address limit counts (a Unix peer). */
static size_t ip_key(const struct sockaddr *sa, unsigned char key[17])
{
    if (sa && sa->sa_family == AF_INET) {
        key[0] = AF_INET;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 5;
    }
    if (sa && sa->sa_family == AF_INET6) {
        key[0] = AF_INET6;
        memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 17;
    }
    return 0;
}

static cr_ip_count **find(cr_conn_limits *l, const unsigned char *key, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ key[i]) * 16777619u;
    cr_ip_count **p = &l->bucket[h % CR_CONN_LIMITS_BUCKETS];
    while (*p && !((*p)->len == len && memcmp((*p)->key, key, len) == 0))
        p = &(*p)->next;
    return p;
}

cr_admission cr_conn_limits_take(cr_conn_limits *l, const struct sockaddr *sa)
{
    unsigned char key[17];
    size_t len = l->max_per_ip ? ip_key(sa, key) : 0;
    cr_admission verdict = CR_ADMIT;
    pthread_mutex_lock(&l->mu);
    cr_ip_count **p = len ? find(l, key, len) : NULL;
    if (l->total >= l->max_total) {
        verdict = CR_FULL;
    } else if (p && *p && (*p)->n >= l->max_per_ip) {
        verdict = CR_IP_FULL;
    } else if (p && !*p && !(*p = calloc(1, sizeof **p))) {
        verdict = CR_FULL; /* out of memory: refused as when full */
    } else {
        if (p) {
            memcpy((*p)->key, key, len);
            (*p)->len = len;
            (*p)->n++;
        }
        l->total++;
    }
    pthread_mutex_unlock(&l->mu);
    return verdict;
}

void cr_conn_limits_release(cr_conn_limits *l, const struct sockaddr *sa)
{
    unsigned char key[17];
    size_t len = l->max_per_ip ? ip_key(sa, key) : 0;
    pthread_mutex_lock(&l->mu);
    cr_ip_count **p = len ? find(l, key, len) : NULL;
    if (p && *p && --(*p)->n == 0) {
        cr_ip_count *gone = *p;
        *p = gone->next;
        free(gone);
    }
    if (l->total) /* a connection libmicrohttpd accepted before it was quiesced was never taken */
        l->total--;
    pthread_mutex_unlock(&l->mu);
}

bool cr_conn_limits_room(cr_conn_limits *l)
{
    pthread_mutex_lock(&l->mu);
    bool room = l->total < l->max_total;
    pthread_mutex_unlock(&l->mu);
    return room;
}
