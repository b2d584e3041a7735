/* The protobuf wire format at the level of fields (protobuf.dev/programming-guides/encoding): a
 * bounded reader of tags, varints and length-delimited fields, and a writer of the few headers
 * the inference answers are made of. For the two messages whose big tensors must never be copied
 * by protobuf-c (ModelInferRequest's raw_input_contents, ModelInferResponse's
 * raw_output_contents); every other message is protobuf-c's. */
#ifndef CRUNCHD_PB_WIRE_H
#define CRUNCHD_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CR_PB_VARINT = 0, CR_PB_I64 = 1, CR_PB_LEN = 2, CR_PB_I32 = 5 };

/* The most bytes a varint takes. */
#define CR_PB_VARINT_MAX 10

/* One field as read: its number and wire type, and where its value lies: for CR_PB_LEN the
 * bytes [value, value + len) of the message; for the others the value's bytes as they are. */
typedef struct {
    uint32_t number;
    int type;
    size_t start;     /* offset of the tag: the field is [start, end) */
    size_t value;     /* offset of the value (after a length's varint) */
    size_t len;       /* the value's bytes */
    size_t end;
} cr_pb_field;

/* The varint at p[*at..n): its value and *at past it; false when it is cut or longer than 10
 * bytes. */
bool cr_pb_varint(const uint8_t *p, size_t n, size_t *at, uint64_t *out);

/* The field at msg[at..n) into *f; false when it is malformed: cut short, a length past the end,
 * field number 0 or above 2^29 - 1, or a group (wire types 3 and 4, which proto3 has none of). */
bool cr_pb_next(const uint8_t *msg, size_t n, size_t at, cr_pb_field *f);

/* Bytes of v as a varint. */
size_t cr_pb_varint_size(uint64_t v);
/* Writes v as a varint at out (CR_PB_VARINT_MAX bytes of room); its length. */
size_t cr_pb_put_varint(uint8_t *out, uint64_t v);
/* A length-delimited field's tag and length (the value follows): at most 15 bytes. */
size_t cr_pb_put_len_header(uint8_t *out, uint32_t number, uint64_t len);
/* The whole size of such a field whose value is len bytes. */
uint64_t cr_pb_len_field_size(uint32_t number, uint64_t len);

#endif
