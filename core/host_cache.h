/*
 * host_cache.h -- core-internal: the cache of large freed CPU blocks
 * (host_cache.c).  Sizes passed in must come from cnn_host_block_size().
 */
#ifndef CNN_HOST_CACHE_H
#define CNN_HOST_CACHE_H

#include <stdbool.h>
#include <stddef.h>

size_t cnn_host_block_size(size_t nbytes); /* the size actually allocated */
void *cnn_host_cache_take(size_t size);    /* a cached block of exactly size, or NULL */
bool cnn_host_cache_put(void *p, size_t size); /* false: not cached, caller frees */
size_t cnn_host_cache_clear(void);         /* frees everything; returns the bytes freed */
size_t cnn_host_cache_bytes(void);
#endif
