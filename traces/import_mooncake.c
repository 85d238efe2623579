/* Mooncake FAST'25 JSONL importer: session reconstruction from prefix-block hashes (rule in import.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import_int.h"

typedef struct mc_row {
    int64_t ts_ns;
    uint64_t in, out;
    size_t hoff, nb; /* hash ids: hashes[hoff .. hoff+nb) */
    int line;
    uint32_t reg_node, reg_pos; /* where it is registered (rows of 2 blocks or more) */
    int32_t session;
    bool has_child;
} mc_row_t;

typedef struct mc_slot {
    uint64_t hash;
    uint32_t node, child; /* child 0: empty slot (node ids start at 1, the root is 0) */
} mc_slot_t;

/* The rows registered at one trie node, in row (time) order, under a segment tree of their ends
 * (in + out): per range the smallest end among all rows ([2i]) and among rows with no child yet
 * ([2i+1]), so the parent rule is two descents, O(log n), not a walk of every row sharing the prefix
 * (which made rows sharing one prefix O(n^2)). */
typedef struct mc_reg {
    int32_t *rows;
    uint64_t *tree;          /* 2 values for each of 2·cap tree nodes; leaves at [cap, 2·cap) */
    uint32_t n, cap;
} mc_reg_t;

typedef struct mc {
    mc_row_t *rows;
    size_t n_rows, cap_rows;
    uint64_t *hashes;
    size_t n_hashes, cap_hashes;
    mc_slot_t *slots;
    size_t mask;
    mc_reg_t *reg;     /* per node */
    uint32_t n_nodes;
} mc_t;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static mc_slot_t *slot_find(mc_t *m, uint32_t node, uint64_t hash)
{
    size_t i = (size_t)mix(hash * 0x9E3779B97F4A7C15ull + node) & m->mask;
    for (;;) {
        mc_slot_t *s = &m->slots[i];
        if (s->child == 0 || (s->node == node && s->hash == hash)) return s;
        i = (i + 1) & m->mask;
    }
}

static void reg_set(mc_reg_t *g, uint32_t pos, int w, uint64_t v)
{
    size_t i = (size_t)g->cap + pos;
    g->tree[2 * i + w] = v;
    for (i /= 2; i >= 1; i /= 2) {
        uint64_t a = g->tree[4 * i + w], b = g->tree[4 * i + 2 + w];
        g->tree[2 * i + w] = a < b ? a : b;
    }
}

/* Registers row ri (its end: end) at g. Errors: ERR_NOMEM. */
static int reg_add(mc_reg_t *g, int32_t ri, uint64_t end, uint32_t *pos, err_t *e)
{
    if (g->n == g->cap) { /* double and rebuild the tree */
        uint32_t nc = g->cap ? 2 * g->cap : 4;
        int32_t *nr = realloc(g->rows, (size_t)nc * sizeof *nr);
        uint64_t *nt = malloc((size_t)4 * nc * sizeof *nt);
        if (nr) g->rows = nr;
        if (!nr || !nt) {
            free(nt);
            return err_set(e, ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < (size_t)4 * nc; i++) nt[i] = UINT64_MAX;
        for (uint32_t j = 0; j < g->n; j++) {
            nt[2 * ((size_t)nc + j)] = g->tree[2 * ((size_t)g->cap + j)];
            nt[2 * ((size_t)nc + j) + 1] = g->tree[2 * ((size_t)g->cap + j) + 1];
        }
        for (size_t i = nc; i-- > 1;)
            for (int w = 0; w < 2; w++) {
                uint64_t a = nt[4 * i + w], b = nt[4 * i + 2 + w];
                nt[2 * i + w] = a < b ? a : b;
            }
        free(g->tree);
        g->tree = nt;
        g->cap = nc;
    }
    *pos = g->n++;
    g->rows[*pos] = ri;
    reg_set(g, *pos, 0, end);
    reg_set(g, *pos, 1, end);
    return ERR_OK;
}

/* The largest position below k whose value w (0: any row, 1: rows with no child) is at most x, or -1. */
static long reg_last(const mc_reg_t *g, size_t node, size_t lo, size_t hi, size_t k, uint64_t x, int w)
{
    if (lo >= k || g->tree[2 * node + w] > x) return -1;
    if (hi - lo == 1) return (long)lo;
    size_t mid = (lo + hi) / 2;
    long r = reg_last(g, 2 * node + 1, mid, hi, k, x, w);
    return r >= 0 ? r : reg_last(g, 2 * node, lo, mid, k, x, w);
}

/* Among the rows registered at g that came before R (earlier timestamps) and end within R's input:
 * the latest with no child yet, else the latest; -1 when none. */
static int32_t reg_parent(const mc_t *m, const mc_reg_t *g, const mc_row_t *r)
{
    if (!g->n) return -1;
    size_t lo = 0, hi = g->n; /* rows before R: the registered rows are in time order */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->rows[g->rows[mid]].ts_ns < r->ts_ns) lo = mid + 1;
        else hi = mid;
    }
    long p = reg_last(g, 1, 0, g->cap, lo, r->in, 1);
    if (p < 0) p = reg_last(g, 1, 0, g->cap, lo, r->in, 0);
    return p < 0 ? -1 : g->rows[p];
}

