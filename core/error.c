/*
 * error.c -- the per-thread error message of core/ and the interrupt flag.
 *
 * Core functions that fail on user input call cnn_set_error() and return
 * NULL or -1; the Lua bindings read cnn_error() and raise it.  The message
 * lives in a thread-local buffer, so the data loader's thread cannot clobber
 * the main thread's error.  The interrupt flag is set from a SIGINT handler
 * (async-signal-safe: a lock-free atomic store) and polled by long kernels.
 */
#include "cnn.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static _Thread_local char error_buffer[1024];
static atomic_int interrupt_flag;

const char *cnn_error(void) { return error_buffer[0] ? error_buffer : "unknown error"; }

void cnn_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_buffer, sizeof error_buffer, fmt, ap);
  va_end(ap);
}

void cnn_request_interrupt(void) { atomic_store(&interrupt_flag, 1); }
bool cnn_interrupt_pending(void) {
  return atomic_load_explicit(&interrupt_flag, memory_order_relaxed) != 0;
}
void cnn_clear_interrupt(void) { atomic_store(&interrupt_flag, 0); }
