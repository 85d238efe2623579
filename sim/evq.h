/* evq — the engine's event queue: entries ordered by (time, sequence number).
 *
 * A 4-ary min-heap of small inline entries (32 bytes, so a node's four children span two or three
 * cache lines and the heap is half as deep as a binary one); pops use Floyd's bottom-up deletion with
 * branch-free child selection. The sequence number is assigned at push in
 * increasing order, so entries at equal times come out in push order: the same pushes give the same
 * pops on every build. */
#ifndef ODSIM_SIM_EVQ_H
#define ODSIM_SIM_EVQ_H

#include <stddef.h>
#include <stdint.h>

/* A generic function pointer: the owner casts it back to its real type before calling it. */
typedef void (*evq_fn)(void);

typedef struct evq_entry {
    int64_t t_ps;   /* when */
    uint64_t seq;   /* push order, the tie-break */
    evq_fn fn;
    void *arg;
} evq_entry_t;

typedef struct evq evq_t;

/* Creates an empty queue. Returns NULL when out of memory. Free with evq_free. */
evq_t *evq_new(void);
/* Frees q and its entries (their args are not touched). NULL is ok. */
void evq_free(evq_t *q);
/* Adds an entry at t_ps; returns 0, or ERR_NOMEM (q is unchanged then). */
int evq_push(evq_t *q, int64_t t_ps, evq_fn fn, void *arg);
/* Removes the earliest entry into *out; returns 0 when the queue was empty (out untouched), 1 otherwise. */
int evq_pop(evq_t *q, evq_entry_t *out);
/* The earliest entry's time, or INT64_MAX when empty. */
int64_t evq_peek_ps(const evq_t *q);
size_t evq_size(const evq_t *q);

#endif