static int parse_rows(mc_t *m, const char *name, const char *buf, size_t len, err_t *e)
{
    line_iter_t it;
    line_iter_init(&it, buf, len);
    const char *s;
    size_t n;
    int line;
    int64_t last_ts = 0;
    while (line_iter_next(&it, &s, &n, &line)) {
        json_t *j;
        int rc = import_json_line(name, line, s, n, &j, e);
        if (rc) return rc;
        mc_row_t r;
        memset(&r, 0, sizeof r);
        r.line = line;
        r.session = -1;
        json_t *ts = json_object_get(j, "timestamp");
        if (!ts) rc = err_set(e, ERR_PARSE, "%s:%d: missing field 'timestamp'", name, line);
        else if (!json_is_number(ts)) rc = err_set(e, ERR_PARSE, "%s:%d: field 'timestamp': not a number", name, line);
        else {
            double ms = json_number_value(ts);
            if (!(ms >= 0) || ms * 1e6 > (double)TRACE_MAX_TIME_NS)
                rc = err_set(e, ERR_PARSE, "%s:%d: field 'timestamp': %g ms out of range [0, 100 years]", name, line, ms);
            else if (json_is_integer(ts))
                r.ts_ns = (int64_t)json_integer_value(ts) * 1000000;
            else
                r.ts_ns = (int64_t)llround(ms * 1e6);
        }
        if (!rc && m->n_rows && r.ts_ns < last_ts)
            rc = err_set(e, ERR_PARSE, "%s:%d: timestamp %.6f ms earlier than the previous row's %.6f ms (rows must be sorted)",
                         name, line, (double)r.ts_ns / 1e6, (double)last_ts / 1e6);
        if (!rc) rc = import_json_tokens(name, line, j, "input_length", &r.in, e);
        if (!rc) rc = import_json_tokens(name, line, j, "output_length", &r.out, e);
        json_t *h = rc ? NULL : json_object_get(j, "hash_ids");
        if (!rc && !h) rc = err_set(e, ERR_PARSE, "%s:%d: missing field 'hash_ids'", name, line);
        if (!rc && !json_is_array(h)) rc = err_set(e, ERR_PARSE, "%s:%d: field 'hash_ids': not an array", name, line);
        if (!rc) {
            r.nb = json_array_size(h);
            uint64_t want = (r.in + TRACE_MOONCAKE_BLOCK_TOKENS - 1) / TRACE_MOONCAKE_BLOCK_TOKENS;
            if (r.nb != want)
                rc = err_set(e, ERR_PARSE, "%s:%d: field 'hash_ids': %zu blocks, but input_length %llu needs %llu of %d tokens",
                             name, line, r.nb, (unsigned long long)r.in, (unsigned long long)want,
                             TRACE_MOONCAKE_BLOCK_TOKENS);
        }
        if (!rc && m->n_hashes + r.nb > m->cap_hashes) {
            size_t nc = m->cap_hashes ? m->cap_hashes : 4096;
            while (nc < m->n_hashes + r.nb) nc *= 2;
            uint64_t *nh = realloc(m->hashes, nc * sizeof *nh);
            if (!nh) rc = err_set(e, ERR_NOMEM, "out of memory");
            else {
                m->hashes = nh;
                m->cap_hashes = nc;
            }
        }
        for (size_t i = 0; !rc && i < r.nb; i++) {
            json_t *x = json_array_get(h, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0)
                rc = err_set(e, ERR_PARSE, "%s:%d: field 'hash_ids': item %zu is not a non-negative integer", name, line, i);
            else
                m->hashes[m->n_hashes + i] = (uint64_t)json_integer_value(x);
        }
        json_decref(j);
        if (rc) return rc;
        r.hoff = m->n_hashes;
        m->n_hashes += r.nb;
        if (m->n_rows == m->cap_rows) {
            size_t nc = m->cap_rows ? 2 * m->cap_rows : 1024;
            if (nc > INT32_MAX) return err_set(e, ERR_RANGE, "%s:%d: too many rows", name, line);
            mc_row_t *nr = realloc(m->rows, nc * sizeof *nr);
            if (!nr) return err_set(e, ERR_NOMEM, "out of memory");
            m->rows = nr;
            m->cap_rows = nc;
        }
        m->rows[m->n_rows++] = r;
        last_ts = r.ts_ns;
    }
    return ERR_OK;
}

