/* replay_fmt.c: the flat replay workload format (docs/replay.md), parsed and written with nothing
 * but the C library, so that kbench on a bare GPU host and odsim read it with one piece of code. */
#include "replay_fmt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[RF_MODE_COUNT] = {"procs", "streams", "batched"};
static const char *const kind_names[RF_OP_COUNT] = {"h2d", "d2h", "h2d2d", "h2dbatch", "gather",
                                                    "hbm", "compute", "spin", "sync", "host", "gemm"};

const char *rf_mode_name(int mode) { return mode >= 0 && mode < RF_MODE_COUNT ? mode_names[mode] : "?"; }
const char *rf_kind_name(int kind) { return kind >= 0 && kind < RF_OP_COUNT ? kind_names[kind] : "?"; }

int rf_mode_find(const char *name)
{
    for (int i = 0; i < RF_MODE_COUNT; i++)
        if (!strcmp(name, mode_names[i])) return i;
    return -1;
}

int rf_kind_find(const char *name)
{
    for (int i = 0; i < RF_OP_COUNT; i++)
        if (!strcmp(name, kind_names[i])) return i;
    return -1;
}

int rf_kind_is_transfer(int kind) { return kind >= RF_OP_H2D && kind <= RF_OP_GATHER; }

uint64_t rf_fnv1a(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t rf_piece_offset(uint64_t seed, uint32_t sess, uint32_t op, uint64_t i, uint64_t span_bytes,
                         uint64_t piece_bytes)
{
    uint64_t slots = piece_bytes ? span_bytes / piece_bytes : 0;
    if (slots == 0) return 0;
    uint64_t h = splitmix64(seed ^ splitmix64(((uint64_t)sess << 48) ^ ((uint64_t)op << 32) ^ splitmix64(i)));
    return (h % slots) * piece_bytes;
}

uint64_t rf_pitch(const rf_op_t *o)
{
    if (!o->pieces || !o->piece_bytes) return 0;
    return o->span_bytes / o->pieces / o->piece_bytes * o->piece_bytes;
}

/* ---- parser ------------------------------------------------------------------------------------ */

#define RF_NUM_MAX (1ull << 53)
#define MAX_TOKENS 24

typedef struct {
    const char *path;
    int line;
    char *err;
    size_t errn;
} ctx_t;

static int fail(ctx_t *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errn) {
        if (c->line > 0)
            snprintf(c->err, c->errn, "%s:%d: %s", c->path, c->line, msg);
        else
            snprintf(c->err, c->errn, "%s: %s", c->path, msg);
    }
    return -1;
}

/* A plain decimal integer in [lo, hi]: digits only, no sign, exponent or suffix. */
static int num(ctx_t *c, const char *key, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!*s) return fail(c, "%s: empty number", key);
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return fail(c, "%s: '%s' is not a plain non-negative integer", key, s);
        if (v > (RF_NUM_MAX - (uint64_t)(*p - '0')) / 10) return fail(c, "%s: %s is above 2^53", key, s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < lo || v > hi)
        return fail(c, "%s: %s is out of range [%llu, %llu]", key, s, (unsigned long long)lo,
                    (unsigned long long)hi);
    *out = v;
    return 0;
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > RF_NAME_MAX) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '.' || *p == '-'))
            return 0;
    return 1;
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* Keys an op kind takes, besides stream and after (for sync and host: neither). */
static int key_allowed(int kind, const char *key)
{
    if (!strcmp(key, "stream") || !strcmp(key, "after")) return kind != RF_OP_SYNC && kind != RF_OP_HOST;
    if (rf_kind_is_transfer(kind))
        return !strcmp(key, "pieces") || !strcmp(key, "piece_bytes") || !strcmp(key, "span");
    if (kind == RF_OP_HBM) return !strcmp(key, "bytes");
    if (kind == RF_OP_COMPUTE) return !strcmp(key, "flops");
    if (kind == RF_OP_SPIN || kind == RF_OP_HOST) return !strcmp(key, "us");
    if (kind == RF_OP_GEMM) return !strcmp(key, "m") || !strcmp(key, "n") || !strcmp(key, "k");
    return 0;
}

