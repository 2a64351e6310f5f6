/*
 * timer.c -- timers that record marks on a device and tell the time between
 * two marks only when asked (DESIGN.md "Timing").
 *
 * Design.  A timer belongs to one device.  On the CPU a mark is a reading
 * of the monotonic clock (cnn_now_seconds).  On a CUDA device a mark is an
 * event recorded on the device's stream through the backend's event_record
 * entry: recording enqueues the event and returns at once, so timing does
 * not serialise the stream; the event takes its timestamp when the device
 * reaches it.  cnn_timer_elapsed() waits for the LATER of its two marks
 * only (the backend's event_elapsed synchronizes on its end event), and
 * cnn_timer_seconds() reads every mark after one wait for the last one, so
 * a profiler that marks inside its hooks and reads at the end of an
 * iteration synchronizes once per iteration, not once per hook.
 *
 * Invariants: marks are numbered 0 .. count-1 in recording order; on CUDA
 * events[i] is a live event for every i < count, owned by the timer and
 * freed by cnn_timer_reset() and cnn_timer_free() (both idempotent); `be`
 * is NULL exactly for CPU timers.  A timer is used by one thread at a time.
 */
#include <stdlib.h>

#include "backend.h"
#include "cnn.h"

struct cnn_timer {
  cnn_device device;
  const cnn_backend *be; /* CUDA backend, NULL on the CPU */
  int count, cap;        /* marks recorded, slots allocated */
  double *secs;          /* CPU: clock reading of each mark */
  void **events;         /* CUDA: event of each mark */
};

static int check_device(cnn_device dev, const cnn_backend **be) {
  char ds[32];
  *be = NULL;
  if (dev.type == CNN_CPU) return 0;
  if (dev.type != CNN_CUDA)
    return cnn_set_error("timer: unknown device type %d", (int)dev.type), -1;
  const cnn_backend *b = cnn_cuda_backend("timer");
  if (!b) return -1;
  if (!b->event_record || !b->event_elapsed || !b->event_free)
    return cnn_backend_unsupported("timer");
  int n = b->device_count ? b->device_count() : 0;
  if (dev.index < 0 || dev.index >= n)
    return cnn_set_error("timer: %s does not exist (%d CUDA device%s)", cnn_device_str(dev, ds), n,
                         n == 1 ? "" : "s"),
           -1;
  *be = b;
  return 0;
}

cnn_timer *cnn_timer_new(cnn_device dev) {
  const cnn_backend *be;
  if (check_device(dev, &be)) return NULL;
  cnn_timer *t = calloc(1, sizeof *t);
  if (!t) return cnn_set_error("timer: out of memory"), NULL;
  t->device = dev;
  t->be = be;
  return t;
}

void cnn_timer_reset(cnn_timer *t) {
  if (!t) return;
  if (t->be)
    for (int i = 0; i < t->count; i++) t->be->event_free(t->events[i]);
  t->count = 0;
}

void cnn_timer_free(cnn_timer *t) {
  if (!t) return;
  cnn_timer_reset(t);
  free(t->secs);
  free(t->events);
  free(t);
}

cnn_device cnn_timer_device(const cnn_timer *t) { return t->device; }

int cnn_timer_count(const cnn_timer *t) { return t->count; }

/* room for one more mark */
static int grow(cnn_timer *t) {
  if (t->count < t->cap) return 0;
  if (t->cap >= (1 << 24))
    return cnn_set_error("timer: more than %d marks (call reset)", t->cap), -1;
  int cap = t->cap ? 2 * t->cap : 64;
  if (t->be) {
    void **e = realloc(t->events, sizeof *e * (size_t)cap);
    if (!e) return cnn_set_error("timer: out of memory for %d marks", cap), -1;
    t->events = e;
  } else {
    double *s = realloc(t->secs, sizeof *s * (size_t)cap);
    if (!s) return cnn_set_error("timer: out of memory for %d marks", cap), -1;
    t->secs = s;
  }
  t->cap = cap;
  return 0;
}

int cnn_timer_mark(cnn_timer *t) {
  if (!t) return cnn_set_error("timer: missing timer"), -1;
  if (grow(t)) return -1;
  if (!t->be) {
    t->secs[t->count] = cnn_now_seconds();
    return t->count++;
  }
  void *ev = t->be->event_record(t->device.index);
  if (!ev) return -1; /* the backend set "timer: <CUDA error>" */
  t->events[t->count] = ev;
  return t->count++;
}

static int check_mark(const cnn_timer *t, int m) {
  if (m >= 0 && m < t->count) return 0;
  if (t->count == 0)
    return cnn_set_error("timer: mark %d does not exist (no marks recorded)", m), -1;
  return cnn_set_error("timer: mark %d does not exist (marks 0..%d)", m, t->count - 1), -1;
}

/* seconds from mark a to mark b, a <= b (waits for b's event on CUDA) */
static int span(cnn_timer *t, int a, int b, double *s) {
  if (!t->be) {
    *s = t->secs[b] - t->secs[a];
    return 0;
  }
  double ms = 0;
  if (a == b) return *s = 0, 0;
  if (t->be->event_elapsed(t->events[a], t->events[b], &ms)) return -1;
  *s = ms * 1e-3;
  return 0;
}

int cnn_timer_elapsed(cnn_timer *t, int a, int b, double *seconds) {
  if (!t || !seconds) return cnn_set_error("timer: missing argument"), -1;
  if (check_mark(t, a) || check_mark(t, b)) return -1;
  if (a <= b) return span(t, a, b, seconds);
  if (span(t, b, a, seconds)) return -1;
  *seconds = -*seconds;
  return 0;
}

int cnn_timer_seconds(cnn_timer *t, double *out) {
  if (!t || !out) return cnn_set_error("timer: missing argument"), -1;
  int n = t->count;
  if (n == 0) return 0;
  out[0] = 0;
  /* the last mark first: one wait, then every earlier event is complete */
  if (n > 1 && span(t, 0, n - 1, &out[n - 1])) return -1;
  for (int i = 1; i < n - 1; i++)
    if (span(t, 0, i, &out[i])) return -1;
  return 0;
}
