/* Async jobs by id, until their result expires (TTL after finishing) or memory runs over the cap. */
#ifndef CRUNCHD_JOB_TABLE_H
#define CRUNCHD_JOB_TABLE_H

#include <pthread.h>
#include <stddef.h>

#include "server/engine/job.h"

#define CR_TABLE_BUCKETS 4096

typedef struct {
    pthread_mutex_t mu;
    cr_job *buckets[CR_TABLE_BUCKETS];
    size_t count, bytes;
    double ttl_s;
    size_t cap_bytes;
} cr_job_table;

int cr_job_table_init(cr_job_table *t, double ttl_s, size_t cap_bytes);
/* Frees every job still held. */
void cr_job_table_destroy(cr_job_table *t);
/* Takes a reference. */
void cr_job_table_put(cr_job_table *t, cr_job *j);
/* Returns the job with a new reference (release it), or NULL when unknown or expired. */
cr_job *cr_job_table_get(cr_job_table *t, const char *id);
/* Removes it; returns the job with the table's reference handed over, or NULL. */
cr_job *cr_job_table_take(cr_job_table *t, const char *id);
/* Bytes of the finished jobs it holds (as of the last sweep). */
size_t cr_job_table_bytes(cr_job_table *t);
/* Drops expired finished jobs, then the oldest finished ones while over the byte cap. */
void cr_job_table_sweep(cr_job_table *t, double now);
/* Finished async jobs whose result nobody fetched yet (the drain waits for them). */
size_t cr_job_table_unfetched(cr_job_table *t);

#endif