static int parse_after(ctx_t *c, const char *v, uint32_t id, rf_op_t *o)
{
    const char *p = v;
    if (!*p) return fail(c, "after: empty list");
    while (*p) {
        const char *q = strchr(p, ',');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        char buf[24];
        if (n == 0 || n >= sizeof buf) return fail(c, "after: malformed list '%s'", v);
        memcpy(buf, p, n);
        buf[n] = 0;
        uint64_t a;
        if (num(c, "after", buf, 0, RF_MAX_OPS, &a)) return -1;
        if (a >= id) return fail(c, "after: op %llu is not before op %u", (unsigned long long)a, id);
        for (uint32_t k = 0; k < o->n_after; k++)
            if (o->after[k] == a) return fail(c, "after: op %llu twice", (unsigned long long)a);
        if (o->n_after == RF_MAX_AFTER) return fail(c, "after: more than %d ids", RF_MAX_AFTER);
        o->after[o->n_after++] = (uint32_t)a;
        if (!q) break;
        p = q + 1;
        if (!*p) return fail(c, "after: malformed list '%s'", v);
    }
    return 0;
}

static int parse_op(ctx_t *c, char **tok, int nt, rf_session_t *s)
{
    uint64_t id;
    if (nt < 3) return fail(c, "op: expected 'op ID KIND key=value...'");
    if (num(c, "op id", tok[1], 0, RF_MAX_OPS, &id)) return -1;
    if (id != s->n_ops) return fail(c, "op id %llu: expected %u (ids count from 0 in order)", (unsigned long long)id, s->n_ops);
    if (s->n_ops == RF_MAX_OPS) return fail(c, "more than %d ops in a session", RF_MAX_OPS);
    int kind = rf_kind_find(tok[2]);
    if (kind < 0)
        return fail(c, "op kind '%s' unknown (h2d, d2h, h2d2d, h2dbatch, gather, hbm, compute, spin, sync, host, gemm)", tok[2]);
    rf_op_t *o = &s->ops[s->n_ops];
    memset(o, 0, sizeof *o);
    o->kind = (rf_kind_t)kind;
    unsigned seen = 0;
    static const char *const keys[] = {"stream", "after", "pieces", "piece_bytes", "span", "bytes", "flops", "us", "m", "n", "k"};
    for (int t = 3; t < nt; t++) {
        char *eq = strchr(tok[t], '=');
        if (!eq) return fail(c, "op %s: '%s' is not key=value", tok[2], tok[t]);
        *eq = 0;
        const char *k = tok[t], *v = eq + 1;
        int ki = -1;
        for (int j = 0; j < (int)(sizeof keys / sizeof *keys); j++)
            if (!strcmp(k, keys[j])) ki = j;
        if (ki < 0 || !key_allowed(kind, k)) return fail(c, "op %s: key '%s' not known for this kind", tok[2], k);
        if (seen & (1u << ki)) return fail(c, "op %s: key '%s' twice", tok[2], k);
        seen |= 1u << ki;
        uint64_t x = 0;
        switch (ki) {
        case 0: if (num(c, k, v, 0, RF_MAX_STREAMS - 1, &x)) return -1; o->stream = (uint32_t)x; break;
        case 1: if (parse_after(c, v, (uint32_t)id, o)) return -1; break;
        case 2: if (num(c, k, v, 1, 1u << 20, &o->pieces)) return -1; break;
        case 3: if (num(c, k, v, 16, 256ull << 20, &o->piece_bytes)) return -1;
                if (!is_pow2(o->piece_bytes)) return fail(c, "piece_bytes: %s is not a power of two", v);
                break;
        case 4: if (num(c, k, v, 1, RF_MAX_REGION_BYTES, &o->span_bytes)) return -1; break;
        case 5: if (num(c, k, v, 1, 64ull << 30, &o->bytes)) return -1; break;
        case 6: if (num(c, k, v, 1, 1000000000000000ull, &o->flops)) return -1; break;
        case 7: if (num(c, k, v, 0, 10000000, &o->us)) return -1; break;
        case 8: if (num(c, k, v, 1, RF_MAX_GEMM_DIM, &o->m)) return -1; break;
        case 9: if (num(c, k, v, 1, RF_MAX_GEMM_DIM, &o->n)) return -1; break;
        case 10: if (num(c, k, v, 1, RF_MAX_GEMM_DIM, &o->k)) return -1; break;
        }
    }
    static const char *const need_transfer[] = {"pieces", "piece_bytes", "span"};
    if (rf_kind_is_transfer(kind)) {
        for (int j = 0; j < 3; j++)
            if (!(seen & (1u << (2 + j)))) return fail(c, "op %s: key '%s' missing", tok[2], need_transfer[j]);
        if (o->pieces * o->piece_bytes > o->span_bytes)
            return fail(c, "op %s: pieces x piece_bytes = %llu is above span %llu", tok[2],
                        (unsigned long long)(o->pieces * o->piece_bytes), (unsigned long long)o->span_bytes);
        if (o->span_bytes > s->region_bytes)
            return fail(c, "op %s: span %llu is above the session's region %llu", tok[2],
                        (unsigned long long)o->span_bytes, (unsigned long long)s->region_bytes);
    } else if (kind == RF_OP_HBM && !(seen & (1u << 5))) {
        return fail(c, "op hbm: key 'bytes' missing");
    } else if (kind == RF_OP_COMPUTE && !(seen & (1u << 6))) {
        return fail(c, "op compute: key 'flops' missing");
    } else if ((kind == RF_OP_SPIN || kind == RF_OP_HOST) && !(seen & (1u << 7))) {
        return fail(c, "op %s: key 'us' missing", tok[2]);
    } else if (kind == RF_OP_GEMM) {
        static const char *const need_gemm[] = {"m", "n", "k"};
        for (int j = 0; j < 3; j++)
            if (!(seen & (1u << (8 + j)))) return fail(c, "op gemm: key '%s' missing", need_gemm[j]);
    }
    s->n_ops++;
    return 0;
}

