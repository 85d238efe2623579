/* study_wire — a study result as a byte string and back (cli/study_wire.h). */
#include "cli/study_wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/grow.h"

typedef struct wbuf {
    char *p;
    size_t len, cap;
    bool oom;
} wbuf_t;

static void put(wbuf_t *w, const void *src, size_t n)
{
    if (w->oom || grow_to((void **)&w->p, &w->cap, w->len + n, 1)) {
        w->oom = true;
        return;
    }
    if (n) memcpy(w->p + w->len, src, n);
    w->len += n;
}

/* A string as its length + 1 (0: NULL) and its bytes. */
static void put_str(wbuf_t *w, const char *s)
{
    uint64_t n = s ? strlen(s) + 1 : 0;
    put(w, &n, sizeof n);
    put(w, s, n ? n - 1 : 0);
}

int study_wire_pack(const study_result_t *r, char **buf, size_t *len, err_t *e)
{
    wbuf_t w = {0};
    put(&w, r, sizeof *r);
    put_str(&w, r->label);
    put_str(&w, r->binding);
    put_str(&w, r->placement);
    put_str(&w, r->flags);
    for (size_t i = 0; i < r->n_res; i++) {
        put_str(&w, r->res[i].name);
        put_str(&w, r->res[i].unit);
        put(&w, &r->res[i].capacity, sizeof(double));
        put(&w, &r->res[i].utilisation, sizeof(double));
        put(&w, &r->res[i].work, sizeof(double));
    }
    for (size_t i = 0; i < r->n_lost; i++) {
        put_str(&w, r->lost[i].name);
        put(&w, &r->lost[i].per_step_s, sizeof(double));
    }
    put(&w, r->ctx_tokens, r->n_ctx * sizeof(double));
    put(&w, r->ctx_step_s, r->n_ctx * sizeof(double));
    put(&w, r->util_t_s, r->n_util * sizeof(double));
    put(&w, r->util, r->n_util * r->n_res * sizeof(double));
    for (size_t i = 0; i < r->n_classes; i++) { /* each class's scalars, then its strings */
        put(&w, &r->classes[i], sizeof r->classes[i]);
        put_str(&w, r->classes[i].name);
        put_str(&w, r->classes[i].method);
    }
    put(&w, r->rep_figs, (r->rep_figs ? r->replications : 0) * (size_t)STUDY_REP_N * sizeof(double));
    if (w.oom) {
        free(w.p);
        return err_set(e, ERR_NOMEM, "out of memory packing the result of '%s'", r->label ? r->label : "");
    }
    *buf = w.p;
    *len = w.len;
    return 0;
}

typedef struct rbuf {
    const char *p;
    size_t len, at;
    int err; /* ERR_PARSE or ERR_NOMEM once something failed */
} rbuf_t;

static void get(rbuf_t *r, void *dst, size_t n)
{
    if (r->err) return;
    if (n > r->len - r->at) {
        r->err = ERR_PARSE;
        return;
    }
    if (n) memcpy(dst, r->p + r->at, n);
    r->at += n;
}

static char *get_str(rbuf_t *r)
{
    uint64_t n = 0;
    get(r, &n, sizeof n);
    if (r->err || !n) return NULL;
    if (n - 1 > r->len - r->at) {
        r->err = ERR_PARSE;
        return NULL;
    }
    char *s = malloc((size_t)n);
    if (!s) {
        r->err = ERR_NOMEM;
        return NULL;
    }
    get(r, s, (size_t)n - 1);
    s[n - 1] = '\0';
    return s;
}

/* A new array of n doubles read from r (NULL for n == 0, as the simulator leaves it). */
static double *get_doubles(rbuf_t *r, size_t n)
{
    if (r->err || !n) return NULL;
    if (n > (r->len - r->at) / sizeof(double)) {
        r->err = ERR_PARSE;
        return NULL;
    }
    double *d = malloc(n * sizeof *d);
    if (!d) {
        r->err = ERR_NOMEM;
        return NULL;
    }
    get(r, d, n * sizeof *d);
    return d;
}

