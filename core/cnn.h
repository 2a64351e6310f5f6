/*
 * cnn.h -- the one public header of core/: tensors, autograd, ops.
 *
 * core/ is plain C11 and knows nothing of Lua.  Every function that can
 * fail on a user's input validates *before* it allocates, returns NULL (or
 * a negative status) and leaves a message in a per-thread buffer that
 * cnn_error() returns; the Lua bindings raise it.  abort()/assert() guard
 * internal invariants only.
 *
 * Ownership: tensors and storages are reference counted.  A function that
 * returns a cnn_tensor* hands the caller one new reference; the caller
 * releases it with cnn_tensor_release().  Arguments are borrowed.
 *
 * Dimensions are 0-based here; the Lua bindings translate from Lua's
 * 1-based, negative-from-the-end convention.
 */
#ifndef CNN_H
#define CNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CNN_MAX_DIMS 8

/* ---- dtypes and devices ------------------------------------------------ */

typedef enum {
  CNN_FLOAT32 = 0,
  CNN_FLOAT64,
  CNN_INT64,
  CNN_UINT8,
  CNN_FLOAT16,  /* storage type only (GPU autocast) */
  CNN_BFLOAT16, /* storage type only (GPU autocast) */
  CNN_NDTYPES
} cnn_dtype;

/* bytes per element, 0 for an unknown dtype (inline: every op takes the
 * data pointer of its operands through it) */
static inline size_t cnn_dtype_size(cnn_dtype dt) {
  switch (dt) {
  case CNN_FLOAT64:
  case CNN_INT64: return 8;
  case CNN_FLOAT32: return 4;
  case CNN_FLOAT16:
  case CNN_BFLOAT16: return 2;
  case CNN_UINT8: return 1;
  default: return 0;
  }
}
const char *cnn_dtype_name(cnn_dtype dt);                  /* "float32", ... */
int cnn_dtype_from_name(const char *name, cnn_dtype *out); /* 0 ok, -1 unknown */
bool cnn_dtype_is_float(cnn_dtype dt);

typedef enum { CNN_CPU = 0, CNN_CUDA = 1 } cnn_device_type;

typedef struct {
  cnn_device_type type;
  int index; /* GPU ordinal; 0 for the CPU */
} cnn_device;

#define CNN_DEVICE_CPU ((cnn_device){CNN_CPU, 0})
static inline bool cnn_device_equal(cnn_device a, cnn_device b) {
  return a.type == b.type && (a.type == CNN_CPU || a.index == b.index);
}
const char *cnn_device_str(cnn_device d, char buf[32]); /* "cpu", "cuda:0" */

/* ---- errors ------------------------------------------------------------- */

const char *cnn_error(void); /* last message, this thread */
void cnn_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Set a "user interrupted" flag (SIGINT handler); long kernels poll it. */
void cnn_request_interrupt(void);
bool cnn_interrupt_pending(void);
void cnn_clear_interrupt(void);

/* ---- storage and memory accounting -------------------------------------- */

typedef struct cnn_storage {
  int refcount; /* atomic; see storage.c */
  void *data;   /* host or device pointer */
  size_t nbytes;
  cnn_device device;
  bool borrowed;   /* data not owned (never freed by us) */
  bool pinned;     /* CPU storage in page-locked memory (cnn_pin_memory) */
  int64_t version; /* bumped by every in-place write through any view */
} cnn_storage;

cnn_storage *cnn_storage_new(size_t nbytes, cnn_device dev);
void cnn_storage_retain(cnn_storage *s);
void cnn_storage_release(cnn_storage *s);

typedef struct {
  int64_t live;   /* bytes held by live storages, all devices */
  int64_t peak;   /* highest `live` since start or last reset */
  int64_t count;  /* live storages */
  int64_t cached; /* freed CPU blocks kept for reuse (not in live) */
} cnn_memory_stats;

cnn_memory_stats cnn_memory(cnn_device_type dev);
void cnn_memory_reset_peak(void);
/* Gives the CPU's cached free blocks back to the system; the bytes freed. */
size_t cnn_memory_empty_cache(void);

/* Hooks the embedding (the Lua bindings) installs so the garbage collector
 * hears about native memory.  `on_alloc` runs after each allocation on the
 * thread that installed the hooks; `on_oom` runs once when an allocation
 * fails and returns non-zero if it freed something worth a retry. */
typedef struct {
  void (*on_alloc)(size_t nbytes, void *ud);
  int (*on_oom)(size_t nbytes, void *ud);
  void *ud;
} cnn_alloc_hooks;
void cnn_set_alloc_hooks(const cnn_alloc_hooks *hooks);

/* ---- tensors ------------------------------------------------------------ */

struct cnn_node;
struct cnn_hook;

typedef struct cnn_tensor {
  int refcount;         /* atomic */
  cnn_storage *storage; /* owned reference */
  int64_t offset;       /* in elements */
  int ndim;
  int64_t shape[CNN_MAX_DIMS];
  int64_t stride[CNN_MAX_DIMS]; /* in elements */
  cnn_dtype dtype;
  /* autograd */
  bool requires_grad;        /* leaf flag, or "result of a recorded op" */
  bool retains_grad;         /* non-leaf that keeps .grad */
  struct cnn_tensor *grad;   /* owned reference or NULL */
  struct cnn_node *grad_fn;  /* owned reference; NULL for leaves */
  struct cnn_hook *hooks;    /* gradient hooks, in registration order */
  int64_t version;           /* storage->version when last written through this header */
  const char *unrecorded_op; /* the op whose graph node could not be allocated: backward
                              * through this tensor fails, naming it */
} cnn_tensor;

/* In-place writers call this: autograd refuses a saved tensor whose
 * storage was written after it was saved. */
void cnn_tensor_bump_version(cnn_tensor *t);