/* Splits line (modified in place) at spaces and tabs, after cutting its comment. */
static int split(char *line, char **tok)
{
    char *h = strchr(line, '#');
    if (h) *h = 0;
    int n = 0;
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (!*p) break;
        if (n == MAX_TOKENS) return -1;
        tok[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
        if (*p) *p++ = 0;
    }
    return n;
}

enum { H_WORKLOAD, H_MODE, H_WINDOW, H_MIN_STEPS, H_WARMUP, H_SEED, H_COUNT };
static const char *const header_keys[H_COUNT] = {"workload", "mode", "window_ms", "min_steps", "warmup_steps", "seed"};

int rf_parse(const char *buf, size_t n, const char *path, rf_workload_t *w, char *err, size_t errn)
{
    ctx_t c = {path ? path : "(workload)", 0, err, errn};
    memset(w, 0, sizeof *w);
    w->min_steps = 10;
    w->warmup_steps = 3;
    w->seed = 1;
    int magic = 0, ended = 0, hseen[H_COUNT] = {0}, region_seen = 0, idle_seen = 0;
    uint64_t region_total = 0;
    rf_session_t *s = NULL;
    char line[RF_MAX_LINE + 2];
    size_t pos = 0;
    while (pos < n) {
        c.line++;
        size_t end = pos;
        while (end < n && buf[end] != '\n') end++;
        size_t len = end - pos;
        if (len > RF_MAX_LINE) return fail(&c, "line longer than %d bytes", RF_MAX_LINE);
        if (memchr(buf + pos, 0, len)) return fail(&c, "NUL byte in the line");
        memcpy(line, buf + pos, len);
        line[len] = 0;
        pos = end + 1;
        char *tok[MAX_TOKENS];
        int nt = split(line, tok);
        if (nt < 0) return fail(&c, "more than %d words on the line", MAX_TOKENS);
        if (nt == 0) continue;
        if (ended) return fail(&c, "'%s' after end", tok[0]);
        if (!magic) {
            if (nt != 2 || strcmp(tok[0], "odsim-replay"))
                return fail(&c, "expected 'odsim-replay %d' first (not a replay workload)", RF_VERSION);
            uint64_t v;
            if (num(&c, "version", tok[1], RF_VERSION, RF_VERSION, &v)) return -1;
            magic = 1;
            continue;
        }
        const char *k = tok[0];
        int hk = -1;
        for (int j = 0; j < H_COUNT; j++)
            if (!strcmp(k, header_keys[j])) hk = j;
        if (hk >= 0) {
            if (s) return fail(&c, "%s: header lines come before the first session", k);
            if (hseen[hk]) return fail(&c, "%s: given twice", k);
            if (nt != 2) return fail(&c, "%s: expected one value", k);
            hseen[hk] = 1;
            const char *v = tok[1];
            switch (hk) {
            case H_WORKLOAD:
                if (!valid_name(v)) return fail(&c, "workload: '%s' is not 1-%d characters of A-Z a-z 0-9 _ . -", v, RF_NAME_MAX);
                strcpy(w->name, v);
                break;
            case H_MODE: {
                int m = rf_mode_find(v);
                if (m < 0) return fail(&c, "mode: '%s' unknown (procs, streams, batched)", v);
                w->mode = (rf_mode_t)m;
                break;
            }
            case H_WINDOW: if (num(&c, k, v, 10, 60000, &w->window_ms)) return -1; break;
            case H_MIN_STEPS: if (num(&c, k, v, 1, 100000, &w->min_steps)) return -1; break;
            case H_WARMUP: if (num(&c, k, v, 0, 1000, &w->warmup_steps)) return -1; break;
            case H_SEED: if (num(&c, k, v, 0, RF_NUM_MAX, &w->seed)) return -1; break;
            }
            continue;
        }
        if (!strcmp(k, "session")) {
            if (nt != 1) return fail(&c, "session: takes no value");
            if (!hseen[H_WORKLOAD] || !hseen[H_MODE] || !hseen[H_WINDOW])
                return fail(&c, "session: workload, mode and window_ms must come first");
            if (s && !s->n_ops) return fail(&c, "session %u has no op", w->n_sessions - 1);
            if (w->n_sessions == RF_MAX_SESSIONS) return fail(&c, "more than %d sessions", RF_MAX_SESSIONS);
            s = &w->sessions[w->n_sessions++];
            region_seen = idle_seen = 0;
            continue;
        }
        if (!strcmp(k, "end")) {
            if (nt != 1) return fail(&c, "end: takes no value");
            if (!s) return fail(&c, "end: no session");
            if (!s->n_ops) return fail(&c, "session %u has no op", w->n_sessions - 1);
            ended = 1;
            continue;
        }
        if (!s) return fail(&c, "'%s' unknown here (header keys: workload, mode, window_ms, min_steps, warmup_steps, seed; then session)", k);
        if (!strcmp(k, "region")) {
            if (region_seen) return fail(&c, "region: given twice in a session");
            if (s->n_ops) return fail(&c, "region: must come before the session's ops");
            if (nt != 2) return fail(&c, "region: expected one value");
            if (num(&c, k, tok[1], 4096, RF_MAX_REGION_BYTES, &s->region_bytes)) return -1;
            if (s->region_bytes % 4096) return fail(&c, "region: %s is not a multiple of 4096", tok[1]);
            region_total += s->region_bytes;
            if (region_total > RF_MAX_TOTAL_REGION_BYTES) return fail(&c, "region: the sessions' regions together are above 100 GiB");
            region_seen = 1;
            continue;
        }
        if (!strcmp(k, "idle_us")) {
            if (idle_seen) return fail(&c, "idle_us: given twice in a session");
            if (nt != 2) return fail(&c, "idle_us: expected one value");
            if (num(&c, k, tok[1], 0, 10000000, &s->idle_us)) return -1;
            idle_seen = 1;
            continue;
        }
        if (!strcmp(k, "op")) {
            if (!region_seen) return fail(&c, "op: the session's region must come first");
            if (parse_op(&c, tok, nt, s)) return -1;
            continue;
        }
        return fail(&c, "'%s' unknown (session lines: region, idle_us, op; or session, end)", k);
    }
    c.line = 0;
    if (!magic) return fail(&c, "empty: expected 'odsim-replay %d'", RF_VERSION);
    if (!ended) return fail(&c, "no 'end' line (truncated?)");
    return 0;
}