int import_mooncake(const char *name, const char *buf, size_t len, const trace_import_opts_t *o, trace_t *t,
                    err_t *e)
{
    mc_t m;
    memset(&m, 0, sizeof m);
    uint32_t *path = NULL;
    int *line_of = NULL;
    size_t forks = 0, cont = 0;
    int rc = parse_rows(&m, name, buf, len, e);
    if (rc) goto out;
    size_t cap = 1024;
    while (cap < 2 * m.n_hashes + 2) cap *= 2;
    if (m.n_hashes >= UINT32_MAX - 1) {
        rc = err_set(e, ERR_RANGE, "%s: too many hash blocks", name);
        goto out;
    }
    m.slots = calloc(cap, sizeof *m.slots);
    m.mask = cap - 1;
    m.reg = calloc(m.n_hashes + 1, sizeof *m.reg);
    size_t maxnb = 1;
    for (size_t i = 0; i < m.n_rows; i++)
        if (m.rows[i].nb + 1 > maxnb) maxnb = m.rows[i].nb + 1;
    path = malloc(maxnb * sizeof *path);
    if (!m.slots || !m.reg || !path) {
        rc = err_set(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    m.n_nodes = 1;
    const uint64_t B = TRACE_MOONCAKE_BLOCK_TOKENS;
    const size_t M = (size_t)o->min_shared_blocks;
    int32_t n_sessions = 0;
    trace_session_t *s = NULL;
    /* first pass: sessions, in row order */
    for (size_t ri = 0; ri < m.n_rows; ri++) {
        mc_row_t *r = &m.rows[ri];
        const uint64_t *h = r->nb ? m.hashes + r->hoff : NULL; /* hashes is NULL when no row has any */
        size_t depth = 0;
        path[0] = 0;
        while (depth < r->nb) {
            mc_slot_t *sl = slot_find(&m, path[depth], h[depth]);
            if (!sl->child) break;
            path[++depth] = sl->child;
        }
        /* the parent: deepest registered P with P.ts < R.ts and R.in >= P.in + P.out */
        int32_t parent = -1;
        size_t pd = 0;
        for (size_t d = depth; d >= M && parent < 0; d--) {
            parent = reg_parent(&m, &m.reg[path[d]], r);
            pd = d;
            if (d == 0) break;
        }
        if (parent >= 0 && !m.rows[parent].has_child) {
            m.rows[parent].has_child = true;
            reg_set(&m.reg[m.rows[parent].reg_node], m.rows[parent].reg_pos, 1, UINT64_MAX);
            r->session = m.rows[parent].session;
            cont++;
        } else {
            r->session = n_sessions++;
            if ((rc = trace_add_session(t, &s, e))) goto out;
            s->id = (uint64_t)r->session;
            s->arrival_ns = r->ts_ns;
            if (parent >= 0) {
                forks++;
                s->forked_from = m.rows[parent].session;
                s->fork_tokens = (uint64_t)pd * B;
            }
        }
        trace_session_t *ss = &t->sessions[r->session];
        trace_turn_t tu = trace_turn_blank();
        tu.arrival_ns = r->ts_ns;
        tu.input_tokens = r->in;
        tu.decode_tokens = r->out;
        uint64_t reused;
        if (ss->n_turns == 0) {
            size_t full = (size_t)(r->in / B), sb = depth < full ? depth : full;
            uint64_t shared = (uint64_t)sb * B;
            if (sb > 0) {
                tu.shared_prefix_tokens = shared;
                tu.shared_prefix_id = h[sb - 1];
            }
            reused = shared > ss->fork_tokens ? shared : ss->fork_tokens;
            if (r->in > 0 && reused >= r->in) reused = r->in - 1;
        } else {
            const mc_row_t *P = &m.rows[parent];
            reused = P->in + P->out;
        }
        tu.prefill_tokens = r->in - reused;
        if ((rc = trace_session_add_turn(ss, &tu, e))) goto out;
        /* insert R's path and register R at its all-but-last-block node */
        for (size_t d = depth; d < r->nb; d++) {
            mc_slot_t *sl = slot_find(&m, path[d], h[d]);
            sl->node = path[d];
            sl->hash = h[d];
            sl->child = m.n_nodes++;
            path[d + 1] = sl->child;
        }
        if (r->nb >= 2) {
            r->reg_node = path[r->nb - 1];
            if ((rc = reg_add(&m.reg[r->reg_node], (int32_t)ri, r->in + r->out, &r->reg_pos, e))) goto out;
        }
    }
    line_of = malloc((t->n_sessions + 1) * sizeof *line_of);
    if (!line_of) {
        rc = err_set(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t ri = m.n_rows; ri-- > 0;) line_of[m.rows[ri].session] = m.rows[ri].line;
    t->hdr.open_loop = true;
    t->hdr.closed_loop = false;
    t->hdr.session_arrivals = TRACE_ARRIVALS_OPEN;
    if ((rc = trace_header_add(&t->hdr, false, "min_shared_blocks", e, "%d", o->min_shared_blocks)) ||
        (rc = trace_header_add(&t->hdr, false, "block_tokens", e, "%llu", (unsigned long long)B)) ||
        (rc = import_report_common(t, m.n_rows, e)) ||
        (rc = trace_header_add(&t->hdr, true, "continuations", e, "%zu", cont)) ||
        (rc = trace_header_add(&t->hdr, true, "forks", e, "%zu", forks)) ||
        (rc = trace_strset(&t->hdr.notes,
                           "Mooncake: sessions reconstructed from hash_ids prefixes (rule in traces/import.h); "
                           "open loop only: think times are unknown", e)) ||
        (rc = import_check(name, t, line_of, e)))
        goto out;
out:
    free(line_of);
    free(path);
    free(m.rows);
    free(m.hashes);
    free(m.slots);
    for (size_t i = 0; m.reg && i <= m.n_hashes; i++) {
        free(m.reg[i].rows);
        free(m.reg[i].tree);
    }
    free(m.reg);
    return rc;
}