/* lifetime */
void cnn_tensor_retain(cnn_tensor *t);
void cnn_tensor_release(cnn_tensor *t);

/* facts */
int64_t cnn_tensor_numel(const cnn_tensor *t);
size_t cnn_tensor_nbytes(const cnn_tensor *t);
bool cnn_tensor_is_contiguous(const cnn_tensor *t);
cnn_device cnn_tensor_device(const cnn_tensor *t);
/* pointer to element 0 (inline, as cnn_dtype_size: once per operand per op) */
static inline void *cnn_tensor_data(const cnn_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)cnn_dtype_size(t->dtype);
}
/* "2x3x4" (or "scalar"); buf of CNN_SHAPE_STR bytes */
#define CNN_SHAPE_STR 128
const char *cnn_shape_str(int ndim, const int64_t *shape, char *buf);
const char *cnn_tensor_shape_str(const cnn_tensor *t, char *buf);
bool cnn_same_shape(const cnn_tensor *a, const cnn_tensor *b);

/* creation (shape arrays are copied) */
cnn_tensor *cnn_empty(int ndim, const int64_t *shape, cnn_dtype dt, cnn_device dev);
cnn_tensor *cnn_zeros(int ndim, const int64_t *shape, cnn_dtype dt, cnn_device dev);
cnn_tensor *cnn_full(int ndim, const int64_t *shape, double value, cnn_dtype dt, cnn_device dev);
cnn_tensor *cnn_scalar(double value, cnn_dtype dt, cnn_device dev); /* 0-d */
cnn_tensor *cnn_from_buffer(int ndim, const int64_t *shape, cnn_dtype dt,
                            const void *src);                                /* CPU copy */
cnn_tensor *cnn_arange(double start, double end, double step, cnn_dtype dt); /* [start, end) */
cnn_tensor *cnn_linspace(double start, double end, int64_t steps, cnn_dtype dt);
cnn_tensor *cnn_eye(int64_t n, int64_t m, cnn_dtype dt);
cnn_tensor *cnn_rand(int ndim, const int64_t *shape, cnn_dtype dt);  /* U[0,1) */
cnn_tensor *cnn_randn(int ndim, const int64_t *shape, cnn_dtype dt); /* N(0,1) */
cnn_tensor *cnn_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                        cnn_dtype dt); /* [low, high] inclusive */
/* element access on any layout/device (slow; for printing and item()) */
double cnn_tensor_get(const cnn_tensor *t, int64_t linear_index); /* row-major index */
int cnn_tensor_set(cnn_tensor *t, int64_t linear_index, double v);
int cnn_tensor_copy_to_host(const cnn_tensor *t, void *dst); /* contiguous dump, t's dtype */

/* ---- random numbers ----------------------------------------------------- */

void cnn_manual_seed(uint64_t seed);
uint64_t cnn_rng_next(void);  /* 64 random bits, main generator */
double cnn_rng_uniform(void); /* [0, 1) */
double cnn_rng_normal(void);  /* N(0, 1) */
/* Generator state for checkpoints: 4 words (xoshiro256**) + a cached normal. */
#define CNN_RNG_STATE_WORDS 6
void cnn_rng_get_state(uint64_t out[CNN_RNG_STATE_WORDS]);
void cnn_rng_set_state(const uint64_t in[CNN_RNG_STATE_WORDS]);

/* ---- views (no copies; results share storage) --------------------------- */

cnn_tensor *cnn_view(cnn_tensor *t, int ndim, const int64_t *shape);    /* one -1 allowed */
cnn_tensor *cnn_reshape(cnn_tensor *t, int ndim, const int64_t *shape); /* view or copy */
cnn_tensor *cnn_transpose(cnn_tensor *t, int d0, int d1);
cnn_tensor *cnn_permute(cnn_tensor *t, const int *dims);
cnn_tensor *cnn_squeeze(cnn_tensor *t, int dim); /* dim < 0: all size-1 dims */
cnn_tensor *cnn_unsqueeze(cnn_tensor *t, int dim);
cnn_tensor *cnn_narrow(cnn_tensor *t, int dim, int64_t start, int64_t length);
cnn_tensor *cnn_select(cnn_tensor *t, int dim, int64_t index);
cnn_tensor *cnn_expand(cnn_tensor *t, int ndim, const int64_t *shape); /* -1 keeps */
cnn_tensor *cnn_flatten(cnn_tensor *t, int start_dim, int end_dim);
cnn_tensor *cnn_contiguous(cnn_tensor *t); /* t itself (retained) if already */
cnn_tensor *cnn_clone(cnn_tensor *t);
cnn_tensor *cnn_detach(cnn_tensor *t); /* shares storage, no graph */
/* Channels-last 4-d tensors (memory_format.c; PyTorch's
 * torch.channels_last): shape N x C x H x W, strides (H*W*C, 1, W*C, C). */
bool cnn_tensor_is_channels_last(const cnn_tensor *t);
/* channels-last and not also contiguous (C = 1 or H = W = 1 are both):
 * the ops that run channels-last natively take this as their cue */
bool cnn_prefers_channels_last(const cnn_tensor *t);
cnn_tensor *cnn_empty_channels_last(const int64_t shape[4], cnn_dtype dt, cnn_device dev);
/* an empty tensor of t's shape and device, dtype dt, in t's layout when
 * t prefers channels-last, else contiguous */
cnn_tensor *cnn_empty_like_layout(const cnn_tensor *t, cnn_dtype dt);
/* t itself (retained) if channels-last, else a channels-last copy
 * (recorded by autograd); an error for other than 4 dims */
