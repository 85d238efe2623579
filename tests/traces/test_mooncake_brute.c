/* The Mooncake session rule (traces/import.h) against a brute-force reading of it: random rows that
 * share prefixes, continue and fork, at M = 1 and 2; and many rows on one prefix, the case whose
 * parent search was once a walk of every row registered there. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import.h"

#define NROW 1500
#define MAXB 12

typedef struct brow {
    long ts;
    unsigned long in, out;
    long h[MAXB];
    int nb;
    int session, forked_from, has_child;
} brow_t;

static unsigned long lcg(unsigned long *s)
{
    *s = *s * 6364136223846793005ul + 1442695040888963407ul;
    return *s >> 33;
}

/* Rows: new conversations on one of a few system prompts, or turns extending (or re-extending,
 * which forks) a random earlier one; some share a timestamp. */
static void make_rows(brow_t *r, unsigned long seed)
{
    unsigned long s = seed;
    long ts = 0, next_block = 100;
    for (int i = 0; i < NROW; i++) {
        brow_t *x = &r[i];
        memset(x, 0, sizeof *x);
        ts += (long)(lcg(&s) % 3);
        x->ts = ts;
        x->out = 1 + lcg(&s) % 400;
        const brow_t *p = i && lcg(&s) % 10 < 6 ? &r[lcg(&s) % (unsigned long)i] : NULL;
        if (p && p->nb < MAXB - 2) {
            x->in = p->in + p->out + lcg(&s) % 900;
            memcpy(x->h, p->h, sizeof x->h);
        } else {
            x->in = 600 + lcg(&s) % 2400;
            x->h[0] = (long)(lcg(&s) % 3);
            x->h[1] = lcg(&s) % 2 ? 10 : next_block++;
        }
        x->nb = (int)((x->in + 511) / 512);
        if (x->nb > MAXB) {
            x->nb = MAXB;
            x->in = MAXB * 512;
        }
        int have = p && p->nb < MAXB - 2 ? p->nb - (lcg(&s) % 2) : 2; /* sometimes diverge at P's last block */
        for (int b = have; b < x->nb; b++) x->h[b] = next_block++;
    }
}

/* The rule read literally: the parent is the earlier row whose blocks but its last are a prefix of
 * R's (at least m of them), longest first; among equals the latest with no child, else the latest. */
static int brute(brow_t *r, int m)
{
    int n_sessions = 0;
    for (int i = 0; i < NROW; i++) {
        int best = -1, best_len = -1, best_free = 0;
        for (int j = i - 1; j >= 0; j--) {
            const brow_t *p = &r[j];
            int len = p->nb - 1;
            if (len < m || len > r[i].nb || p->ts >= r[i].ts || r[i].in < p->in + p->out) continue;
            if (memcmp(p->h, r[i].h, (size_t)len * sizeof *p->h)) continue;
            bool better = len > best_len || (len == best_len && !best_free && !p->has_child);
            if (better) {
                best = j;
                best_len = len;
                best_free = !p->has_child;
            }
        }
        r[i].forked_from = -1;
        if (best >= 0 && !r[best].has_child) {
            r[best].has_child = 1;
            r[i].session = r[best].session;
        } else {
            r[i].session = n_sessions++;
            if (best >= 0) r[i].forked_from = r[best].session;
        }
    }
    return n_sessions;
}

static void check(unsigned long seed, int m)
{
    brow_t *r = calloc(NROW, sizeof *r);
    make_rows(r, seed);
    size_t cap = (size_t)NROW * 256, len = 0;
    char *text = malloc(cap);
    for (int i = 0; i < NROW; i++) {
        len += (size_t)snprintf(text + len, cap - len, "{\"timestamp\": %ld, \"input_length\": %lu, \"output_length\": %lu, \"hash_ids\": [",
                                r[i].ts, r[i].in, r[i].out);
        for (int b = 0; b < r[i].nb; b++) len += (size_t)snprintf(text + len, cap - len, "%s%ld", b ? ", " : "", r[i].h[b]);
        len += (size_t)snprintf(text + len, cap - len, "]}\n");
    }
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    o.min_shared_blocks = m;
    trace_t t;
    err_t e;
    cr_assert_eq(trace_import_mem(TRACE_FMT_MOONCAKE, "brute.jsonl", text, len, &o, &t, &e), 0, "%s", e.msg);
    int n = brute(r, m);
    cr_assert_eq(t.n_sessions, (size_t)n, "seed %lu M %d", seed, m);
    size_t *next = calloc((size_t)n, sizeof *next);
    int forks = 0;
    for (int i = 0; i < NROW; i++) {
        const trace_session_t *ts = &t.sessions[r[i].session];
        cr_assert_lt(next[r[i].session], ts->n_turns);
        const trace_turn_t *tu = &ts->turns[next[r[i].session]++];
        cr_assert_eq(tu->input_tokens, r[i].in, "row %d", i);
        cr_assert_eq(tu->arrival_ns, r[i].ts * 1000000, "row %d", i);
        if (r[i].forked_from >= 0) forks++;
        if (next[r[i].session] == 1)
            cr_assert_eq(ts->forked_from, r[i].forked_from >= 0 ? (int64_t)r[i].forked_from : TRACE_NONE, "row %d", i);
    }
    cr_assert_gt(forks, 10, "the rows should fork (%d)", forks);
    free(next);
    trace_free(&t);
    free(text);
    free(r);
}

Test(mooncake_brute, random_rows_follow_the_rule)
{
    for (unsigned long seed = 1; seed <= 4; seed++) {
        check(seed, 2);
        check(seed, 1);
    }
}

/* 200,000 rows on one 2-block prefix, none able to continue another (same length): each is its own
 * session; a walk of every row registered at the prefix would take ~2e10 steps. */
Test(mooncake_brute, many_rows_on_one_prefix, .timeout = 60)
{
    size_t n = 200000, cap = n * 128, len = 0;
    char *text = malloc(cap);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"timestamp\": %zu, \"input_length\": 1500, \"output_length\": 10, \"hash_ids\": [1, 2, %zu]}\n", i,
                                100 + i);
    trace_t t;
    err_t e;
    cr_assert_eq(trace_import_mem(TRACE_FMT_MOONCAKE, "one_prefix.jsonl", text, len, NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.n_sessions, n);
    trace_free(&t);
    free(text);
}
