/*
 * rng.c -- the seeded random generator of the CPU and the random creators.
 *
 * One xoshiro256** generator (Blackman & Vigna) for the process, seeded by
 * cnn_manual_seed() through splitmix64; normals by the Box-Muller transform
 * with the second value cached.  Its whole state (4 words + the cached
 * normal) can be saved and restored, so a resumed training run draws the
 * same numbers as an uninterrupted one.  Not thread-safe: only the Lua
 * thread draws from it (the data loader has its own generators).
 */
#include "cnn.h"
#include "tensor_internal.h"

#include <math.h>
#include <string.h>

static uint64_t state[4] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull, 1};
static double cached_normal;
static bool has_cached_normal;

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void cnn_manual_seed(uint64_t seed) {
  for (int i = 0; i < 4; i++) state[i] = splitmix64(&seed);
  has_cached_normal = false;
}

uint64_t cnn_rng_next(void) {
  uint64_t result = rotl(state[1] * 5, 7) * 9, t = state[1] << 17;
  state[2] ^= state[0];
  state[3] ^= state[1];
  state[1] ^= state[2];
  state[0] ^= state[3];
  state[2] ^= t;
  state[3] = rotl(state[3], 45);
  return result;
}

double cnn_rng_uniform(void) { return (double)(cnn_rng_next() >> 11) * 0x1.0p-53; }

double cnn_rng_normal(void) {
  if (has_cached_normal) {
    has_cached_normal = false;
    return cached_normal;
  }
  double u1 = 1.0 - cnn_rng_uniform(), u2 = cnn_rng_uniform(); /* u1 in (0, 1] */
  double r = sqrt(-2.0 * log(u1)), theta = 2.0 * M_PI * u2;
  cached_normal = r * sin(theta);
  has_cached_normal = true;
  return r * cos(theta);
}

void cnn_rng_get_state(uint64_t out[CNN_RNG_STATE_WORDS]) {
  memcpy(out, state, sizeof state);
  memcpy(&out[4], &cached_normal, sizeof cached_normal);
  out[5] = has_cached_normal;
}

void cnn_rng_set_state(const uint64_t in[CNN_RNG_STATE_WORDS]) {
  memcpy(state, in, sizeof state);
  if (!(state[0] | state[1] | state[2] | state[3])) state[3] = 1; /* all-zero is a fixed point */
  memcpy(&cached_normal, &in[4], sizeof cached_normal);
  has_cached_normal = in[5] != 0;
}

/* ---- random tensors (created on the CPU) ------------------------------------------ */

static cnn_tensor *random_float(const char *op, int ndim, const int64_t *shape, cnn_dtype dt,
                                bool normal) {
  if (!cnn_dtype_is_float(dt)) {
    cnn_set_error("%s: dtype %s is not a floating point type", op, cnn_dtype_name(dt));
    return NULL;
  }
  cnn_tensor *t = cnn_empty(ndim, shape, dt, CNN_DEVICE_CPU);
  if (!t) return NULL;
  int64_t n = cnn_tensor_numel(t);
  void *d = t->storage->data;
  for (int64_t i = 0; i < n; i++)
    cnn_store_double(dt, d, i, normal ? cnn_rng_normal() : cnn_rng_uniform());
  return t;
}

cnn_tensor *cnn_rand(int ndim, const int64_t *shape, cnn_dtype dt) {
  return random_float("rand", ndim, shape, dt, false);
}

cnn_tensor *cnn_randn(int ndim, const int64_t *shape, cnn_dtype dt) {
  return random_float("randn", ndim, shape, dt, true);
}

/* Uniform integer in [0, range) without modulo bias (Lemire's method). */
static uint64_t uniform_below(uint64_t range) {
  uint64_t threshold = -range % range, r;
  do r = cnn_rng_next();
  while (r < threshold);
  return r % range;
}

cnn_tensor *cnn_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, cnn_dtype dt) {
  if (high < low) {
    cnn_set_error("randint: high %lld is below low %lld", (long long)high, (long long)low);
    return NULL;
  }
  cnn_tensor *t = cnn_empty(ndim, shape, dt, CNN_DEVICE_CPU);
  if (!t) return NULL;
  uint64_t range = (uint64_t)high - (uint64_t)low + 1; /* 0 means the full 2^64 */
  int64_t n = cnn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = range ? uniform_below(range) : cnn_rng_next();
    cnn_store_double(dt, t->storage->data, i, (double)(int64_t)((uint64_t)low + r));
  }
  return t;
}