cnn_tensor *cnn_contiguous_channels_last(cnn_tensor *t);
/* t contiguous in `layout`'s format: channels-last when layout prefers it */
cnn_tensor *cnn_contiguous_like(cnn_tensor *t, const cnn_tensor *layout);
/* a copy of t in t's layout when t prefers channels-last, else cnn_clone
 * (PyTorch's clone(memory_format = torch.preserve_format) for 4-d tensors) */
cnn_tensor *cnn_clone_like_layout(cnn_tensor *t);
/* t becomes a view of src's storage with src's shape, strides and dtype, in
 * place (torch's set_): every reference to t sees the new data, so moving
 * a model's parameters keeps the optimizer's references valid.  t must be
 * a leaf; one that requires grad only with grad mode off.  t's .grad is
 * dropped when it no longer matches (shape, dtype or device). */
int cnn_tensor_set_(cnn_tensor *t, cnn_tensor *src);
cnn_tensor *cnn_to_dtype(cnn_tensor *t, cnn_dtype dt); /* t retained if same */
cnn_tensor *cnn_to_device(cnn_tensor *t, cnn_device dev);

/* Page-locked (pinned) host memory and asynchronous copies (storage.c,
 * copy.c), as PyTorch's pin_memory / to(non_blocking=True).  A pinned
 * tensor is an ordinary CPU tensor whose storage comes from the CUDA
 * backend's alloc_pinned; it counts as CPU memory.  Pinning needs a usable
 * CUDA backend: without one these return NULL with "pin_memory: <why>".
 * cnn_to_device_async copies a pinned, contiguous CPU tensor to a CUDA
 * device without waiting (ordered before every later op on the device);
 * anything else takes cnn_to_device's synchronous path.  Writing into the
 * source before the copy has run is the caller's race, as in PyTorch;
 * freeing it is safe (the backend keeps the block until the copy is done). */
cnn_tensor *cnn_empty_pinned(int ndim, const int64_t *shape, cnn_dtype dt);
cnn_tensor *cnn_pin_memory(cnn_tensor *t); /* pinned contiguous copy; t retained if pinned */
bool cnn_is_pinned(const cnn_tensor *t);
cnn_tensor *cnn_to_device_async(cnn_tensor *t, cnn_device dev);

/* ---- elementwise ---------------------------------------------------------- */

typedef enum {
  CNN_OP_ADD,
  CNN_OP_SUB,
  CNN_OP_MUL,
  CNN_OP_DIV,
  CNN_OP_POW,
  CNN_OP_MAXIMUM,
  CNN_OP_MINIMUM,
  CNN_OP_ADD_RELU, /* relu(a + b) in one pass: a residual block's end (cnn.fused.add_relu) */
  CNN_OP_EQ,
  CNN_OP_NE,
  CNN_OP_LT,
  CNN_OP_LE,
  CNN_OP_GT,
  CNN_OP_GE,
  CNN_NBINARY
} cnn_binary_op;

typedef enum {
  CNN_OP_NEG,
  CNN_OP_ABS,
  CNN_OP_EXP,
  CNN_OP_LOG,
  CNN_OP_SQRT,
  CNN_OP_RSQRT,
  CNN_OP_TANH,
  CNN_OP_SIGMOID,
  CNN_OP_RELU,
  CNN_OP_SIN,
  CNN_OP_COS,
  CNN_OP_SIGN,
  CNN_OP_FLOOR,
  CNN_OP_CEIL,
  CNN_OP_ROUND,
  CNN_OP_RECIPROCAL,
  CNN_OP_SQUARE,
  CNN_OP_GELU,
  CNN_OP_LOG1P,
  CNN_OP_EXPM1,
  /* parameterised: p0 (and p1) */
  CNN_OP_LEAKY_RELU, /* slope p0 */
  CNN_OP_ELU,        /* alpha p0 */
  CNN_OP_CLAMP,      /* [p0, p1]; NaN bound = open */
  CNN_OP_POW_SCALAR, /* x ^ p0 */
  CNN_OP_ADD_SCALAR, /* x + p0 */
  CNN_OP_MUL_SCALAR, /* x * p0 */
  /* activations beyond relu/sigmoid/tanh */
  CNN_OP_HARDTANH,    /* clamp to [p0, p1]; derivative 0 at the bounds (ReLU6: [0, 6]) */
  CNN_OP_SILU,        /* x * sigmoid(x) */
  CNN_OP_HARDSWISH,   /* x * relu6(x + 3) / 6 */
  CNN_OP_HARDSIGMOID, /* relu6(x + 3) / 6 */
  CNN_OP_MISH,        /* x * tanh(softplus(x)) */
  CNN_OP_GELU_TANH,   /* gelu's tanh approximation */
  CNN_OP_SOFTPLUS,    /* log(1 + e^(p0 x)) / p0, x where p0 x > p1 (beta, threshold) */
  CNN_NUNARY
} cnn_unary_op;

/* ---- one table per elementwise family (core/ops/elementwise_table.c) ------
 * Indexed by the enums above with designated initializers, so reordering an
 * enum cannot mislabel an op.  The per-element math itself is a case of
 * elementwise_ops.h's switches (host and device, the op a compile-time
 * constant in the CPU loops), not a function pointer: an indirect call per
 * element would cost the vectorised loops, and CUDA kernels cannot call
 * host function pointers. */
