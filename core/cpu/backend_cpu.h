/*
 * backend_cpu.h -- core-internal: the CPU backend's own entries, with the
 * signatures of core/backend.h's table (the `dev` argument is ignored).
 * backend_cpu.c puts them, and thin wrappers around the kernels of
 * kernels.h, into cnn_cpu_backend.  Files: elementwise.c, reduce.c,
 * optim.c, loss.c, index.c.
 */
#ifndef CNN_CPU_BACKEND_CPU_H
#define CNN_CPU_BACKEND_CPU_H

#include "backend.h"

/* ---- elementwise.c: strided entries ---- */
int cnn_cpu_unary(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                  cnn_be_arg x, double p0, double p1);
int cnn_cpu_binary(int dev, cnn_binary_op op, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                   cnn_be_arg a, cnn_be_arg b);
int cnn_cpu_unary_grad(int dev, cnn_unary_op op, cnn_dtype dt, const cnn_be_shape *s,
                       cnn_be_arg out, cnn_be_arg g, cnn_be_arg v, double p0, double p1);
int cnn_cpu_where(int dev, cnn_dtype cond_dt, cnn_dtype dt, const cnn_be_shape *s, cnn_be_arg out,
                  cnn_be_arg cond, cnn_be_arg a, cnn_be_arg b);

/* ---- reduce.c: rows, and columns of a contiguous tensor ---- */
int cnn_cpu_reduce(int dev, cnn_reduce_op op, cnn_dtype dt, cnn_dtype out_dt, int64_t M, int64_t R,
                   const void *x, void *out, double p);
int cnn_cpu_reduce_leading(int dev, cnn_dtype dt, cnn_dtype out_dt, int64_t R, int64_t M,
                           const void *x, void *out, bool mean);

/* ---- optim.c: fused optimizer updates ---- */
int cnn_cpu_sgd_step(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *buf,
                     cnn_sgd_hp h);
int cnn_cpu_adam_step(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *m, void *v,
                      void *vmax, cnn_adam_hp h);
int cnn_cpu_rmsprop_step(int dev, cnn_dtype dt, int64_t n, void *p, const void *g, void *sq,
                         void *ga, void *buf, cnn_rmsprop_hp h);
int cnn_cpu_adam_step_many(int dev, cnn_dtype dt, int count, const cnn_adam_slice *s);

/* ---- index.c: indexing ---- */
int cnn_cpu_index_select(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k,
                         int64_t inner, const void *x, const int64_t *index, void *out);
int cnn_cpu_index_add(int dev, cnn_dtype dt, int64_t outer, int64_t size, int64_t k, int64_t inner,
                      const void *g, const int64_t *index, void *out);
int cnn_cpu_gather(int dev, cnn_dtype dt, int ndim, const int64_t *ishape, int dim, const void *x,
                   const int64_t *xstride, const int64_t *index, void *out);
int cnn_cpu_scatter_add(int dev, cnn_dtype dt, int ndim, const int64_t *oshape,
                        const int64_t *ishape, int dim, const int64_t *index, const void *src,
                        void *out);

/* ---- tensor ops: sort.c, scan.c, index.c's scatter ---- */
int cnn_cpu_sort(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner, int64_t k,
                 bool descending, const void *x, void *values, int64_t *indices);
int cnn_cpu_cumulate(int dev, cnn_dtype dt, bool prod, bool reverse, int64_t outer, int64_t D,
                     int64_t inner, const void *x, void *y);
int cnn_cpu_cumprod_backward(int dev, cnn_dtype dt, int64_t outer, int64_t D, int64_t inner,
                             const void *x, const void *g, void *dx);
int cnn_cpu_scatter(int dev, cnn_dtype dt, int ndim, const int64_t *oshape, const int64_t *ishape,
                    int dim, const int64_t *index, const void *src, void *out);

/* ---- loss.c: class losses, BCE, dropout mask ---- */
int cnn_cpu_class_loss_forward(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                               const int64_t *target, const void *weight, void *loss, void *wsum);
int cnn_cpu_class_loss_backward(int dev, cnn_dtype dt, const cnn_be_class_loss *c, const void *x,
                                const int64_t *target, const void *weight, const void *g,
                                int g_per_row, double scale, void *gx);
int cnn_cpu_bce_forward(int dev, cnn_dtype dt, int64_t n, const void *x, const void *y,
                        const void *pw, void *out);
int cnn_cpu_bce_backward(int dev, cnn_dtype dt, int64_t n, int which, const void *x, const void *y,
                         const void *pw, const void *g, void *out);
int cnn_cpu_dropout_mask(int dev, cnn_dtype dt, int64_t n, double p, uint64_t seed, void *mask);

/* ---- copy_bytes.c: copy_d2d, the contiguous copy (threads from 1 MB) ---- */
int cnn_cpu_copy_bytes(void *dst, const void *src, size_t nbytes, int device);

/* ---- linear_relu_dropout.c: the linear -> ReLU -> dropout block's passes ---- */
int cnn_cpu_linear_relu_dropout_forward(int dev, cnn_dtype dt, int64_t rows, int64_t cols, void *y,
                                        const void *bias, double p, uint64_t seed);
int cnn_cpu_linear_relu_dropout_backward(int dev, cnn_dtype dt, int64_t n, const void *y,
                                         const void *g, double scale, void *dz);

#endif
