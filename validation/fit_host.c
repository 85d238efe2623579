/* fit_host — fitters of the host-side forms: launches, hand-offs, events, graphs, time slices, jitter. */
#include "validation/fit_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host-side overheads --------------------------------------------------------------------- */

/* The median's standard error from a row's spread: sigma ~ (p90 - p10)/2.563 (a normal's), the
 * median's 1.2533·sigma/sqrt(reps). */
static double median_se(const kbrow_t *r)
{
    return 1.2533 * (r->t_p90_us - r->t_p10_us) / 2.563 / sqrt(fmax(r->reps, 1));
}

/* The copy engine's hand-off to the SMs: an empty kernel timed from an event after a copy in its
 * stream, less the same kernel after a kernel (kbench's launch rows after_copy, after_kernel). It is
 * uniform, not centred: the completion is seen at a periodic check whose phase varies, so the
 * rows' medians wander (2.5-6.3 us over 16 runs) while p10 and p90 stay (3.4-3.8, 10.1-10.9 us).
 * A uniform over [a, b] has them at a + 0.1·w and a + 0.9·w (w = b − a): its midpoint is theirs and
 * its width (p90 − p10)/0.8; each quantile's standard error sqrt(0.09/reps)·w (a uniform's density
 * 1/w). */
void fit_handoff(fit_t *f, const sel_t *rows)
{
    const kbrow_t *after[2] = {NULL, NULL};   /* after a kernel, after a copy */
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_LAUNCH)) continue;
        if (!strcmp(r->variant, "after_kernel")) after[0] = r;
        if (!strcmp(r->variant, "after_copy")) after[1] = r;
    }
    if (!after[0] || !after[1]) {
        note(f, "ce_handoff_us: not determined (no launch rows after_copy and after_kernel)");
        return;
    }
    const kbrow_t *k = after[0], *c = after[1];
    double w = (c->t_p90_us - c->t_p10_us) / 0.8, mid = (c->t_p10_us + c->t_p90_us) / 2 - k->t_med_us;
    double se_q = sqrt(0.09 / fmax(c->reps, 1)) * w;   /* each of p10, p90 */
    put(f, "ce_handoff_us", fmax(mid, 0), sqrt(se_q * se_q / 2 + pow(median_se(k), 2)), NAN, NAN, after, 2,
        "an empty kernel after a copy less after a kernel (launch rows after_copy, after_kernel): the midpoint of the "
        "former's p10 and p90 less the latter's median");
    put(f, "ce_handoff_spread_us", fmax(w, 0), sqrt(2.0) * se_q / 0.8, NAN, NAN, &c, 1,
        "an empty kernel after a copy (launch row after_copy): (p90 - p10)/0.8, a uniform's width");
}

/* What an event between two kernels costs a chain of them: kbench's launch rows chain and
 * chain_events (the same kernels back to back, and with an event after each), their medians'
 * difference over the chain's length. */
void fit_event(fit_t *f, const sel_t *rows)
{
    const kbrow_t *ch[2] = {NULL, NULL};   /* without, with events */
    for (size_t i = 0; i < rows->n; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_LAUNCH) || !(r->pieces >= 1)) continue;
        if (!strcmp(r->variant, "chain")) ch[0] = r;
        if (!strcmp(r->variant, "chain_events")) ch[1] = r;
    }
    if (!ch[0] || !ch[1] || ch[0]->pieces != ch[1]->pieces) {
        note(f, "event_us: not determined (no launch rows chain and chain_events of one length)");
        return;
    }
    double n = ch[0]->pieces, v = (ch[1]->t_med_us - ch[0]->t_med_us) / n;
    put(f, "event_us", fmax(v, 0), hypot(median_se(ch[0]), median_se(ch[1])) / n, NAN, NAN, ch, 2,
        "a chain of kernels with an event after each less without, over its length (launch rows chain_events, "
        "chain: medians)");
}

/* Host time per item of `kind` rows (t_med / pieces); rows of `variant` only when there are any
 * (kbench's launch rows: host_enqueue is the host's cost, empty_b2b the GPU's). */