typedef enum {
  CNN_SAVES_NOTHING, /* the derivative is a constant */
  CNN_SAVES_INPUT,   /* unary: x; binary: a and b */
  CNN_SAVES_OUTPUT,  /* the output y (exp, tanh, ...; binary: add_relu) */
  CNN_SAVES_ALL      /* binary: a, b and the output (div, pow) */
} cnn_ew_saves;
typedef enum {
  CNN_INTS_TO_FLOAT,      /* integer inputs give float32 */
  CNN_INTS_KEEP,          /* integer inputs keep their dtype */
  CNN_INTS_KEEP_INTEGRAL, /* ... when p0 is an integral value (x + 2, x * 3) */
  CNN_INTS_KEEP_POWER     /* ... when p0 is an integral power in [0, 64) */
} cnn_ew_ints;
enum { CNN_LUA_METHOD = 1, CNN_LUA_INPLACE = 2, CNN_LUA_FUNCTIONAL = 4 };
typedef struct {
  const char *name;      /* "exp": errors, and the Lua method / F.* name */
  const char *grad_name; /* autograd node ("ExpBackward"); NULL: none */
  cnn_ew_saves saves;    /* what the backward node saves */
  cnn_ew_ints ints;      /* integer inputs */
  int lua;               /* CNN_LUA_*: registered by looping over the table
                          * (ops with parameters have their own bindings) */
} cnn_unary_info;
typedef struct {
  const char *name;      /* "add" */
  const char *grad_name; /* NULL for comparisons (uint8 masks) */
  cnn_ew_saves saves;
  int lua; /* CNN_LUA_METHOD, CNN_LUA_INPLACE */
} cnn_binary_info;
extern const cnn_unary_info cnn_unary_ops[CNN_NUNARY];
extern const cnn_binary_info cnn_binary_ops[CNN_NBINARY];

const char *cnn_binary_name(cnn_binary_op op);
const char *cnn_unary_name(cnn_unary_op op);

/* Broadcasting binary op; comparisons give uint8 masks. Mixed dtypes promote
 * (uint8 < int64 < float32 < float64). */
cnn_tensor *cnn_binary(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b);
/* a = a op b in place (b broadcast to a's shape; result cast to a's dtype) */
int cnn_binary_(cnn_binary_op op, cnn_tensor *a, cnn_tensor *b);
cnn_tensor *cnn_unary(cnn_unary_op op, cnn_tensor *x, double p0, double p1);
int cnn_unary_(cnn_unary_op op, cnn_tensor *x, double p0, double p1);
cnn_tensor *cnn_where(cnn_tensor *cond, cnn_tensor *a, cnn_tensor *b);
int cnn_fill_(cnn_tensor *t, double v);
int cnn_copy_(cnn_tensor *dst, cnn_tensor *src); /* broadcast + cast */
/* broadcast shape of a and b; -1 with an error naming `op` if impossible */
int cnn_broadcast_shape(const char *op, const cnn_tensor *a, const cnn_tensor *b, int *ndim,
                        int64_t *shape);

/* ---- reductions ----------------------------------------------------------- */

typedef enum {
  CNN_RED_SUM,
  CNN_RED_MEAN,
  CNN_RED_MAX,
  CNN_RED_MIN,
  CNN_RED_PROD,
  CNN_RED_VAR,
  CNN_RED_STD,
  CNN_RED_NORM,
  CNN_RED_ARGMAX,
  CNN_RED_ARGMIN,
  CNN_NREDUCE
} cnn_reduce_op;

/* Reduce over `dims` (a bitmask of dimensions; 0 means all).  For VAR/STD
 * `p` is the correction (1 = unbiased); for NORM `p` is the order.
 * ARGMAX/ARGMIN give int64 0-based indices and require exactly one dim or
 * all (flattened).  MAX/MIN over one dim may also return indices. */
cnn_tensor *cnn_reduce(cnn_reduce_op op, cnn_tensor *x, uint32_t dims, bool keepdim, double p);
int cnn_max_dim(cnn_tensor *x, int dim, bool keepdim, bool is_min, cnn_tensor **values,
                cnn_tensor **indices);
/* sum `x` down to `shape` (undo a broadcast) */
cnn_tensor *cnn_sum_to(cnn_tensor *x, int ndim, const int64_t *shape);

/* ---- linear algebra --------------------------------------------------------- */

cnn_tensor *cnn_matmul(cnn_tensor *a, cnn_tensor *b); /* 1-D/2-D/batched, broadcast batch */
cnn_tensor *cnn_mm(cnn_tensor *a, cnn_tensor *b);     /* strictly 2-D */
cnn_tensor *cnn_bmm(cnn_tensor *a, cnn_tensor *b);    /* strictly 3-D */

/* ---- indexing and joining ------------------------------------------------- */

cnn_tensor *cnn_cat(int n, cnn_tensor *const *ts, int dim);
cnn_tensor *cnn_stack(int n, cnn_tensor *const *ts, int dim);
/* index_select along dim with int64 0-based indices */
cnn_tensor *cnn_index_select(cnn_tensor *x, int dim, cnn_tensor *index);
/* gather along dim (int64 0-based index of the same rank) */
cnn_tensor *cnn_gather(cnn_tensor *x, int dim, cnn_tensor *index);
/* constant pad of the last dims: pads = {left, right, top, bottom, ...} as in PyTorch */
cnn_tensor *cnn_pad(cnn_tensor *x, int npads, const int64_t *pads, double value);
/* PyTorch's non-constant pad modes of the last 1-3 dims (ops/pad_modes.c) */
typedef enum { CNN_PAD_REFLECT, CNN_PAD_REPLICATE, CNN_PAD_CIRCULAR } cnn_padding_mode;
cnn_tensor *cnn_pad_mode(cnn_tensor *x, int npads, const int64_t *pads, cnn_padding_mode mode);

/* ---- tensor ops: sorting, scans, scatter, rearranging, splitting ------------
 * (core/ops/sort.c, scan.c, scatter.c, logical.c,
 * rearrange.c, split.c).  PyTorch's meaning; dims and indices 0-based. */

/* values (x's dtype) and indices (int64) of x sorted along dim: ascending
 * or descending, NaN larger than every number, equal values in their
 * original order (stable).  float32/float64/int64/uint8. */
