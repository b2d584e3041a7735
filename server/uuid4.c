/* Random UUIDs from a per-thread pool of the kernel's random bytes; see uuid4.h. */
#include "server/uuid4.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <uuid/uuid.h>

#define POOL_BYTES 4096

static _Thread_local unsigned char pool[POOL_BYTES];
static _Thread_local size_t pool_left; /* unused bytes at the end of pool */

static void refill(void)
{
    size_t got = 0;
    while (got < POOL_BYTES) {
        ssize_t n = getrandom(pool + got, POOL_BYTES - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    pool_left = got - got % sizeof(uuid_t);
}

void cr_uuid4(char out[37])
{
    uuid_t u;
    if (pool_left < sizeof u)
        refill();
    if (pool_left < sizeof u) { /* getrandom failed (it does not, after boot): libuuid's own way */
        uuid_generate_random(u);
    } else {
        memcpy(u, pool + POOL_BYTES - pool_left, sizeof u);
        memset(pool + POOL_BYTES - pool_left, 0, sizeof u); /* an id's bytes serve once */
        pool_left -= sizeof u;
        u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4 */
        u[8] = (unsigned char)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    }
    uuid_unparse_lower(u, out);
}