int fit_overhead(fit_t *f, const sel_t *rows, int kind, const char *variant, const char *name, err_t *e)
{
    sel_t s = {0};
    int rc = ERR_OK;
    bool have_variant = false;
    for (size_t i = 0; i < rows->n && variant; i++)
        have_variant |= is_op(rows->v[i], kind) && !strcmp(rows->v[i]->variant, variant);
    for (size_t i = 0; i < rows->n && !rc; i++)
        if (is_op(rows->v[i], kind) && alone(rows->v[i]) && (!have_variant || !strcmp(rows->v[i]->variant, variant)))
            rc = sel_add(&s, rows->v[i]);
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!s.n) {
        note(f, "%s: not determined (no %s rows)", name, opkind_name(kind));
        return ERR_OK;
    }
    double *v = malloc(s.n * sizeof *v), *p = malloc(s.n * sizeof *p);
    if (!v || !p) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    for (size_t i = 0; !rc && i < s.n; i++)
        v[i] = s.v[i]->pieces >= 1 ? s.v[i]->t_med_us / s.v[i]->pieces : s.v[i]->t_med_us;
    double m = 0, se = 0;
    if (!rc) rc = lsq_mean(name, v, s.n, &m, &se, e);
    if (!rc) {
        char how[160];
        snprintf(how, sizeof how, "time per item (t_med / pieces), mean%s%s", have_variant ? " of variant " : "",
                 have_variant ? variant : "");
        put(f, name, m, se, 1, 0, s.v, s.n, how);
        for (size_t i = 0; i < s.n; i++) p[i] = m;
        resid(f, name, p, v, s.n);
    }
    free(v);
    free(p);
    free(s.v);
    return rc;
}

static double get_med(const kbrow_t *r) { return r->t_med_us; }

/* Which jitter a fit-set row's spread measures: the GPU's alone, or, for a row moving host bytes
 * over the link (the link suite's transfers, the kernels suite's rows placed on the host), the copy
 * engine's (copies, and fetches by it) or the gathers' (kernels whose SMs read host memory: gathers,
 * SM fetches, zero-copy kernels), as the engine tells them apart (sim/exec.c op_jitter). */
typedef enum { JIT_GPU, JIT_COPY, JIT_GATHER, JIT_CLASSES } jit_class_t;

static jit_class_t jitter_class(const kbrow_t *r)
{
    if (strcmp(r->suite, "link") && strcmp(r->placement, "host")) return JIT_GPU;
    bool ce = is_op(r, OPKIND_H2D_COPY) || is_op(r, OPKIND_D2H_COPY) || is_op(r, OPKIND_H2D_COPY2D) || is_op(r, OPKIND_FLUSH) ||
              is_op(r, OPKIND_H2D_BATCH) || (is_op(r, OPKIND_INDEX_FETCH) && !strncmp(r->variant, "ce", 2));
    return ce ? JIT_COPY : JIT_GATHER;
}

/* How much a measured time varies (run.jitter): over the timed single ops of the fit set (the time
 * slice's and host-timed launch rows aside), p99 − median ≈ jitter + rel·median, robust (bisquare)
 * relative to the median, as a p99 is judged (an error in the spread counts as its share of the op's
 * time; relative to the spread itself, the rows with the smallest spreads weighed most and the fit
 * came out low: the fit set's own p99s 1.4% (GPU) and 2.6% (host) short on average, against +0.4
 * and −0.6% so); once per class (jitter_class: the gathers' tails, 5-20 us on 30-100 us, are not
 * the copies' 0.5-3 us, and one fit over both, robust, had followed the copies). */
