/*
 * host_cache.h -- core-internal: the cache of large freed CPU blocks
 * (host_cache.c).  Sizes passed in must come from cnn_host_block_size().
 */
#ifndef CNN_HOST_CACHE_H
#define CNN_HOST_CACHE_H

#include <stdbool.h>
#include <stddef.h>

size_t cnn_host_block_size(size_t nbytes); /* the size actually allocated */
void *cnn_host_alloc(size_t size);         /* 64-byte aligned; a cached block when one fits */
void cnn_host_free(void *p, size_t size);  /* keeps large blocks in the cache */
size_t cnn_host_cache_clear(void);         /* frees everything; returns the bytes freed */
size_t cnn_host_cache_bytes(void);
#endif