int cnn_sort(cnn_tensor *x, int dim, bool descending, cnn_tensor **values, cnn_tensor **indices);
/* the k largest (or smallest) along dim, sorted; 0 <= k <= size */
int cnn_topk(cnn_tensor *x, int64_t k, int dim, bool largest, cnn_tensor **values,
             cnn_tensor **indices);
/* running sum / product along dim; integer inputs give int64 */
cnn_tensor *cnn_cumsum(cnn_tensor *x, int dim);
cnn_tensor *cnn_cumprod(cnn_tensor *x, int dim);
/* uint8 (0/1): any / every entry non-zero over `dims` (bitmask, 0 = all) */
cnn_tensor *cnn_any(cnn_tensor *x, uint32_t dims, bool keepdim);
cnn_tensor *cnn_all(cnn_tensor *x, uint32_t dims, bool keepdim);
/* a copy of x with out[.., index[p], ..] = src[p] (src NULL: `value`) or
 * += src[p] along dim; index int64 of x's rank; src of x's dtype */
cnn_tensor *cnn_scatter(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src, double value);
cnn_tensor *cnn_scatter_add(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src);
int cnn_scatter_(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src, double value);
int cnn_scatter_add_(cnn_tensor *x, int dim, cnn_tensor *index, cnn_tensor *src);
/* int64 labels (0-based) -> int64 labels.shape x num_classes of 0/1;
 * num_classes < 0: the largest label + 1 */
cnn_tensor *cnn_one_hot(cnn_tensor *labels, int64_t num_classes);
/* copies: x reversed along dims; rolled by shifts along dims (ndims 0:
 * the flattened x by shifts[0]); tiled reps[d] times (n >= x's rank) */
cnn_tensor *cnn_flip(cnn_tensor *x, int ndims, const int *dims);
cnn_tensor *cnn_roll(cnn_tensor *x, int nshifts, const int64_t *shifts, int ndims, const int *dims);
cnn_tensor *cnn_repeat(cnn_tensor *x, int n, const int64_t *reps);
/* piece sizes of split(split_size) / chunk(chunks) of a dimension of
 * `size` (written to sizes unless NULL); the count, or -1 + error */
int64_t cnn_split_sizes(int64_t size, int64_t split_size, int64_t *sizes);
int64_t cnn_chunk_sizes(int64_t size, int64_t chunks, int64_t *sizes);
/* out[0..n) = views of x along dim with the given sizes (adding up to the
 * dimension); unbind: out[0..size) = x selected at each index of dim */
int cnn_split(cnn_tensor *x, int dim, int64_t n, const int64_t *sizes, cnn_tensor **out);
int cnn_unbind(cnn_tensor *x, int dim, cnn_tensor **out);

/* ---- autograd ---------------------------------------------------------------- */

/* Recording is on by default; cnn_grad_enabled() false inside no_grad. */
bool cnn_grad_enabled(void);
bool cnn_set_grad_enabled(bool on); /* returns the previous value */

/* Mixed precision (core/autocast.c).  While autocast is on, conv2d and the
 * matrix products (matmul, mm, bmm, linear) over float32 operands run in
 * the autocast dtype with float32 accumulation and return float32: on a
 * CUDA device in float16/bfloat16 tensors (cuDNN, cuBLAS); on the CPU only
 * bfloat16 applies: operands rounded to bfloat16, float32 accumulation,
 * by oneDNN's bfloat16 kernels where the CPU has AVX512-BF16, emulated
 * (float32 kernels on rounded copies) elsewhere.  Every other op stays
 * float32, and gradients reach float32 leaves as float32.  CNN_FLOAT32
 * means off.  cnn_set_autocast returns -1 (error set) for another dtype,
 * or for float16 when CUDA is not available; *previous receives the old
 * mode. */
cnn_dtype cnn_autocast_dtype(void);
int cnn_set_autocast(cnn_dtype dt, cnn_dtype *previous);
/* How bfloat16 autocast computes on this CPU, decided once at run time:
 * "onednn" (oneDNN's bfloat16 kernels) or "emulated"; *detail (may be
 * NULL) receives a sentence naming oneDNN's ISA. */
const char *cnn_autocast_cpu_path(const char **detail);

/* Gradient hook: sees the gradient flowing into `t`; may return a new
 * tensor (a new reference) to replace it, or NULL to keep it.  Returning
 * NULL with cnn_error() set... is not possible; hooks that fail set
 * *failed = 1 and the error, and backward stops. */
typedef cnn_tensor *(*cnn_grad_hook_fn)(cnn_tensor *grad, void *ud, int *failed);
typedef struct cnn_hook {
  cnn_grad_hook_fn fn;
  void *ud;
  void (*free_ud)(void *ud);
  int id;
  struct cnn_hook *next;
} cnn_hook;
int cnn_tensor_add_hook(cnn_tensor *t, cnn_grad_hook_fn fn, void *ud, void (*free_ud)(void *));
int cnn_tensor_remove_hook(cnn_tensor *t, int id); /* 0 removed, -1 not found */

int cnn_set_requires_grad(cnn_tensor *t, bool on); /* leaves only */
int cnn_retain_grad(cnn_tensor *t);
/* t.grad = g (NULL clears): g must have t's shape, dtype and device (else -1,
 * error set naming both); t takes a reference to g and drops its old grad. */
int cnn_tensor_set_grad(cnn_tensor *t, cnn_tensor *g);
/* Backprop from `root`; `grad` may be NULL for a one-element root.  Frees the
 * graph unless retain_graph. */
int cnn_backward(cnn_tensor *root, cnn_tensor *grad, bool retain_graph);
/* "MulBackward", ... or NULL for leaves */
const char *cnn_grad_fn_name(const cnn_tensor *t);
/* Walk the graph: inputs of the node that made t (borrowed; may be NULL
 * for inputs that need no gradient). Returns count. */
