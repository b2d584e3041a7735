/* Request ids; see request_id.h. */
#include "server/http/request_id.h"

#include <string.h>

#include "server/uuid4.h"

static bool id_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == ':' || ch == '-';
}

bool cr_request_id_valid(const char *id)
{
    size_t n = 0;
    for (; id && id[n]; n++)
        if (n >= CR_REQUEST_ID_MAX || !id_char(id[n]))
            return false;
    return n > 0;
}

int cr_request_id_take(const char *header, char *out)
{
    if (header && cr_request_id_valid(header)) {
        strcpy(out, header);
        return 0;
    }
    cr_uuid4(out);
    return header ? -1 : 0;
}
