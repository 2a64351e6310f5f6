/*
 * backward.c -- cnn_backward(): reverse-mode differentiation over the tape.
 *
 * See autograd.c for the recording side.  Order: a node runs once all the
 * nodes that consume its output have run (dependency counts from one walk
 * of the graph), so each node's backward rule and hooks see its whole
 * gradient.  Leaf gradients are summed per leaf during the pass, then hooks
 * run and .grad accumulates.  Grad mode and autocast are off throughout:
 * each backward rule runs in the dtypes its forward saved.
 */
#include "autograd.h"
#include "cnn.h"
#include "tensor_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- a gradient in its input's shape, dtype and device (used by the rules) ---- */

cnn_tensor *cnn_grad_to_input(cnn_node *n, int i, cnn_tensor *g) {
  cnn_tensor *r = g;
  cnn_tensor_retain(r);
  if (g->ndim != n->in_ndim[i] || memcmp(g->shape, n->in_shape[i], g->ndim * sizeof(int64_t))) {
    cnn_tensor *s = cnn_sum_to(r, n->in_ndim[i], n->in_shape[i]);
    cnn_tensor_release(r);
    if (!(r = s)) return NULL;
  }
  if (r->dtype != n->in_dtype[i] && cnn_dtype_is_float(n->in_dtype[i])) {
    cnn_tensor *c = cnn_to_dtype(r, n->in_dtype[i]);
    cnn_tensor_release(r);
    if (!(r = c)) return NULL;
  }
  if (n->inputs[i] && !cnn_device_equal(cnn_tensor_device(r), cnn_tensor_device(n->inputs[i]))) {
    cnn_tensor *c = cnn_to_device(r, cnn_tensor_device(n->inputs[i]));
    cnn_tensor_release(r);
    r = c;
  }
  return r;
}

typedef struct {
  cnn_node **items;
  int len, cap;
} node_list;

typedef struct {
  cnn_tensor *leaf; /* borrowed (kept alive by the nodes' inputs) */
  cnn_tensor *grad; /* owned sum of the contributions */
} leaf_grad;

typedef struct {
  node_list all, ready;
  leaf_grad *leaves;
  int nleaves, cap_leaves;
} pass;

static int visit_epoch; /* marks the nodes seen by the current pass */

static int push(node_list *l, cnn_node *n) {
  if (l->len == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    cnn_node **p = realloc(l->items, cap * sizeof *p);
    if (!p) return cnn_set_error("backward: out of memory"), -1;
    l->items = p, l->cap = cap;
  }
  l->items[l->len++] = n;
  return 0;
}

/* Add `g` (a reference we own) into *acc. */
static int accumulate(cnn_tensor **acc, cnn_tensor *g) {
  if (!*acc) return *acc = g, 0;
  cnn_tensor *sum = cnn_binary(CNN_OP_ADD, *acc, g);
  cnn_tensor_release(g);
  if (!sum) return -1;
  cnn_tensor_release(*acc);
  *acc = sum;
  return 0;
}

/* Discover every node reachable from root; count consumers per node. */
static int collect(pass *p, cnn_node *root, int epoch) {
  node_list stack = {0};
  root->visit_mark = epoch, root->pending = 0;
  if (push(&stack, root) || push(&p->all, root)) return free(stack.items), -1;
  cnn_node_retain(root); /* p->all holds a reference: freeing inputs may drop the last other one */
  while (stack.len) {
    cnn_node *n = stack.items[--stack.len];
    if (n->released) {
      free(stack.items);
      cnn_set_error("backward: trying to backward through the graph a second time (%s); "
                    "pass {retain_graph = true} to the first backward",
                    n->name);
      return -1;
    }
    for (int i = 0; i < n->ninputs; i++) {
      cnn_node *m = n->inputs[i] ? n->inputs[i]->grad_fn : NULL;
      if (!m) continue;
      if (m->visit_mark != epoch) {
        m->visit_mark = epoch, m->pending = 0;
        if (push(&stack, m) || push(&p->all, m)) return free(stack.items), -1;
        cnn_node_retain(m);
      }
      m->pending++;
    }
  }
  free(stack.items);
  return 0;
}