int cnn_grad_fn_inputs(const cnn_tensor *t, cnn_tensor ***inputs);

/* ---- neural-network ops (ops/nn_*.c) ------------------------------------------- */

typedef struct {
  int stride[2], pad[4] /* top, bottom, left, right */, dilation[2], groups;
} cnn_conv_params;

typedef enum { CNN_CONV_AUTO = 0, CNN_CONV_ONEDNN, CNN_CONV_IM2COL, CNN_CONV_NAIVE } cnn_conv_algo;
void cnn_set_conv_algo(cnn_conv_algo a);
cnn_conv_algo cnn_get_conv_algo(void);

cnn_tensor *cnn_conv2d(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, const cnn_conv_params *p);
/* act(conv2d(x, w, b)) (net:fuse()), act an activation
 * with its cnn_unary parameters: RELU, LEAKY_RELU (p0 slope), ELU (p0
 * alpha), HARDTANH (p0, p1 the limits; ReLU6 is 0, 6), SIGMOID, TANH,
 * GELU, GELU_TANH, SILU, HARDSWISH, HARDSIGMOID, MISH, SOFTPLUS (p0 beta,
 * p1 threshold).  Where no gradient is recorded, a float32 convolution on a
 * backend with conv2d_act_forward runs the activation inside it (the CPU:
 * oneDNN's eltwise post-ops); otherwise conv2d then the activation (in
 * place without autograd), so the result is differentiable as the two. */
cnn_tensor *cnn_conv2d_act(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, const cnn_conv_params *p,
                           cnn_unary_op act, double p0, double p1);
cnn_tensor *cnn_linear(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b);
/* dropout(relu(linear(x, w, b)), p) as one node (ops/nn_linear_block.c;
 * what nn.Sequential runs for Linear, ReLU[, Dropout]): the bias, relu and
 * the mask one pass over the product, the same mask as cnn_dropout for one
 * seed (p = 0: no dropout, nothing drawn).  Where the backend has no such
 * pass for the operands (CUDA, float16, mixed dtypes, p = 1) it returns
 * NULL with *declined set and nothing changed: run the layers. */
cnn_tensor *cnn_linear_relu_dropout(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, double p,
                                    bool *declined);
/* The training block max_pool2d(relu(batch_norm(conv2d(x, w, b)))) as one
 * node (ops/nn_conv_block.c; what nn.Sequential runs for Conv2d,
 * BatchNorm2d, ReLU, MaxPool2d in training): batch statistics, the running
 * ones (rm, rv; may be NULL) moved by momentum as cnn_batch_norm does, the
 * pool without padding or dilation, floor mode.  gamma, beta, b may be
 * NULL.  Where the backend has no such block for the operands (a dtype
 * other than float32, groups, a forced conv algorithm, float16 autocast,
 * oneDNN without a fast primitive, CUDA) it returns NULL with *declined set
 * and nothing changed: the caller runs the layers one by one.  Under
 * cnn.autocast('bfloat16') the block runs in bfloat16 after the
 * convolution (its output rounded, as PyTorch's autocast leaves it). */
typedef struct {
  cnn_conv_params conv;
  int pool_kernel[2], pool_stride[2];
} cnn_conv_block_params;
cnn_tensor *cnn_conv_bn_relu_pool(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b, cnn_tensor *rm,
                                  cnn_tensor *rv, cnn_tensor *gamma, cnn_tensor *beta,
                                  double momentum, double eps, const cnn_conv_block_params *p,
                                  bool *declined);

/* conv_transpose2d (ops/nn_conv_transpose.c): PyTorch's ConvTranspose2d.
 * w is in x out/groups x kH x kW; Hout = (H-1)*stride - 2*pad +
 * dilation*(kH-1) + output_padding + 1; output_padding < stride or < dilation. */
typedef struct {
  int stride[2], pad[2], output_padding[2], dilation[2], groups;
} cnn_conv_transpose_params;
cnn_tensor *cnn_conv_transpose2d(cnn_tensor *x, cnn_tensor *w, cnn_tensor *b,
                                 const cnn_conv_transpose_params *p);

typedef struct {
  int kernel[2], stride[2], pad[2];
  bool ceil_mode;
  bool count_include_pad; /* avg pool */
  int dilation[2];        /* max pool: spacing of the window's taps, >= 1 (avg pool: ignored) */
} cnn_pool_params;
/* indices (optional out): int64, flat 0-based position within each H*W plane */
cnn_tensor *cnn_max_pool2d(cnn_tensor *x, const cnn_pool_params *p, cnn_tensor **indices);
cnn_tensor *cnn_avg_pool2d(cnn_tensor *x, const cnn_pool_params *p);
cnn_tensor *cnn_adaptive_avg_pool2d(cnn_tensor *x, int64_t out_h, int64_t out_w);

cnn_tensor *cnn_softmax(cnn_tensor *x, int dim);
cnn_tensor *cnn_log_softmax(cnn_tensor *x, int dim);
cnn_tensor *cnn_dropout(cnn_tensor *x, double p, bool training);
/* running_* may be NULL; updated in place in training */
cnn_tensor *cnn_batch_norm(cnn_tensor *x, cnn_tensor *running_mean, cnn_tensor *running_var,
                           cnn_tensor *weight, cnn_tensor *bias, bool training, double momentum,
                           double eps);
/* relu(cnn_batch_norm(...)): one pass each way where the backend has the
 * fused entries (the CPU), else the two ops; same values and gradients */
cnn_tensor *cnn_batch_norm_relu(cnn_tensor *x, cnn_tensor *running_mean, cnn_tensor *running_var,
                                cnn_tensor *weight, cnn_tensor *bias, bool training,
                                double momentum, double eps);
