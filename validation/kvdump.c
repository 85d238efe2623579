/* kvdump — reading a dump of keys and queries (see kvdump.h). */
#include "validation/kvdump.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"

static int entry_cmp(const void *pa, const void *pb)
{
    const kvdump_entry_t *a = pa, *b = pb;
    return a->layer != b->layer ? (a->layer > b->layer) - (a->layer < b->layer)
                                : (a->head > b->head) - (a->head < b->head);
}

/* layerL_kvH_WHAT.npy: what = 0 keys, 1 queries, 2 values; -1 when the name is not one. */
static int name_kind(const char *name, int *layer, int *head)
{
    static const char *const kinds[] = {"keys", "queries", "values"};
    char what[16], tail;
    int used = 0;
    if (sscanf(name, "layer%d_kv%d_%15[a-z].np%c%n", layer, head, what, &tail, &used) != 4 || tail != 'y' ||
        name[used] || *layer < 0 || *head < 0)
        return -1;
    for (int k = 0; k < 3; k++)
        if (!strcmp(what, kinds[k])) return k;
    return -1;
}

int kvdump_open(const char *dir, kvdump_t *d, err_t *e)
{
    memset(d, 0, sizeof *d);
    DIR *dp = opendir(dir);
    if (!dp) return err_set(e, ERR_IO, "%s: cannot open the dump directory: %s", dir, strerror(errno));
    size_t cap = 0;
    unsigned *seen = NULL;   /* per entry: bit k set when kind k is present */
    int rc = ERR_OK;
    struct dirent *de;
    while (!rc && (de = readdir(dp))) {
        int layer, head, kind = name_kind(de->d_name, &layer, &head);
        if (kind < 0) continue;
        size_t i = 0;
        while (i < d->n_entries && (d->entries[i].layer != layer || d->entries[i].head != head)) i++;
        if (i == d->n_entries) {
            if (d->n_entries == cap) {
                cap = cap ? 2 * cap : 16;
                kvdump_entry_t *ne = realloc(d->entries, cap * sizeof *ne);
                unsigned *ns = realloc(seen, cap * sizeof *ns);
                if (ne) d->entries = ne;
                if (ns) seen = ns;
                if (!ne || !ns) {
                    rc = err_set(e, ERR_NOMEM, "%s: out of memory", dir);
                    break;
                }
            }
            d->entries[i] = (kvdump_entry_t){layer, head, false};
            seen[i] = 0;
            d->n_entries++;
        }
        seen[i] |= 1u << kind;
    }
    closedir(dp);
    for (size_t i = 0; !rc && i < d->n_entries; i++) {
        const kvdump_entry_t *en = &d->entries[i];
        if ((seen[i] & 3) != 3)
            rc = err_set(e, ERR_INVAL, "%s: layer%d_kv%d_%s.npy is missing (keys and queries go together)", dir,
                         en->layer, en->head, seen[i] & 1 ? "queries" : "keys");
        d->entries[i].has_values = seen[i] & 4;
    }
    free(seen);
    if (!rc && d->n_entries == 0)
        rc = err_set(e, ERR_NOTFOUND, "%s: no layerL_kvH_keys.npy files (see odsim quality --help)", dir);
    if (!rc) d->dir = strdup(dir);
    if (!rc && !d->dir) rc = err_set(e, ERR_NOMEM, "out of memory");
    if (rc) {
        kvdump_close(d);
        return rc;
    }
    qsort(d->entries, d->n_entries, sizeof d->entries[0], entry_cmp);
    return ERR_OK;
}

void kvdump_close(kvdump_t *d)
{
    free(d->dir);
    free(d->entries);
    memset(d, 0, sizeof *d);
}

/* Reads DIR/layerL_kvH_WHAT.npy and checks it has 2 dimensions (or 2..3 when steps are allowed), a
 * last dimension of dim (or sets dim when *dim == 0) and finite elements. */
static int load_one(const kvdump_t *d, const kvdump_entry_t *en, const char *what, int max_ndim, int *dim,
                    npy_array_t *a, char *path, size_t psize, err_t *e)
{
    snprintf(path, psize, "%s/layer%d_kv%d_%s.npy", d->dir, en->layer, en->head, what);
    int rc = npy_read_file(path, a, e);
    if (rc) return rc;
    char sh[96];
    npy_shape_str(a, sh, sizeof sh);
    size_t last = a->shape[a->ndim - 1];
    if (a->ndim < 2 || a->ndim > max_ndim)
        rc = err_set(e, ERR_PARSE, "%s: shape %s: %s must be %s", path, sh, what,
                     max_ndim == 2 ? "(n, d)" : "(G, d) or (m, G, d)");
    else if (last < 1 || last > KVDUMP_MAX_DIM)
        rc = err_set(e, ERR_PARSE, "%s: shape %s: head dimension %zu is outside 1..%d", path, sh, last, KVDUMP_MAX_DIM);
    else if (*dim && last != (size_t)*dim)
        rc = err_set(e, ERR_PARSE, "%s: shape %s: head dimension %zu, the keys have %d", path, sh, last, *dim);
    else if (a->count == 0)
        rc = err_set(e, ERR_PARSE, "%s: shape %s holds no vectors", path, sh);
    for (size_t i = 0; !rc && i < a->count; i++)
        if (!isfinite(a->data[i]))
            rc = err_set(e, ERR_PARSE, "%s: element %zu (row %zu) is not finite", path, i, i / last);
    if (rc) npy_free(a);
    else *dim = (int)last;
    return rc;
}

int kvdump_load(const kvdump_t *d, size_t entry, float **keys, size_t *n, int *dim, float **queries,
                size_t *steps, int *group, float **values, err_t *e)
{
    *keys = *queries = *values = NULL;
    const kvdump_entry_t *en = &d->entries[entry];
    npy_array_t k, q, v = {0};
    char path[4096];
    *dim = 0;
    int rc = load_one(d, en, "keys", 2, dim, &k, path, sizeof path, e);
    if (rc) return rc;
    rc = load_one(d, en, "queries", 3, dim, &q, path, sizeof path, e);
    if (rc) {
        npy_free(&k);
        return rc;
    }
    if (en->has_values) {
        rc = load_one(d, en, "values", 2, dim, &v, path, sizeof path, e);
        if (!rc && v.shape[0] != k.shape[0])
            rc = err_set(e, ERR_PARSE, "%s: %zu values for %zu keys", path, v.shape[0], k.shape[0]);
    }
    if (!rc && q.shape[q.ndim - 2] > KVDUMP_MAX_GROUP)
        rc = err_set(e, ERR_PARSE, "%s/layer%d_kv%d_queries.npy: %zu query heads per KV head (at most %d)", d->dir,
                     en->layer, en->head, q.shape[q.ndim - 2], KVDUMP_MAX_GROUP);
    if (rc) {
        npy_free(&k), npy_free(&q), npy_free(&v);
        return rc;
    }
    *n = k.shape[0];
    *steps = q.ndim == 3 ? q.shape[0] : 1;
    *group = (int)q.shape[q.ndim - 2];
    *keys = k.data;
    *queries = q.data;
    *values = v.data;
    return ERR_OK;
}