int study_wire_unpack(const char *buf, size_t len, study_result_t **out, err_t *e)
{
    rbuf_t r = {buf, len, 0, 0};
    study_result_t *x = calloc(1, sizeof *x);
    if (!x) return err_set(e, ERR_NOMEM, "out of memory unpacking a result");
    get(&r, x, sizeof *x);
    size_t n_res = r.err ? 0 : x->n_res, n_lost = r.err ? 0 : x->n_lost, n_classes = r.err ? 0 : x->n_classes;
    /* Every pointer is rebuilt below; counts stay 0 until their arrays exist, so a failure frees
     * only what was read. */
    x->label = x->binding = x->placement = x->flags = NULL;
    x->res = NULL;
    x->lost = NULL;
    x->ctx_tokens = x->ctx_step_s = x->util_t_s = x->util = NULL;
    x->classes = NULL;
    bool has_reps = !r.err && x->rep_figs;  /* a pointer's bytes only say whether there was an array */
    x->rep_figs = NULL;
    x->n_res = x->n_lost = x->n_classes = 0;
    size_t n_ctx = x->n_ctx, n_util = x->n_util;
    x->n_ctx = x->n_util = 0;
    x->label = get_str(&r);
    x->binding = get_str(&r);
    x->placement = get_str(&r);
    x->flags = get_str(&r);
    if (!r.err && (n_res > len || n_lost > len || n_ctx > len || n_util > len || n_classes > len)) r.err = ERR_PARSE;
    if (!r.err && n_res && !(x->res = calloc(n_res, sizeof *x->res))) r.err = ERR_NOMEM;
    for (size_t i = 0; !r.err && i < n_res; i++, x->n_res++) {
        x->res[i].name = get_str(&r);
        x->res[i].unit = get_str(&r);
        get(&r, &x->res[i].capacity, sizeof(double));
        get(&r, &x->res[i].utilisation, sizeof(double));
        get(&r, &x->res[i].work, sizeof(double));
    }
    if (!r.err && n_lost && !(x->lost = calloc(n_lost, sizeof *x->lost))) r.err = ERR_NOMEM;
    for (size_t i = 0; !r.err && i < n_lost; i++, x->n_lost++) {
        x->lost[i].name = get_str(&r);
        get(&r, &x->lost[i].per_step_s, sizeof(double));
    }
    x->ctx_tokens = get_doubles(&r, n_ctx);
    x->ctx_step_s = get_doubles(&r, n_ctx);
    x->util_t_s = get_doubles(&r, n_util);
    x->util = n_util && n_res > SIZE_MAX / n_util ? (r.err = ERR_PARSE, NULL) : get_doubles(&r, n_util * n_res);
    if (!r.err && n_classes && !(x->classes = calloc(n_classes, sizeof *x->classes))) r.err = ERR_NOMEM;
    for (size_t i = 0; !r.err && i < n_classes; i++, x->n_classes++) {
        get(&r, &x->classes[i], sizeof x->classes[i]);
        x->classes[i].name = x->classes[i].method = NULL;
        x->classes[i].name = get_str(&r);
        x->classes[i].method = get_str(&r);
    }
    if (!r.err && has_reps && x->replications > 1000) r.err = ERR_PARSE;
    if (has_reps) x->rep_figs = get_doubles(&r, (size_t)x->replications * STUDY_REP_N);
    if (!r.err && r.at != len) r.err = ERR_PARSE;
    if (r.err) {
        study_result_free(x);
        return r.err == ERR_NOMEM ? err_set(e, ERR_NOMEM, "out of memory unpacking a result")
                                  : err_set(e, ERR_PARSE, "a packed result of %zu bytes is malformed", len);
    }
    x->n_ctx = n_ctx;
    x->n_util = n_util;
    *out = x;
    return 0;
}
