#include "sim/evq.h"

#include <stdlib.h>

#include "common/err.h"

struct evq {
    evq_entry_t *h;   /* heap: children of i are 4i+1 .. 4i+4 */
    size_t n, cap;
    uint64_t next_seq;
};

/* Without short-circuits, so the compiler can select children with conditional moves: which child is
 * smallest is a coin toss, and mispredicted branches would cost more than the comparisons. */
static inline int before(const evq_entry_t *a, const evq_entry_t *b)
{
    return (a->t_ps < b->t_ps) | ((a->t_ps == b->t_ps) & (a->seq < b->seq));
}

evq_t *evq_new(void)
{
    evq_t *q = calloc(1, sizeof *q);
    return q;
}

void evq_free(evq_t *q)
{
    if (!q) return;
    free(q->h);
    free(q);
}

size_t evq_size(const evq_t *q) { return q->n; }

int64_t evq_peek_ps(const evq_t *q) { return q->n ? q->h[0].t_ps : INT64_MAX; }

int evq_push(evq_t *q, int64_t t_ps, evq_fn fn, void *arg)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        evq_entry_t *h = realloc(q->h, cap * sizeof *h);
        if (!h) return ERR_NOMEM;
        q->h = h;
        q->cap = cap;
    }
    evq_entry_t e = {t_ps, q->next_seq++, fn, arg};
    evq_entry_t *h = q->h;
    size_t i = q->n++;
    /* Sift up with a hole: one copy per level instead of a swap. */
    while (i > 0) {
        size_t p = (i - 1) >> 2;
        if (!before(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
    return 0;
}

int evq_pop(evq_t *q, evq_entry_t *out)
{
    if (!q->n) return 0;
    evq_entry_t *h = q->h;
    *out = h[0];
    size_t n = --q->n;
    if (!n) return 1;
    /* Floyd's bottom-up deletion: walk the hole down to a leaf along the smallest children (no
     * comparison with the moved entry on the way), then sift the last entry up from there; it came
     * from the bottom, so it rarely climbs far. */
    size_t i = 0;
    for (;;) {
        size_t c = 4 * i + 1, best = c;
        if (c + 4 <= n) {
            /* A full node: a tournament of two pairs. */
            size_t x = c + (size_t)before(&h[c + 1], &h[c]), y = c + 2 + (size_t)before(&h[c + 3], &h[c + 2]);
            best = before(&h[y], &h[x]) ? y : x;
        } else {
            if (c >= n) break;
            for (size_t k = c + 1; k < n; k++)
                if (before(&h[k], &h[best])) best = k;
        }
        h[i] = h[best];
        i = best;
    }
    evq_entry_t last = h[n];
    while (i > 0) {
        size_t p = (i - 1) >> 2;
        if (!before(&last, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = last;
    return 1;
}