static int add_leaf_grad(pass *p, cnn_tensor *leaf, cnn_tensor *g) {
  for (int i = 0; i < p->nleaves; i++)
    if (p->leaves[i].leaf == leaf) return accumulate(&p->leaves[i].grad, g);
  if (p->nleaves == p->cap_leaves) {
    int cap = p->cap_leaves ? 2 * p->cap_leaves : 32;
    leaf_grad *l = realloc(p->leaves, cap * sizeof *l);
    if (!l) return cnn_tensor_release(g), cnn_set_error("backward: out of memory"), -1;
    p->leaves = l, p->cap_leaves = cap;
  }
  p->leaves[p->nleaves++] = (leaf_grad){leaf, g};
  return 0;
}

/* autograd.h: g may be overwritten or adopted (refcounts, layout, like's dtype/shape/device) */
bool cnn_grad_is_private(const cnn_tensor *g, const cnn_tensor *like) {
  return g->refcount == 1 && g->storage->refcount == 1 && g->offset == 0 && !g->grad_fn &&
         !g->requires_grad && g->dtype == like->dtype && cnn_same_shape(like, g) &&
         (cnn_prefers_channels_last(like) ? cnn_tensor_is_channels_last(g)
                                          : cnn_tensor_is_contiguous(g)) &&
         cnn_device_equal(cnn_tensor_device(g), cnn_tensor_device(like));
}

/* Store a total gradient into t->grad: a private contiguous tensor the
 * first time, an in-place sum afterwards.  When the caller is about to drop
 * g and holds its only reference (and g's storage has no other user), g
 * itself becomes .grad -- no copy; otherwise it is copied, so .grad never
 * shares memory with anything a user or another node can still write. */
static int store_grad(cnn_tensor *t, cnn_tensor *g, bool dropping_g) {
  if (!t->grad && dropping_g && cnn_grad_is_private(g, t)) {
    cnn_tensor_retain(g);
    t->grad = g;
    return 0;
  }
  if (!t->grad) {
    t->grad = cnn_empty_like_layout(t, t->dtype); /* channels-last if t prefers it */
    if (!t->grad) return -1;
    return cnn_copy_raw(t->grad, g);
  }
  return cnn_binary_(CNN_OP_ADD, t->grad, g);
}

static int unrecorded(const cnn_tensor *t) {
  cnn_set_error("backward: the graph was not recorded at %s (out of memory when the op ran)",
                t->unrecorded_op);
  return -1;
}

/* Route the gradient of input i of node n. Takes over g. */
static int route(pass *p, cnn_node *n, int i, cnn_tensor *g) {
  cnn_tensor *in = n->inputs[i];
  cnn_node *m = in->grad_fn;
  if (!m && in->unrecorded_op) return cnn_tensor_release(g), unrecorded(in);
  if (!m) return add_leaf_grad(p, in, g);
  if (accumulate(&m->grad_accum, g)) return -1;
  if (--m->pending == 0) return push(&p->ready, m);
  return 0;
}

static int run_node(pass *p, cnn_node *n) {
  cnn_tensor *g = n->grad_accum, *gin[CNN_NODE_MAX_INPUTS] = {NULL};
  n->grad_accum = NULL;
  if (!g) return 0; /* no gradient arrived: nothing flows further */
  int rc = cnn_autograd_run_hooks(n->hooks, &g);
  if (rc == 0 && n->retain_output_grad && n->output) rc = store_grad(n->output, g, false);
  if (rc == 0) rc = n->backward(n, g, gin);
  cnn_tensor_release(g);
  for (int i = 0; i < n->ninputs; i++) {
    if (!gin[i]) continue;
    if (rc == 0 && n->needs[i] && n->inputs[i])
      rc = route(p, n, i, gin[i]);
    else
      cnn_tensor_release(gin[i]);
  }
  return rc;
}