int rf_load(const char *path, rf_workload_t *w, char *err, size_t errn)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1u << 16, n = 0;
    const size_t max = 16u << 20;
    char *buf = (char *)malloc(cap);
    int rc = -1;
    if (!buf) {
        snprintf(err, errn, "%s: out of memory", path);
        goto out;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                snprintf(err, errn, "%s: larger than 16 MiB", path);
                goto out;
            }
            char *nb = (char *)realloc(buf, cap * 2);
            if (!nb) {
                snprintf(err, errn, "%s: out of memory", path);
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) {
        snprintf(err, errn, "%s: read error", path);
        goto out;
    }
    rc = rf_parse(buf, n, path, w, err, errn);
out:
    free(buf);
    fclose(f);
    return rc;
}

int rf_write(FILE *f, const rf_workload_t *w)
{
    fprintf(f, "odsim-replay %d\n", RF_VERSION);
    fprintf(f, "workload %s\nmode %s\nwindow_ms %llu\nmin_steps %llu\nwarmup_steps %llu\nseed %llu\n", w->name,
            rf_mode_name(w->mode), (unsigned long long)w->window_ms, (unsigned long long)w->min_steps,
            (unsigned long long)w->warmup_steps, (unsigned long long)w->seed);
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const rf_session_t *s = &w->sessions[i];
        fprintf(f, "session\nregion %llu\nidle_us %llu\n", (unsigned long long)s->region_bytes,
                (unsigned long long)s->idle_us);
        for (uint32_t j = 0; j < s->n_ops; j++) {
            const rf_op_t *o = &s->ops[j];
            fprintf(f, "op %u %s", j, rf_kind_name(o->kind));
            if (o->kind != RF_OP_SYNC && o->kind != RF_OP_HOST) {
                fprintf(f, " stream=%u", o->stream);
                for (uint32_t a = 0; a < o->n_after; a++) fprintf(f, "%s%u", a ? "," : " after=", o->after[a]);
            }
            if (rf_kind_is_transfer(o->kind))
                fprintf(f, " pieces=%llu piece_bytes=%llu span=%llu", (unsigned long long)o->pieces,
                        (unsigned long long)o->piece_bytes, (unsigned long long)o->span_bytes);
            else if (o->kind == RF_OP_HBM)
                fprintf(f, " bytes=%llu", (unsigned long long)o->bytes);
            else if (o->kind == RF_OP_COMPUTE)
                fprintf(f, " flops=%llu", (unsigned long long)o->flops);
            else if (o->kind == RF_OP_SPIN || o->kind == RF_OP_HOST)
                fprintf(f, " us=%llu", (unsigned long long)o->us);
            else if (o->kind == RF_OP_GEMM)
                fprintf(f, " m=%llu n=%llu k=%llu", (unsigned long long)o->m, (unsigned long long)o->n,
                        (unsigned long long)o->k);
            fputc('\n', f);
        }
    }
    fputs("end\n", f);
    return ferror(f) ? -1 : 0;
}