static int fit_jitter_of(fit_t *f, const sel_t *rows, jit_class_t cls, err_t *e)
{
    static const char *const abs_names[JIT_CLASSES] = {"jitter_us", "jitter_copy_us", "jitter_gather_us"};
    static const char *const rel_names[JIT_CLASSES] = {"jitter_rel", "jitter_copy_rel", "jitter_gather_rel"};
    static const char *const which[JIT_CLASSES] = {"the fit set's single ops on the GPU alone",
                                                   "the fit set's single copy-engine transfers over the host link",
                                                   "the fit set's single ops whose SMs read host memory"};
    static const char *const resid_names[JIT_CLASSES] = {"p99", "p99_copy", "p99_gather"};
    const char *abs_name = abs_names[cls], *rel_name = rel_names[cls];
    sel_t s = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (alone(r) && !is_op(r, OPKIND_TIMESLICE) && !is_op(r, OPKIND_LAUNCH) && r->t_med_us > 0 &&
            r->t_p99_us > r->t_med_us && jitter_class(r) == cls)
            rc = sel_add(&s, r);
    }
    double *x = malloc((s.n + 1) * sizeof *x), *y = malloc((s.n + 1) * sizeof *y), *pred = malloc((s.n + 1) * sizeof *pred);
    double *X = malloc((2 * s.n + 1) * sizeof *X), *one = malloc((s.n + 1) * sizeof *one);
    if (rc || !x || !y || !pred || !X || !one) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    for (size_t i = 0; !rc && i < s.n; i++) {
        x[i] = s.v[i]->t_med_us;
        y[i] = s.v[i]->t_p99_us - s.v[i]->t_med_us;
        X[2 * i] = 1 / x[i];         /* relative to the median: spread/median = jitter/median + rel */
        X[2 * i + 1] = 1;
        one[i] = y[i] / x[i];
    }
    if (!rc && s.n < 3) note(f, "%s, %s: not determined (%zu rows with a spread)", abs_name, rel_name, s.n);
    /* a p99 of 30 repetitions is their maximum (kbench takes 300 of short ops since 38fcb9a): robust
     * against the rows a stray delay hit */
    if (!rc && s.n >= 3) rc = lsq_robust("p99 - median = jitter + rel*median", X, one, s.n, 2, &lf, e);
    if (!rc && s.n >= 3) {
        double lo, hi;
        range_of(&s, get_med, &lo, &hi);
        char how[240];
        snprintf(how, sizeof how, "p99 - median = jitter + rel*median over %s, robust (bisquare) relative to the median (the intercept)",
                 which[cls]);
        put(f, abs_name, lf.coef[0] > 0 ? lf.coef[0] : 0, lf.se[0], lo, hi, s.v, s.n, how);
        snprintf(how, sizeof how, "p99 - median = jitter + rel*median over %s, robust (bisquare) relative to the median (the slope)",
                 which[cls]);
        put(f, rel_name, lf.coef[1] > 0 ? lf.coef[1] : 0, lf.se[1], lo, hi, s.v, s.n, how);
        for (size_t i = 0; i < s.n; i++) {   /* the p99s themselves, as they are judged */
            pred[i] = x[i] + lf.coef[0] + lf.coef[1] * x[i];
            y[i] = s.v[i]->t_p99_us;
        }
        resid(f, resid_names[cls], pred, y, s.n);
    }
    free(x);
    free(y);
    free(X);
    free(one);
    free(pred);
    free(s.v);
    return rc;
}

int fit_jitter(fit_t *f, const sel_t *rows, err_t *e)
{
    int rc = ERR_OK;
    for (int c = 0; c < JIT_CLASSES && !rc; c++) rc = fit_jitter_of(f, rows, (jit_class_t)c, e);
    return rc;
}

static double get_procs(const kbrow_t *r) { return r->procs; }

/* Time slicing between separate contexts (op timeslice, N = procs): a context's runs between
 * switch-outs are the slice T, its switch-outs with N contexts last gap = (N-1)·T + N·c. T: the
 * mean of the run rows' medians; c: the mean over the gap rows of (gap - (N-1)·T)/N; standard
 * errors from their spread (n - 1). The whole GPU spinning (variants run_full, gap_full) saves and
 * restores every resident block as a decode kernel does: its rows are used where present, the one
 * thread's (run, gap) otherwise. */
