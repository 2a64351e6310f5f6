/*
 * fake_cuda_half.c -- elements of every dtype for the fake device:
 * float16 and bfloat16 conversions (written here, independently of core's
 * copy.c, round to nearest even) and load/store of one element as double.
 *
 * float16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals below
 * 2^-14 in steps of 2^-24; values >= 65520 round to infinity.  bfloat16:
 * the top 16 bits of a float32, rounded to nearest even, NaN kept quiet.
 * A double becomes half precision through float, as a kernel that computes
 * in float and stores with __float2half does.
 */
#include <math.h>
#include <string.h>

#include "fake_cuda.h"

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t fake_float_to_half(float f) {
  uint32_t x = bits_of(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return (uint16_t)(sign | 0x7e00);  /* NaN */
  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* >= 65520: inf */
  if (ax < 0x38800000) /* below 2^-14: a multiple of 2^-24, rint rounds half to even */
    return (uint16_t)(sign | (uint32_t)rintf(float_of(ax) * 16777216.0f));
  uint32_t e = (ax >> 23) - 127 + 15, mant = ax & 0x7fffff;
  uint32_t h = (e << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry moves into the exponent */
  return (uint16_t)(sign | h);
}

float fake_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0) {
    float v = ldexpf((float)m, -24);
    return sign ? -v : v;
  }
  if (e == 31) return float_of(sign | 0x7f800000 | (m << 13));
  return float_of(sign | ((e - 15 + 127) << 23) | (m << 13));
}

uint16_t fake_float_to_bf16(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

float fake_bf16_to_float(uint16_t h) { return float_of((uint32_t)h << 16); }

bool fake_is_half(cnn_dtype dt) { return dt == CNN_FLOAT16 || dt == CNN_BFLOAT16; }

double fake_load(cnn_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case CNN_FLOAT32: return ((const float *)p)[i];
  case CNN_FLOAT64: return ((const double *)p)[i];
  case CNN_INT64: return (double)((const int64_t *)p)[i];
  case CNN_UINT8: return ((const uint8_t *)p)[i];
  case CNN_FLOAT16: return fake_half_to_float(((const uint16_t *)p)[i]);
  case CNN_BFLOAT16: return fake_bf16_to_float(((const uint16_t *)p)[i]);
  default: return 0;
  }
}

/* double -> int64 without undefined behaviour (NaN 0, saturating) */
static int64_t to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

void fake_store(cnn_dtype dt, void *p, int64_t i, double v) {
  switch (dt) {
  case CNN_FLOAT32: ((float *)p)[i] = (float)v; break;
  case CNN_FLOAT64: ((double *)p)[i] = v; break;
  case CNN_INT64: ((int64_t *)p)[i] = to_i64(v); break;
  case CNN_UINT8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)to_i64(v); break; /* modulo 256 */
  case CNN_FLOAT16: ((uint16_t *)p)[i] = fake_float_to_half((float)v); break;
  case CNN_BFLOAT16: ((uint16_t *)p)[i] = fake_float_to_bf16((float)v); break;
  default: break;
  }
}

int fake_float_dt(const char *op, cnn_dtype dt, bool half_ok) {
  if (dt == CNN_FLOAT32 || dt == CNN_FLOAT64 || (half_ok && fake_is_half(dt))) return 0;
  fake_core.set_error("%s: %s is not supported on cuda", op, fake_core.dtype_name(dt));
  return -1;
}