static int op_equal(const rf_op_t *a, const rf_op_t *b)
{
    if (a->kind != b->kind || a->stream != b->stream || a->n_after != b->n_after || a->pieces != b->pieces ||
        a->piece_bytes != b->piece_bytes || a->span_bytes != b->span_bytes || a->bytes != b->bytes ||
        a->flops != b->flops || a->us != b->us || a->m != b->m || a->n != b->n || a->k != b->k)
        return 0;
    for (uint32_t k = 0; k < a->n_after; k++)
        if (a->after[k] != b->after[k]) return 0;
    return 1;
}

int rf_equal(const rf_workload_t *a, const rf_workload_t *b)
{
    if (strcmp(a->name, b->name) || a->mode != b->mode || a->window_ms != b->window_ms ||
        a->min_steps != b->min_steps || a->warmup_steps != b->warmup_steps || a->seed != b->seed ||
        a->n_sessions != b->n_sessions)
        return 0;
    for (uint32_t i = 0; i < a->n_sessions; i++) {
        const rf_session_t *x = &a->sessions[i], *y = &b->sessions[i];
        if (x->region_bytes != y->region_bytes || x->idle_us != y->idle_us || x->n_ops != y->n_ops) return 0;
        for (uint32_t j = 0; j < x->n_ops; j++)
            if (!op_equal(&x->ops[j], &y->ops[j])) return 0;
    }
    return 1;
}