int fit_timeslice(fit_t *f, const sel_t *rows, err_t *e)
{
    sel_t run = {0}, gap = {0};
    int rc = ERR_OK;
    bool full = false;
    for (size_t i = 0; i < rows->n; i++)
        full |= is_op(rows->v[i], OPKIND_TIMESLICE) && !strcmp(rows->v[i]->variant, "gap_full");
    for (size_t i = 0; i < rows->n && !rc; i++) {
        const kbrow_t *r = rows->v[i];
        if (!is_op(r, OPKIND_TIMESLICE) || !(r->procs >= 2) || !(r->t_med_us > 0)) continue;
        if (!strcmp(r->variant, full ? "run_full" : "run")) rc = sel_add(&run, r);
        else if (!strcmp(r->variant, full ? "gap_full" : "gap")) rc = sel_add(&gap, r);
        else if (full && !strcmp(r->variant, "gap"))
            note(f, "ctx_switch_us: one spinning thread's switch-outs: %.4g us with %g contexts (the profile's is the whole GPU's)",
                 r->t_med_us, r->procs);
    }
    if (rc) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    if (!rc && (!run.n || !gap.n))
        note(f, "timeslice_us, ctx_switch_us: not determined (no timeslice run and gap rows)");
    if (!rc && run.n && gap.n) {
        double T = 0, se_T = 0, c = 0, se_c = 0, lo, hi;
        double *v = malloc((run.n + gap.n) * sizeof *v), *pred = malloc(gap.n * sizeof *pred);
        double *meas = malloc(gap.n * sizeof *meas);
        if (!v || !pred || !meas) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
        for (size_t i = 0; !rc && i < run.n; i++) v[i] = run.v[i]->t_med_us;
        if (!rc) rc = lsq_mean("time slice", v, run.n, &T, &se_T, e);
        for (size_t i = 0; !rc && i < gap.n; i++) {
            double N = gap.v[i]->procs;
            meas[i] = gap.v[i]->t_med_us;
            v[i] = (meas[i] - (N - 1) * T) / N;
        }
        if (!rc) rc = lsq_mean("context switch", v, gap.n, &c, &se_c, e);
        for (size_t i = 0; !rc && i < gap.n; i++) pred[i] = (gap.v[i]->procs - 1) * T + gap.v[i]->procs * c;
        range_of(&run, get_procs, &lo, &hi);
        if (!rc) {
            put(f, "timeslice_us", T, se_T, lo, hi, run.v, run.n,
                full ? "time-sliced contexts, the whole GPU spinning: a context's median run between switch-outs, mean over the process counts"
                     : "time-sliced contexts, one thread spinning: a context's median run between switch-outs, mean over the process counts");
            put(f, "ctx_switch_us", c > 0 ? c : 0, se_c, lo, hi, gap.v, gap.n,
                full ? "time-sliced contexts, the whole GPU spinning: switch-out gap = (N-1)*slice + N*switch, mean over the process counts"
                     : "time-sliced contexts, one thread spinning: switch-out gap = (N-1)*slice + N*switch, mean over the process counts");
            resid(f, "timeslice_gap", pred, meas, gap.n);
        }
        free(v);
        free(pred);
        free(meas);
    }
    free(run.v);
    free(gap.v);
    return rc;
}

/* Graph replays by node count: t = launch + nodes·per_node; the launch is graph_launch_us. */
int fit_graph(fit_t *f, const sel_t *rows, err_t *e)
{
    sel_t s = {0};
    int rc = ERR_OK;
    for (size_t i = 0; i < rows->n && !rc; i++)
        if (is_op(rows->v[i], OPKIND_GRAPH_REPLAY) && alone(rows->v[i])) rc = sel_add(&s, rows->v[i]);
    if (rc) return err_set(e, ERR_NOMEM, "fit: out of memory");
    double lo, hi;
    range_of(&s, get_pieces, &lo, &hi);
    if (s.n < 2 || !(hi > lo)) {
        free(s.v);
        return fit_overhead(f, rows, OPKIND_GRAPH_REPLAY, NULL, "graph_launch_us", e);
    }
    double *X = malloc(2 * s.n * sizeof *X), *y = malloc(s.n * sizeof *y), *w = malloc(s.n * sizeof *w);
    double *pred = malloc(s.n * sizeof *pred);
    if (!X || !y || !w || !pred) rc = err_set(e, ERR_NOMEM, "fit: out of memory");
    lsq_fit_t lf;
    for (size_t i = 0; !rc && i < s.n; i++) {
        X[2 * i] = 1;
        X[2 * i + 1] = s.v[i]->pieces > 0 ? s.v[i]->pieces : 1;
        y[i] = s.v[i]->t_med_us;
        w[i] = 1.0 / (y[i] * y[i]);
    }
    if (!rc) rc = lsq_wlinear("graph replay t = launch + nodes*node", X, y, w, s.n, 2, &lf, e);
    if (!rc) {
        double v = lf.coef[0] > 0 ? lf.coef[0] : 0;
        put(f, "graph_launch_us", v, lf.se[0], lo, hi, s.v, s.n,
            "graph replay t = launch + nodes*per_node, WLS 1/t^2 (the intercept)");
        note(f, "graph replay: %.3g us per node beyond the launch (not a profile parameter)", lf.coef[1]);
        for (size_t i = 0; i < s.n; i++) pred[i] = lf.coef[0] + lf.coef[1] * X[2 * i + 1];
        resid(f, "graph_replay", pred, y, s.n);
    }
    free(X);
    free(y);
    free(w);
    free(pred);
    free(s.v);
    return rc;
}

