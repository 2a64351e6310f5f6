/*
 * onnx_internal.h -- what the ONNX files of core/io share (not public):
 * the protoc-c generated types (onnx.pb-c.h, built from Debian's
 * onnx.proto) and the TensorProto <-> cnn_tensor conversions of
 * onnx_tensor.c, used by the reader (onnx_read.c) and the writer
 * (onnx_write.c).
 */
#ifndef CNN_ONNX_INTERNAL_H
#define CNN_ONNX_INTERNAL_H

#include "io_internal.h"
#include "onnx.pb-c.h"

/* A validated TensorProto as a new CPU tensor; NULL with cnn_error() naming
 * `what` (the file) and the tensor. */
cnn_tensor *cnn_onnx_tensor_from_proto(const Onnx__TensorProto *p, const char *what);

/* Fills an initialised TensorProto with t's dims, type and raw little-endian
 * data.  *keep receives the contiguous host tensor the raw data points into
 * (release it after packing).  0, or -1 with cnn_error(). */
int cnn_onnx_tensor_to_proto(cnn_tensor *t, const char *name, Onnx__TensorProto *p,
                             cnn_tensor **keep);

/* Whether buf's framing is sound and its messages nest at most 64 deep
 * (protobuf-c recurses without a limit): run before every unpack. */
bool cnn_onnx_nesting_ok(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *desc);

/* TensorProto.DataType of a cnnsh dtype */
int cnn_onnx_elem_type(cnn_dtype dt);

#endif /* CNN_ONNX_INTERNAL_H */
