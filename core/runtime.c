/*
 * runtime.c -- process-wide settings: threads, the monotonic clock, and the
 * convolution algorithm choice.
 *
 * OpenBLAS (OpenMP build), oneDNN and our loops share libgomp's one thread
 * pool, so setting the OpenMP thread count sets it for all of them.
 */
#include "cnn.h"

#include <omp.h>
#include <time.h>

static cnn_conv_algo conv_algo = CNN_CONV_AUTO;

void cnn_set_num_threads(int n) {
  if (n < 1) n = 1;
  omp_set_num_threads(n);
}

int cnn_get_num_threads(void) { return omp_get_max_threads(); }

double cnn_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cnn_set_conv_algo(cnn_conv_algo a) { conv_algo = a; }
cnn_conv_algo cnn_get_conv_algo(void) { return conv_algo; }
