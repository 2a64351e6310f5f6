/*
 * autograd.c -- the define-by-run tape: recording nodes and running backward.
 *
 * Recording (cnn_autograd_record) attaches a node to an op's output when
 * grad mode is on and an input requires grad.  cnn_backward() then:
 *   1. walks the graph from the root's node (explicit stack, no recursion)
 *      counting, for each node, how many consumers will send it a gradient;
 *   2. processes nodes when all their gradients have arrived (so hooks and
 *      retain_grad see the total), calling each node's backward rule with
 *      grad mode off;
 *   3. sums gradients bound for leaves per leaf, runs the leaf's hooks on
 *      the sum, and accumulates into leaf->grad (a fresh contiguous tensor
 *      the first time, in place afterwards);
 *   4. frees every node's inputs and saved tensors unless retain_graph.
 * Invariant: a node is in the ready queue at most once per backward pass.
 */
#include "autograd.h"
#include "cnn.h"
#include "tensor_internal.h"

#include <assert.h>
#include <stdlib.h>

static _Thread_local bool grad_disabled;
static int next_hook_id = 1;

bool cnn_grad_enabled(void) { return !grad_disabled; }
bool cnn_set_grad_enabled(bool on) {
  bool previous = !grad_disabled;
  grad_disabled = !on;
  return previous;
}

/* ---- nodes -------------------------------------------------------------------------- */

void cnn_node_retain(cnn_node *n) { n->refcount++; }

static void node_free_graph(cnn_node *n) {
  for (int i = 0; i < CNN_NODE_MAX_INPUTS; i++)
    cnn_tensor_release(n->inputs[i]), n->inputs[i] = NULL;
  for (int i = 0; i < CNN_NODE_MAX_SAVED; i++) cnn_tensor_release(n->saved[i]), n->saved[i] = NULL;
  n->released = true;
}

static void hook_free(cnn_hook *h) {
  if (h->free_ud) h->free_ud(h->ud);
  free(h);
}

void cnn_hook_list_free(cnn_hook *h) {
  while (h) {
    cnn_hook *next = h->next;
    hook_free(h);
    h = next;
  }
}

void cnn_node_release(cnn_node *n) {
  if (!n || --n->refcount > 0) return;
  node_free_graph(n);
  cnn_tensor_release(n->grad_accum);
  cnn_hook_list_free(n->hooks);
  free(n);
}

bool cnn_any_requires_grad(int n, cnn_tensor *const *inputs) {
  if (grad_disabled) return false;
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad) return true;
  return false;
}

cnn_node *cnn_autograd_record(cnn_tensor *out, const char *name, cnn_backward_fn fn, int ninputs,
                              cnn_tensor *const *inputs) {
  if (!out || !cnn_any_requires_grad(ninputs, inputs)) return NULL;
  cnn_node *n = calloc(1, sizeof *n);
  if (!n) { /* out of memory: the result carries the failure to backward */
    cnn_node_release(out->grad_fn);
    out->grad_fn = NULL;
    out->requires_grad = true;
    out->unrecorded_op = name;
    return NULL;
  }
  n->refcount = 1;
  n->name = name;
  n->backward = fn;
  n->ninputs = ninputs;
  for (int i = 0; i < ninputs; i++) {
    cnn_tensor *t = inputs[i];
    if (!t) continue;
    n->needs[i] = t->requires_grad;
    n->in_ndim[i] = t->ndim;
    memcpy(n->in_shape[i], t->shape, sizeof t->shape);
    n->in_dtype[i] = t->dtype;
    if (n->needs[i]) cnn_tensor_retain(t), n->inputs[i] = t;
  }
  if (out->grad_fn) cnn_node_release(out->grad_fn);
  out->grad_fn = n;
  out->requires_grad = true;
  n->output = out;
  return n;
}

void *cnn_node_set_geometry(cnn_node *n, const void *src, size_t size) {
  assert(size <= sizeof n->geometry);
  return memcpy(n->geometry, src, size);
}

void cnn_node_save(cnn_node *n, int slot, cnn_tensor *t) {
  if (!n || !t) return;
  cnn_tensor_release(n->saved[slot]);
  n->saved[slot] = cnn_detach(t);
  n->saved_version[slot] = t->storage->version;
}