static int finish_leaves(pass *p) {
  int rc = 0;
  for (int i = 0; i < p->nleaves; i++) {
    cnn_tensor *g = p->leaves[i].grad;
    p->leaves[i].grad = NULL;
    if (rc == 0) rc = cnn_autograd_run_hooks(p->leaves[i].leaf->hooks, &g);
    if (rc == 0) rc = store_grad(p->leaves[i].leaf, g, true);
    cnn_tensor_release(g);
  }
  return rc;
}

static cnn_tensor *initial_grad(cnn_tensor *root, cnn_tensor *grad) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (!grad) {
    if (cnn_tensor_numel(root) != 1) {
      cnn_set_error("backward: the output has shape %s; a gradient can be created implicitly only "
                    "for one-element outputs (pass one to backward)",
                    cnn_tensor_shape_str(root, a));
      return NULL;
    }
    return cnn_full(root->ndim, root->shape, 1.0, root->dtype, cnn_tensor_device(root));
  }
  if (!cnn_same_shape(root, grad)) {
    cnn_set_error("backward: gradient of shape %s does not match the output's shape %s",
                  cnn_tensor_shape_str(grad, a), cnn_tensor_shape_str(root, b));
    return NULL;
  }
  return cnn_to_dtype(grad, root->dtype);
}

static void end_pass(pass *p, bool retain_graph) {
  for (int i = 0; i < p->all.len; i++) {
    cnn_node *n = p->all.items[i];
    cnn_tensor_release(n->grad_accum);
    n->grad_accum = NULL;
  }
  for (int i = 0; !retain_graph && i < p->all.len; i++) {
    cnn_node *n = p->all.items[i];
    for (int k = 0; k < CNN_NODE_MAX_INPUTS; k++)
      cnn_tensor_release(n->inputs[k]), n->inputs[k] = NULL;
    for (int k = 0; k < CNN_NODE_MAX_SAVED; k++)
      cnn_tensor_release(n->saved[k]), n->saved[k] = NULL;
    n->released = true;
  }
  for (int i = 0; i < p->nleaves; i++) cnn_tensor_release(p->leaves[i].grad);
  for (int i = 0; i < p->all.len; i++) cnn_node_release(p->all.items[i]);
  free(p->all.items), free(p->ready.items), free(p->leaves);
}

int cnn_backward(cnn_tensor *root, cnn_tensor *grad, bool retain_graph) {
  if (root->unrecorded_op) return unrecorded(root);
  if (!root->requires_grad) {
    cnn_set_error("backward: the tensor does not require grad and has no grad_fn");
    return -1;
  }
  bool was = cnn_set_grad_enabled(false);
  cnn_dtype autocast_was = cnn_autocast_dtype(); /* backward ops run in the forward's dtypes */
  cnn_set_autocast(CNN_FLOAT32, NULL);
  cnn_tensor *g = initial_grad(root, grad);
  int rc = g ? 0 : -1;
  pass p = {0};
  if (rc == 0 && !root->grad_fn) { /* backward on a leaf */
    rc = cnn_autograd_run_hooks(root->hooks, &g);
    if (rc == 0) rc = store_grad(root, g, true);
    cnn_tensor_release(g);
  } else if (rc == 0) {
    cnn_node *top = root->grad_fn;
    rc = collect(&p, top, ++visit_epoch);
    if (rc == 0)
      top->grad_accum = g, rc = push(&p.ready, top);
    else
      cnn_tensor_release(g);
    while (rc == 0 && p.ready.len) rc = run_node(&p, p.ready.items[--p.ready.len]);
    if (rc == 0) rc = finish_leaves(&p);
    end_pass(&p, retain_graph);
  }
  cnn_set_grad_enabled(was);
  cnn_set_autocast(autocast_was, NULL);
  return rc;
}
