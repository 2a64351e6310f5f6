/*
 * onnx_depth.c -- a nesting guard run before protobuf-c decodes a file.
 *
 * protobuf-c's unpacker recurses once per nested message and has no depth
 * limit, so a small hostile file (graphs inside attributes inside nodes
 * inside graphs, tens of thousands deep) would overflow the stack.  This
 * walk reads only the wire format's framing -- tags and lengths, through
 * the generated descriptors to tell a sub-message from a string -- and
 * refuses nesting deeper than CNN_ONNX_MAX_DEPTH or framing that runs past
 * its buffer.  It decodes no values: protobuf-c does that afterwards.
 */
#include "onnx_internal.h"

#define CNN_ONNX_MAX_DEPTH 64

/* a varint at *p (< end); false when it runs off the end or past 10 bytes */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 70 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    if (shift < 64) *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

/* skips a field of wire type wt; false on bad framing */
static bool skip_value(const uint8_t **p, const uint8_t *end, int wt, uint64_t *len) {
  uint64_t v;
  *len = 0;
  switch (wt) {
  case 0: return read_varint(p, end, &v);
  case 1:
    if (end - *p < 8) return false;
    *p += 8;
    return true;
  case 5:
    if (end - *p < 4) return false;
    *p += 4;
    return true;
  case 2:
    if (!read_varint(p, end, len) || *len > (uint64_t)(end - *p)) return false;
    return true;         /* the caller steps over (or into) the payload */
  default: return false; /* groups (3, 4) and invalid types */
  }
}

static bool walk(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                 int depth) {
  if (depth > CNN_ONNX_MAX_DEPTH) return false;
  while (p < end) {
    uint64_t tag, len;
    if (!read_varint(&p, end, &tag) || !skip_value(&p, end, (int)(tag & 7), &len)) return false;
    if ((tag & 7) != 2) continue;
    const ProtobufCFieldDescriptor *f =
        tag >> 3 <= 0x1fffffff ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3))
                               : NULL;
    if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !walk(p, p + len, f->descriptor, depth + 1))
      return false;
    p += len;
  }
  return true;
}

bool cnn_onnx_nesting_ok(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc) {
  return walk(buf, buf + len, desc, 0);
}