cnn_tensor *cnn_node_saved(cnn_node *n, int slot) {
  if (n->released || !n->saved[slot]) {
    cnn_set_error("backward: trying to backward through the graph a second time (%s); "
                  "pass {retain_graph = true} to the first backward",
                  n->name);
    return NULL;
  }
  if (n->saved[slot]->storage->version != n->saved_version[slot]) {
    cnn_set_error("backward: a tensor needed by %s was modified in place after it was saved",
                  n->name);
    return NULL;
  }
  return n->saved[slot];
}

/* ---- hooks ---------------------------------------------------------------------------- */

int cnn_tensor_add_hook(cnn_tensor *t, cnn_grad_hook_fn fn, void *ud, void (*free_ud)(void *)) {
  if (!t->requires_grad) {
    cnn_set_error("register_hook: the tensor does not require grad");
    return -1;
  }
  cnn_hook *h = calloc(1, sizeof *h), **list = t->grad_fn ? &t->grad_fn->hooks : &t->hooks;
  if (!h) return cnn_set_error("register_hook: out of memory"), -1;
  *h = (cnn_hook){fn, ud, free_ud, next_hook_id++, NULL};
  while (*list) list = &(*list)->next;
  *list = h;
  return h->id;
}

static int remove_from(cnn_hook **list, int id) {
  for (; *list; list = &(*list)->next) {
    if ((*list)->id != id) continue;
    cnn_hook *h = *list;
    *list = h->next;
    hook_free(h);
    return 0;
  }
  return -1;
}

int cnn_tensor_remove_hook(cnn_tensor *t, int id) {
  if (remove_from(&t->hooks, id) == 0) return 0;
  return t->grad_fn ? remove_from(&t->grad_fn->hooks, id) : -1;
}

/* Run hooks in order; each may replace the gradient (*g is owned). */
int cnn_autograd_run_hooks(cnn_hook *h, cnn_tensor **g) {
  for (; h; h = h->next) {
    int failed = 0;
    cnn_tensor *r = h->fn(*g, h->ud, &failed);
    if (failed) return -1;
    if (r) cnn_tensor_release(*g), *g = r;
  }
  return 0;
}

int cnn_set_requires_grad(cnn_tensor *t, bool on) {
  if (t->grad_fn && !on) {
    cnn_set_error("requires_grad: only leaf tensors can stop requiring grad; use detach()");
    return -1;
  }
  if (on && !cnn_dtype_is_float(t->dtype)) {
    cnn_set_error("requires_grad: only floating point tensors can require grad (this one is %s)",
                  cnn_dtype_name(t->dtype));
    return -1;
  }
  t->requires_grad = on;
  return 0;
}

int cnn_tensor_set_grad(cnn_tensor *t, cnn_tensor *g) {
  char a[CNN_SHAPE_STR], b[CNN_SHAPE_STR];
  if (g && !cnn_same_shape(g, t))
    return cnn_set_error("grad: assigned gradient %s does not match tensor %s",
                         cnn_tensor_shape_str(g, a), cnn_tensor_shape_str(t, b)),
           -1;
  if (g && g->dtype != t->dtype)
    return cnn_set_error("grad: assigned gradient has dtype %s but the tensor is %s",
                         cnn_dtype_name(g->dtype), cnn_dtype_name(t->dtype)),
           -1;
  if (g && !cnn_device_equal(cnn_tensor_device(g), cnn_tensor_device(t)))
    return cnn_set_error("grad: assigned gradient is on %s but the tensor is on %s",
                         cnn_device_str(cnn_tensor_device(g), a),
                         cnn_device_str(cnn_tensor_device(t), b)),
           -1;
  if (g) cnn_tensor_retain(g);
  cnn_tensor *old = t->grad;
  t->grad = g;
  cnn_tensor_release(old);
  return 0;
}

int cnn_retain_grad(cnn_tensor *t) {
  if (!t->requires_grad) return cnn_set_error("retain_grad: the tensor does not require grad"), -1;
  if (t->grad_fn) t->grad_fn->retain_output_grad = true;
  return 0;
}

const char *cnn_grad_fn_name(const cnn_tensor *t) { return t->grad_fn ? t->grad_fn->name : NULL; }

int cnn_grad_fn_inputs(const cnn_tensor *t, cnn_tensor ***inputs) {
  if (!t->grad_fn) return *inputs = NULL, 0;
  *inputs = t->grad_fn->inputs;
  return t->grad_fn->ninputs;
}
