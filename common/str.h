/* str — small string helpers every module shares (one copy, not one per file). */
#ifndef COMMON_STR_H
#define COMMON_STR_H

#include <stddef.h>
#include <stdint.h>

/* A heap copy of s (the caller frees it); NULL when s is NULL or memory is short. */
char *str_dup(const char *s);

/* The 64-bit FNV-1a hash of the n bytes at p (stable across builds: profile and file hashes). */
uint64_t str_fnv1a(const void *p, size_t n);

#endif
