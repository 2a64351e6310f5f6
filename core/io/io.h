/*
 * io.h -- the public header of core/io: dataset readers (IDX, CIFAR-10),
 * checkpoints (safetensors), PNG images and the background batcher of
 * data.DataLoader.
 *
 * Every reader comes as a pair: `*_parse` works on bytes already in memory
 * (what the fuzzers drive) and `*_load` reads a file and calls it.  Parsers
 * treat their input as hostile: every header field is checked against the
 * buffer's length, with overflow-checked arithmetic, before anything is
 * allocated, and nothing is ever read outside [buf, buf+len).  On failure
 * they return NULL / -1 with cnn_error() naming the format, the file
 * (`what`) and the entry at fault; nothing is leaked.
 *
 * Writers (safetensors, PNG) are atomic: they write "<path>.tmp.XXXXXX" in
 * the target's folder, flush and fsync it, rename it over the target and
 * fsync the folder.  On any failure the temporary file is removed and the
 * target is untouched, so a crash mid-save leaves the previous file intact.
 *
 * Labels come out 0-based as stored in the files; the Lua layer (through
 * the batcher's label_offset) makes them 1-based.
 */
#ifndef CNN_IO_H
#define CNN_IO_H

#include "cnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX (MNIST, Fashion-MNIST) ------------------------------------------ */

/* Type byte -> dtype: 0x08 uint8, 0x0D float32, 0x0E float64; the signed
 * integer types 0x09 (i8), 0x0B (i16), 0x0C (i32) widen to int64.  Data is
 * big-endian in the file and native in the tensor. */
cnn_tensor *cnn_idx_parse(const uint8_t *buf, size_t len, const char *what);
cnn_tensor *cnn_idx_load(const char *path); /* gzipped or plain */

/* ---- CIFAR-10 binary batches ----------------------------------------------- */

/* Records of 1 label byte (0..9) + 3072 pixel bytes (R, G, B planes of
 * 32x32).  images: N x 3 x 32 x 32 uint8; labels: int64 N, 0-based.
 * Returns 0, or -1 with the outputs untouched. */
int cnn_cifar10_parse(const uint8_t *buf, size_t len, const char *what,
                      cnn_tensor **images, cnn_tensor **labels);
int cnn_cifar10_load(const char *path, cnn_tensor **images, cnn_tensor **labels);

/* ---- safetensors -------------------------------------------------------------- */

typedef struct {
  char *name;
  cnn_tensor *tensor; /* owned reference, CPU, contiguous */
} cnn_named_tensor;

typedef struct {
  char *key;
  char *value;
} cnn_meta_entry;

typedef struct {
  int ntensors;
  cnn_named_tensor *tensors; /* in header order */
  int nmeta;
  cnn_meta_entry *meta;      /* __metadata__ (string -> string), in header order */
} cnn_tensor_file;

/* Names must be unique, non-empty and not "__metadata__"; tensors may have
 * any layout and live on any device (they are copied to the host).  The
 * header is padded with spaces to a multiple of 8 bytes, data are written
 * in argument order.  Atomic (see above).  0 or -1. */
int cnn_safetensors_save(const char *path, int n, const char *const *names,
                         cnn_tensor *const *tensors, int nmeta,
                         const char *const *keys, const char *const *values);
/* Dtypes: F32, F64, I64, U8, F16, BF16 (also BOOL -> uint8 and I32 -> int64). */
cnn_tensor_file *cnn_safetensors_parse(const uint8_t *buf, size_t len, const char *what);
cnn_tensor_file *cnn_safetensors_load(const char *path);
void cnn_tensor_file_free(cnn_tensor_file *f); /* NULL ok */
/* the metadata value for `key`, or NULL (borrowed) */
const char *cnn_tensor_file_meta(const cnn_tensor_file *f, const char *key);

/* ---- PNG --------------------------------------------------------------------------- */

/* 8-bit gray (1), RGB (3) or RGBA (4), pixels row-major h x w x channels.
 * Atomic.  0 or -1. */
int cnn_png_write(const char *path, int64_t h, int64_t w, int channels, const uint8_t *pixels);
/* malloc'd h x w x channels (8-bit gray, RGB or RGBA as stored); NULL on error */
uint8_t *cnn_png_read(const char *path, int64_t *h, int64_t *w, int *channels);

/* ---- decoding PNG and JPEG (image.c) ------------------------------------------------ */

