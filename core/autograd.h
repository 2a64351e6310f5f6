/*
 * autograd.h -- core-internal interface of the define-by-run tape.
 *
 * An op whose inputs require grad (and grad mode is on) records one node
 * for its one output:
 *
 *   cnn_tensor *y = ...compute...;
 *   cnn_node *n = cnn_autograd_record(y, "MulBackward", mul_backward, 2, (cnn_tensor*[]){a, b});
 *   if (n) { cnn_node_save(n, 0, a); cnn_node_save(n, 1, b); }
 *
 * cnn_autograd_record() returns NULL when nothing needs a gradient (then
 * nothing is saved: "skip inputs that need no gradient").  n->needs[i] says
 * whether input i wants a gradient.  The node holds a reference to every
 * input that needs one (to reach its grad_fn or .grad), and *detached*
 * references to saved tensors (so output -> node -> saved output makes no
 * cycle).  The node never references its output except through the weak
 * pointer `output`, which cnn_tensor_release() clears.
 *
 * A backward function runs with grad mode off.  It receives the gradient
 * of the output (same shape as the output, contiguous not guaranteed) and
 * fills grad_in[i] with a NEW reference, for each i with n->needs[i]; it may
 * leave grad_in[i] NULL for "no gradient" (treated as zero).  Gradients of
 * broadcast inputs must already be reduced to the input's shape
 * (cnn_sum_to).  It returns 0, or -1 with cnn_set_error().
 *
 * Invariants: n->refcount counts tensors whose grad_fn is n plus nodes'
 * traversal references; inputs[i] != NULL exactly when needs[i].
 */
#ifndef CNN_AUTOGRAD_H
#define CNN_AUTOGRAD_H

#include "cnn.h"

#define CNN_NODE_MAX_INPUTS 5 /* conv_bn_relu_pool: x, w, b, gamma, beta */
#define CNN_NODE_MAX_SAVED  6

typedef struct cnn_node cnn_node;
typedef int (*cnn_backward_fn)(cnn_node *n, cnn_tensor *grad_out, cnn_tensor **grad_in);

struct cnn_node {
  int refcount;
  const char *name; /* "MulBackward" */
  cnn_backward_fn backward;
  int ninputs;
  bool needs[CNN_NODE_MAX_INPUTS];                     /* input i wants a gradient */
  cnn_tensor *inputs[CNN_NODE_MAX_INPUTS];             /* owned refs where needs[i], else NULL */
  int64_t in_shape[CNN_NODE_MAX_INPUTS][CNN_MAX_DIMS]; /* input shapes ... */
  int in_ndim[CNN_NODE_MAX_INPUTS];                    /* ... for sum_to */
  cnn_dtype in_dtype[CNN_NODE_MAX_INPUTS];
  cnn_tensor *saved[CNN_NODE_MAX_SAVED];     /* detached owned refs or NULL */
  int64_t saved_version[CNN_NODE_MAX_SAVED]; /* storage versions when saved */
  double p[8];                               /* scalar parameters of the op */
  int64_t ip[16];                            /* integer parameters of the op */
  /* op geometry (a conv or pool shape, a pad plan): plain data copied in by
   * cnn_node_set_geometry, so recording allocates nothing but the node */
  _Alignas(8) unsigned char geometry[272];
  cnn_tensor *output;      /* weak pointer to the output, or NULL */
  cnn_hook *hooks;         /* hooks registered on the (non-leaf) output */
  bool retain_output_grad; /* retain_grad() was called on the output */
  bool released;           /* graph freed after backward */
  /* scratch for cnn_backward */
  cnn_tensor *grad_accum;
  int pending;
  int visit_mark;
};

/* Record a node for `out` if grad mode is on and an input requires grad;
 * NULL (and no error) otherwise.  inputs[i] may be NULL (non-tensor arg). */
cnn_node *cnn_autograd_record(cnn_tensor *out, const char *name, cnn_backward_fn fn, int ninputs,
                              cnn_tensor *const *inputs);
/* Copy the op's geometry (plain data, at most sizeof n->geometry bytes: a
 * compile-time size, so exceeding it is a bug) into the node; returns it. */
void *cnn_node_set_geometry(cnn_node *n, const void *src, size_t size);
/* Keep a detached reference to `t` in slot i for backward. */
void cnn_node_save(cnn_node *n, int slot, cnn_tensor *t);
/* The saved tensor of slot i, or NULL with an error if it was modified in
 * place since it was saved or the graph was already freed. */
cnn_tensor *cnn_node_saved(cnn_node *n, int slot);
/* true if any of the inputs requires grad and grad mode is on */
bool cnn_any_requires_grad(int n, cnn_tensor *const *inputs);

/* frees a list of hooks, calling each one's free_ud (tensors, nodes) */
void cnn_hook_list_free(cnn_hook *h);

void cnn_node_retain(cnn_node *n);
void cnn_node_release(cnn_node *n);

/* (backward.c) Reduce a gradient `g` to input i's recorded shape (undo broadcast) and
 * cast it to input i's dtype; returns a new reference (g retained if equal). */
cnn_tensor *cnn_grad_to_input(cnn_node *n, int i, cnn_tensor *g);

/* (backward.c) Whether the gradient g a backward rule received is private:
 * the rule holds its only reference (no hook, user, node or view keeps it
 * or its storage), it is contiguous (channels-last where `like` prefers
 * that layout: core/memory_format.c), has no graph of its own, and has the
 * dtype, shape and device of `like`.  Such a g may be overwritten -- a rule
 * may write its input's gradient over it and hand g on (batch norm's dx
 * over dy, where the backend allows it). */
bool cnn_grad_is_private(const cnn_tensor *g, const cnn_tensor *like);

/* Run a hook list in order on *g (owned); hooks may replace it. */
int cnn_autograd_run_hooks(cnn_hook *h, cnn_tensor **g);

#endif