/* relu(cnn_batch_norm(x, ...) + residual), residual of x's shape, dtype and
 * device (a residual block's end): one pass forward where the backend has
 * the fused entry (the CPU), else batch_norm then add_relu; same values
 * and gradients */
cnn_tensor *cnn_batch_norm_add_relu(cnn_tensor *x, cnn_tensor *residual, cnn_tensor *running_mean,
                                    cnn_tensor *running_var, cnn_tensor *weight, cnn_tensor *bias,
                                    bool training, double momentum, double eps);

/* ---- layer / group / instance norm, resizing (ops/nn_row_norm.c,
 * ops/nn_resize.c; PyTorch's semantics) ---- */
/* over the last k dims, which must equal normalized_shape[0..k-1]; weight and
 * bias (optional) have that shape */
cnn_tensor *cnn_layer_norm(cnn_tensor *x, int k, const int64_t *normalized_shape,
                           cnn_tensor *weight, cnn_tensor *bias, double eps);
/* x N x C x *, C divisible by groups; weight, bias (optional) C */
cnn_tensor *cnn_group_norm(cnn_tensor *x, int64_t groups, cnn_tensor *weight, cnn_tensor *bias,
                           double eps);
/* x N x C x * (at least 3 dims); running_* optional (updated in place when
 * use_input_stats), required when !use_input_stats */
cnn_tensor *cnn_instance_norm(cnn_tensor *x, cnn_tensor *running_mean, cnn_tensor *running_var,
                              cnn_tensor *weight, cnn_tensor *bias, bool use_input_stats,
                              double momentum, double eps);
/* F.interpolate on N x C x H x W; scale_h/w the user's scale factors used
 * for the coordinates (0: from the sizes); rules in resize_math.h */
typedef enum { CNN_RESIZE_NEAREST = 0, CNN_RESIZE_BILINEAR = 1 } cnn_resize_mode;
cnn_tensor *cnn_interpolate(cnn_tensor *x, int64_t out_h, int64_t out_w, int mode,
                            bool align_corners, double scale_h, double scale_w);
/* indices (optional out): int64, flat 0-based h*W+w within each plane */
cnn_tensor *cnn_adaptive_max_pool2d(cnn_tensor *x, int64_t out_h, int64_t out_w,
                                    cnn_tensor **indices);
/* N x C*r*r x H x W -> N x C x H*r x W*r, and its inverse (a view, a
 * permute and a copy: differentiable on every device) */
cnn_tensor *cnn_pixel_shuffle(cnn_tensor *x, int64_t r);
cnn_tensor *cnn_pixel_unshuffle(cnn_tensor *x, int64_t r);

typedef enum { CNN_REDUCTION_NONE, CNN_REDUCTION_MEAN, CNN_REDUCTION_SUM } cnn_reduction;
/* target: int64 class indices, 0-based; weight (C) optional; ignore_index < 0 none */
cnn_tensor *cnn_nll_loss(cnn_tensor *logp, cnn_tensor *target, cnn_tensor *weight,
                         cnn_reduction red, int64_t ignore_index);
cnn_tensor *cnn_cross_entropy(cnn_tensor *logits, cnn_tensor *target, cnn_tensor *weight,
                              cnn_reduction red, double label_smoothing, int64_t ignore_index);
cnn_tensor *cnn_mse_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red);
/* pos_weight (weight of the positive term) and weight (rescales each
 * element's loss) are optional and broadcast to x's shape, as PyTorch's */
cnn_tensor *cnn_bce_with_logits(cnn_tensor *x, cnn_tensor *y, cnn_tensor *pos_weight,
                                cnn_tensor *weight, cnn_reduction red);
/* Losses composed of differentiable ops
 * (core/ops/loss_composed.c), PyTorch's definitions and defaults:
 * x and y broadcast; kl_div takes log-probabilities x and, with batchmean
 * (red must be SUM), divides the sum by x's first size; binary_cross_entropy
 * takes probabilities in [0, 1] and a target of x's shape; cross_entropy_probs
 * takes a probability target of x's shape (classes at dim 1, or 0 for 1-D x)
 * and a per-class weight. */
cnn_tensor *cnn_l1_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red);
cnn_tensor *cnn_smooth_l1_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red, double beta);
cnn_tensor *cnn_huber_loss(cnn_tensor *x, cnn_tensor *y, cnn_reduction red, double delta);
cnn_tensor *cnn_kl_div(cnn_tensor *x, cnn_tensor *t, cnn_reduction red, bool batchmean,
                       bool log_target);
cnn_tensor *cnn_binary_cross_entropy(cnn_tensor *x, cnn_tensor *y, cnn_tensor *weight,
                                     cnn_reduction red);
cnn_tensor *cnn_cross_entropy_probs(cnn_tensor *x, cnn_tensor *t, cnn_tensor *weight,
                                    cnn_reduction red, double label_smoothing);

/* ---- fused optimizer updates (ops/optim.c) -------------------------------------
 * In place, never recorded by autograd; torch.optim's formulas (see
 * elementwise_math.h).  State tensors: contiguous, like the parameter;
 * the ones an option does not use may be NULL. */
int cnn_sgd_update(cnn_tensor *p, cnn_tensor *g, cnn_tensor *buf, double lr, double momentum,
                   double dampening, double weight_decay, bool nesterov, bool first_step);
/* vmax non-NULL selects amsgrad; decoupled selects AdamW; step counts from 1 */
int cnn_adam_update(cnn_tensor *p, cnn_tensor *g, cnn_tensor *m, cnn_tensor *v, cnn_tensor *vmax,
                    double lr, double beta1, double beta2, double eps, double weight_decay,
                    bool decoupled, int64_t step);
int cnn_rmsprop_update(cnn_tensor *p, cnn_tensor *g, cnn_tensor *sq, cnn_tensor *ga,
                       cnn_tensor *buf, double lr, double alpha, double eps, double weight_decay,
                       double momentum, bool centered);