/* Decoded images are 8-bit, interleaved h x w x channels; the mode picks the
 * channels (image.c has the conversion table): UNCHANGED keeps the file's
 * (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA), GRAY gives 1, RGB 3, RGBA 4.
 * 16-bit PNG is scaled to 8 bits with rounding; palettes are expanded. */
typedef enum { CNN_IMAGE_UNCHANGED, CNN_IMAGE_GRAY, CNN_IMAGE_RGB, CNN_IMAGE_RGBA } cnn_image_mode;
typedef enum { CNN_IMAGE_UNKNOWN, CNN_IMAGE_PNG, CNN_IMAGE_JPEG } cnn_image_format;

typedef struct {
  int64_t h, w;
  int channels;
  uint8_t *px; /* malloc'd h*w*channels bytes, owned (cnn_image_free) */
} cnn_image;

/* Largest decoded image accepted (bytes), checked before allocating. */
#define CNN_IMAGE_MAX_BYTES ((uint64_t)1 << 28)

cnn_image_format cnn_image_sniff(const uint8_t *buf, size_t len);
/* 0 with *out filled, or -1 with cnn_error() "png: <what>: <reason>" (or
 * "jpeg: ...", "image: ... not a PNG or JPEG file") and *out zeroed.
 * Thread-safe: the loader's workers call it. */
int cnn_image_decode(const uint8_t *buf, size_t len, const char *what, cnn_image_mode mode, cnn_image *out);
int cnn_image_load(const char *path, cnn_image_mode mode, cnn_image *out);
void cnn_image_free(cnn_image *img); /* NULL ok, idempotent */
/* A new uint8 C x H x W tensor of the image (calling thread: allocates). */
cnn_tensor *cnn_image_to_tensor(const cnn_image *img);

/* ---- background batch assembly (data.DataLoader) -------------------------------- */

/* Per-sample transforms, applied in this order: random crop (zero padding
 * of `crop_pad` pixels, then a window of the original size at a random
 * offset), random horizontal flip, then value = raw * scale (uint8 only;
 * scale 0 means 1) and, if normalize, (value - mean[c]) / std[c].  Padded
 * pixels are raw zeros, so they normalise like black pixels (torchvision's
 * RandomCrop before ToTensor/Normalize).  A zeroed struct is the identity
 * (uint8 still becomes float32). */
typedef struct {
  double scale;      /* multiply uint8 by this (1/255); 0 means 1 */
  int normalize;
  int nchan;         /* 1 (same for all channels) or the images' channel count (<= 4) */
  double mean[4], std[4];
  int crop_pad;      /* random crop with this zero padding (0: off) */
  int hflip;         /* random horizontal flip with p = 0.5 */
} cnn_transform;

typedef struct cnn_batcher cnn_batcher;

/* images: N x ... on the CPU; a sample is images[i] (the last two dims are
 * H x W for crop and flip; a 4-D N x C x H x W has C channels, a 3-D
 * N x H x W one).  uint8 becomes float32 through the transform; float32,
 * float64 and int64 keep their dtype (int64: no scale, no normalize).
 * labels: N x ... of any dtype or NULL; label_offset is added to int64
 * labels (the Lua side passes 1).  order: the sample order (0-based
 * indices into N, copied; repeats allowed).  seed: the transforms'
 * randomness, a function of (seed, position in order) only, so the same
 * seed gives the same batches whatever the threads' timing.
 *
 * The next batch is assembled on a background pthread while the caller
 * consumes the current one.  Output tensors are allocated on the calling
 * thread (the allocator's hooks may call into Lua); the worker only fills
 * them.  images and labels are retained (images made contiguous). */
cnn_batcher *cnn_batcher_new(cnn_tensor *images, cnn_tensor *labels, const int64_t *order,
                             int64_t norder, int64_t batch_size, bool drop_last,
                             const cnn_transform *tf, int64_t label_offset, uint64_t seed);
/* 1: *x and *y (NULL without labels) are new references; 0: epoch done;
 * -1: error (cnn_error()). */
int cnn_batcher_next(cnn_batcher *b, cnn_tensor **x, cnn_tensor **y);
int64_t cnn_batcher_len(const cnn_batcher *b); /* number of batches in the epoch */
/* Page-locked batches (DataLoader{pin_memory = true}); call before the first
 * cnn_batcher_next.  -1 with "pin_memory: cuda is not available: ..." without CUDA. */
int cnn_batcher_set_pin_memory(cnn_batcher *b, bool on);
void cnn_batcher_free(cnn_batcher *b);         /* stops and joins the thread; NULL ok */

#ifdef __cplusplus
}
#endif
#endif /* CNN_IO_H */
