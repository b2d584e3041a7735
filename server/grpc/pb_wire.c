/* Protobuf's wire format; see pb_wire.h. */
#include "server/grpc/pb_wire.h"

#define MAX_FIELD_NUMBER ((1u << 29) - 1)

bool cr_pb_varint(const uint8_t *p, size_t n, size_t *at, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0, i = 0; i < CR_PB_VARINT_MAX; i++, shift += 7) {
        if (*at >= n)
            return false;
        uint8_t b = p[(*at)++];
        if (i == 9 && b > 1) /* the 10th byte holds bit 63 alone */
            return false;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

bool cr_pb_next(const uint8_t *msg, size_t n, size_t at, cr_pb_field *f)
{
    uint64_t tag, len;
    f->start = at;
    if (!cr_pb_varint(msg, n, &at, &tag) || (tag >> 3) == 0 || (tag >> 3) > MAX_FIELD_NUMBER)
        return false;
    f->number = (uint32_t)(tag >> 3);
    f->type = (int)(tag & 7);
    f->value = at;
    switch (f->type) {
    case CR_PB_VARINT:
        if (!cr_pb_varint(msg, n, &at, &len))
            return false;
        f->len = at - f->value;
        break;
    case CR_PB_I64:
    case CR_PB_I32:
        f->len = f->type == CR_PB_I64 ? 8 : 4;
        if (n - at < f->len)
            return false;
        break;
    case CR_PB_LEN:
        if (!cr_pb_varint(msg, n, &at, &len) || len > n - at)
            return false;
        f->value = at;
        f->len = (size_t)len;
        break;
    default:
        return false;
    }
    f->end = f->value + f->len;
    return true;
}

size_t cr_pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t cr_pb_put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

size_t cr_pb_put_len_header(uint8_t *out, uint32_t number, uint64_t len)
{
    size_t n = cr_pb_put_varint(out, (uint64_t)number << 3 | CR_PB_LEN);
    return n + cr_pb_put_varint(out + n, len);
}

uint64_t cr_pb_len_field_size(uint32_t number, uint64_t len)
{
    return cr_pb_varint_size((uint64_t)number << 3 | CR_PB_LEN) + cr_pb_varint_size(len) + len;
}