/* Adam over `count` parameters in one call: p[i],
 * g[i], m[i], v[i] as in cnn_adam_update, vmax NULL or an array whose
 * entries are all set (amsgrad) and steps[i] >= 1 each parameter's step.
 * Where the parameters share dtype and device and the backend has a
 * many-tensor entry, one pass over all their elements (one parallel
 * region on the CPU); else cnn_adam_update one by one.  Every tensor is
 * validated before any is updated. */
int cnn_adam_update_many(int count, cnn_tensor *const *p, cnn_tensor *const *g,
                         cnn_tensor *const *m, cnn_tensor *const *v, cnn_tensor *const *vmax,
                         const int64_t *steps, double lr, double beta1, double beta2, double eps,
                         double weight_decay, bool decoupled);

/* ---- devices ----------------------------------------------------------------- */

/* NULL when the CUDA backend is usable, else why not ("cnnsh was built
 * without CUDA", "no CUDA driver", "no CUDA device"); loads the module once. */
const char *cnn_cuda_unavailable_reason(void);
/* Lines about the CUDA module (what it was built against, the libraries
 * loaded, the device) -- loads the module; works without a device; NULL
 * when there is no module. */
const char *cnn_cuda_module_info(void);
/* CUDA device management for the bindings (core/backend.c).  Those that
 * return int give 0, or -1 with "<op>: cuda is not available: <why>" or
 * "<op>: device N does not exist (M devices)" set. */
int cnn_cuda_check(const char *op); /* 0 when CUDA can be used */
int cnn_cuda_device_count(void);    /* 0 without CUDA; never fails */
int cnn_cuda_set_device(int device);
int cnn_cuda_synchronize(int device); /* waits for the device's queued work */
typedef struct {
  int64_t cached, reserved; /* the caching allocator: free blocks kept, all from the driver */
  int64_t free, total;      /* the device's memory */
  int64_t waste;            /* bytes lost to the allocator's rounding, if has_waste */
  bool has_waste;
} cnn_cuda_memory_info;
int cnn_cuda_memory(int device, cnn_cuda_memory_info *out);
void cnn_cuda_empty_cache(void);     /* gives cached blocks back; nothing without CUDA */
int cnn_cuda_set_benchmark(bool on); /* cudnn.benchmark: time conv algorithms per shape */

/* ---- threads and timing ---------------------------------------------------- */

void cnn_set_num_threads(int n);
int cnn_get_num_threads(void);
double cnn_now_seconds(void); /* monotonic */
/* Machine peaks, measured (core/cpu/machine_peak.c):
 * the float32 FMA FLOP/s of all threads, and the copy bandwidth in bytes/s
 * (2 x bytes per copy) over arrays of `bytes`; each runs ~`seconds` and
 * keeps its best round.  0, or -1 with an error for out-of-range arguments
 * or no memory. */
int cnn_cpu_fma_peak(double seconds, double *flops);
int cnn_cpu_copy_bandwidth(int64_t bytes, double seconds, double *bytes_per_s);
/* Which BLAS runs matrix products, e.g. "OpenBLAS (SkylakeX kernels)";
 * loads it on first call (core/blas.c). */
const char *cnn_blas_info(void);

/* Timers (core/timer.c): marks recorded on one device, the time between two
 * marks read only when asked.  CPU: a mark reads the monotonic clock.  CUDA:
 * a mark records an event on the device's stream and does not wait; reading
 * waits for the later mark's event only, and cnn_timer_seconds waits once
 * (for the last mark), so marks taken in hooks and read at the end of an
 * iteration cost one synchronization.  Marks are numbered 0, 1, ... until
 * cnn_timer_reset, which frees their events (as does cnn_timer_free).  One
 * thread at a time per timer.  Errors name "timer" (no CUDA, no such
 * device, unknown mark). */
typedef struct cnn_timer cnn_timer;
cnn_timer *cnn_timer_new(cnn_device dev); /* NULL + error */
void cnn_timer_free(cnn_timer *t);        /* NULL is fine */
void cnn_timer_reset(cnn_timer *t);       /* forget every mark */
int cnn_timer_mark(cnn_timer *t);         /* the new mark's number, or -1 */
int cnn_timer_count(const cnn_timer *t);
cnn_device cnn_timer_device(const cnn_timer *t);
/* seconds from mark a to mark b (negative when b came first); 0 or -1 */
int cnn_timer_elapsed(cnn_timer *t, int a, int b, double *seconds);
/* out[i] = seconds from mark 0 to mark i, for every mark (count entries) */
int cnn_timer_seconds(cnn_timer *t, double *out);

/* ---- quantized inference (cnn.quantize; core/ops/nn_conv.c, core/cpu/conv_int8.c) ---- */
/* y = conv2d over int8 operands, float32 out (inference only: nothing is
 * recorded, y never requires grad).  x float32 N x C x H x W on the CPU is quantized per tensor,
 * qx = clamp(round_half_even(x / x_scale), -128, 127); wq (float32, K x
 * C/groups x R x S) holds whole numbers in [-127, 127], one w_scale per
 * output channel (K, float32); the int32 sum acc of qx * wq gives
 * y = acc * (x_scale * w_scale[k]) + b[k] (b K or NULL), then max(y, 0)
 * when relu.  Runs oneDNN's u8 x s8 kernels (core/cpu/conv_int8.c). */
cnn_tensor *cnn_conv2d_int8(cnn_tensor *x, cnn_tensor *wq, cnn_tensor *w_scale, cnn_tensor *b,
                            double x_scale, bool relu, const cnn_conv_params *p);

#ifdef __cplusplus
}
#endif
#endif /* CNN_H */
