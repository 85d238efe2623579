/* kvdump — a user's dump of keys and queries (and optionally values) for `odsim quality --keys DIR`.
 *
 * The format: one directory, NumPy .npy files (common/npy.h: float32 '<f4' or float16 '<f2', C
 * order), three per layer L and KV head H (decimal, from 0):
 *     layerL_kvH_keys.npy     shape (n, d): the KV head's n cached keys, after RoPE (as q.k uses them)
 *     layerL_kvH_queries.npy  shape (G, d) or (m, G, d): m decode steps' queries of the G query heads
 *                             that read this KV head, after RoPE, unscaled (odsim folds in 1/sqrt(d))
 *     layerL_kvH_values.npy   optional, shape (n, d): the values (without them odsim draws N(0, 1))
 * d is at most 128 and the same in every file of a (layer, KV head); G at most 256; n >= 1. Other files in the directory are ignored.
 * Every (L, H) with one of keys or queries needs the other. */
#ifndef ODSIM_VALIDATION_KVDUMP_H
#define ODSIM_VALIDATION_KVDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include "common/err.h"

#define KVDUMP_MAX_DIM 128
#define KVDUMP_MAX_GROUP 256

typedef struct kvdump_entry {
    int layer, head;
    bool has_values;
} kvdump_entry_t;

typedef struct kvdump {
    char *dir;
    size_t n_entries;
    kvdump_entry_t *entries;   /* sorted by layer, then head */
} kvdump_t;

/* Lists DIR's (layer, KV head) pairs. Errors: ERR_IO (no directory), ERR_NOTFOUND (no keys file),
 * ERR_INVAL (a keys file without its queries or the reverse, naming the file), ERR_NOMEM. */
int kvdump_open(const char *dir, kvdump_t *d, err_t *e);

void kvdump_close(kvdump_t *d);

/* One entry's data: keys n × dim, queries steps × group × dim, values n × dim or NULL when the dump
 * has none (each malloc'd, the caller frees). Errors name the file and what is wrong: ERR_IO,
 * ERR_PARSE (as npy_parse; a shape that is not (n, d), (G, d) or (m, G, d); dims that disagree;
 * d > 128; a non-finite element). */
int kvdump_load(const kvdump_t *d, size_t entry, float **keys, size_t *n, int *dim, float **queries,
                size_t *steps, int *group, float **values, err_t *e);

#endif
