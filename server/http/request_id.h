/* X-Request-Id: the id one request is known by in the client's logs and ours. A client's id
 * is taken when it is 1..128 characters of [A-Za-z0-9._:-] (UUIDs, trace ids, "svc:42"): it
 * goes into log lines and headers as is, so nothing that could split a line or a header gets
 * in. Without one, the daemon makes a UUIDv4. */
#ifndef CRUNCHD_REQUEST_ID_H
#define CRUNCHD_REQUEST_ID_H

#include <stdbool.h>
#include <stddef.h>

#define CR_REQUEST_ID_MAX 128

bool cr_request_id_valid(const char *id);

/* The request's id into out (CR_REQUEST_ID_MAX + 1 bytes): the client's header when valid, a new
 * UUIDv4 when absent. -1 when the client's is invalid: out then holds a new one, to answer the
 * 400 with. */
int cr_request_id_take(const char *header, char *out);

#endif
