/* qest — the quality estimates over a key source (see qest.h). */
#include "cli/qest.h"
#include "models/method_ops.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The selections the estimator runs, each a kernels/ref selection with its default settings (bits,
 * or pages for landmarks; 0 ends; a single 0: none); -1 for one it cannot estimate (learned
 * signatures). exact (the top-k itself) and lsh (untrained signatures) are estimator references,
 * not odsim methods. */
static const struct {
    int kind;
    double dflt[8];
} selections[] = {
    {KREF_SEL_DENSE, {0}},
    {KREF_SEL_EXACT, {0}},
    {KREF_SEL_PERTOKEN, {34, 68, 136}},
    {KREF_SEL_SPARQ, {34, 68, 136}},
    {KREF_SEL_FATHOM, {34, 46, 56, 68, 74, 92, 136}},
    {KREF_SEL_LANDMARK, {8, 16, 32}},
    {KREF_SEL_LSH, {32, 64, 128, 256, 512}},
    {-1, {0}},
};
#define N_SELECTIONS (sizeof selections / sizeof selections[0])

/* A registered method's selection, from its table's traits (models/method_ops.h). */
static int kind_of(const method_ops_t *ops)
{
    if (ops->reads_all) return KREF_SEL_DENSE;
    if (ops->planner) return KREF_SEL_FATHOM;
    if (ops->pages) return KREF_SEL_LANDMARK;
    if (ops->select == SELECT_QUERY_HEAD) return -1;   /* per-query-head learned signatures */
    if (ops->query_dependent) return KREF_SEL_SPARQ;
    return KREF_SEL_PERTOKEN;
}

/* The estimator's name of selection i: the registered method of its kind, or its reference name. */
static const char *name_of(size_t i)
{
    if (selections[i].kind == KREF_SEL_EXACT) return "exact";
    if (selections[i].kind == KREF_SEL_LSH) return "lsh";
    for (int m = 0; m < method_count(); m++)
        if (kind_of(method_ops_at(m)) == selections[i].kind) return method_ops_at(m)->name;
    return NULL;
}

size_t qest_n_defaults(void) { return N_SELECTIONS; }
const char *qest_default_method(size_t i) { return i < N_SELECTIONS ? name_of(i) : NULL; }

static int add_row(const char *name, int kind, double setting, qest_row_t *rows, size_t *n, err_t *e)
{
    if (*n == QEST_MAX_ROWS) return err_set(e, ERR_RANGE, "quality: more than %d rows", QEST_MAX_ROWS);
    qest_row_t *r = &rows[(*n)++];
    memset(r, 0, sizeof *r);
    r->method = name;
    r->kind = kind;
    if (kind == KREF_SEL_LANDMARK) r->page = (int)setting;
    else r->budget_bits = setting;
    if (kind < 0)
        r->why = "not comparable: HashAttention's signatures are learned (two small networks per layer); odsim "
                 "trains none, so it gives no estimate (lsh is the untrained counterpart)";
    return ERR_OK;
}

int qest_add_rows(const char *spec, qest_row_t *rows, size_t *n, err_t *e)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    size_t m = 0;
    for (; m < N_SELECTIONS; m++) {
        const char *nm = name_of(m);
        if (nm && strlen(nm) == len && !strncmp(nm, spec, len)) break;
    }
    if (m == N_SELECTIONS) {
        char known[256] = "";
        for (size_t i = 0; i < N_SELECTIONS; i++)
            if (name_of(i)) snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? " " : "", name_of(i));
        return err_set(e, ERR_INVAL, "quality: unknown method in '%s' (known: %s)", spec, known);
    }
    const char *name = name_of(m);
    bool setting = selections[m].dflt[0] > 0;
    if (colon && !setting)
        return err_set(e, ERR_INVAL, "quality: '%s': %s takes no setting", spec, name);
    if (!colon) {
        if (!setting) return add_row(name, selections[m].kind, 0, rows, n, e);
        for (int i = 0; i < 8 && selections[m].dflt[i] > 0; i++) {
            int rc = add_row(name, selections[m].kind, selections[m].dflt[i], rows, n, e);
            if (rc) return rc;
        }
        return ERR_OK;
    }
    const char *p = colon + 1;
    do {
        char *end;
        double v = strtod(p, &end);
        bool whole = selections[m].kind != KREF_SEL_LANDMARK && selections[m].kind != KREF_SEL_LSH ? true : v == floor(v);
        if (end == p || (*end && *end != ',') || !(v > 0) || v > 1e6 || !whole)
            return err_set(e, ERR_INVAL, "quality: '%s': settings are positive numbers separated by commas%s", spec,
                           whole ? "" : " (whole numbers for landmark pages and lsh bits)");
        int rc = add_row(name, selections[m].kind, v, rows, n, e);
        if (rc) return rc;
        p = *end ? end + 1 : end;
    } while (*p);
    return ERR_OK;
}

static void stat_add(qest_stat_t *s, double v)
{
    s->sum += v;
    s->sum2 += v * v;
}

void qest_mean_se(const qest_row_t *r, const qest_stat_t *s, double *mean, double *se)
{
    double n = (double)r->n;
    *mean = n > 0 ? s->sum / n : NAN;
    double var = n > 1 ? (s->sum2 - s->sum * s->sum / n) / (n - 1) : 0;
    *se = n > 1 && var > 0 ? sqrt(var / n) : 0;
}

/* Sets why (into r->note) when a row's setting does not apply to keys of dim channels and n tokens. */
static void check_applies(qest_row_t *r, int dim, size_t n)
{
    double ch = floor(r->budget_bits / KREF_SEL_CHAN_BITS + 1e-9);
    if ((r->kind == KREF_SEL_PERTOKEN || r->kind == KREF_SEL_SPARQ) && (ch < 1 || ch > dim))
        snprintf(r->note, sizeof r->note, "not applicable: %g bits read %g channels at 4.25 bits each; the keys have %d",
                 r->budget_bits, ch, dim);
    else if (r->kind == KREF_SEL_FATHOM && r->budget_bits < 1.25)
        snprintf(r->note, sizeof r->note, "not applicable: %g bits are below one plane and its scale (1.25)", r->budget_bits);
    else if (r->kind == KREF_SEL_LSH && r->budget_bits > KREF_SEL_LSH_MAX_BITS)
        snprintf(r->note, sizeof r->note, "not applicable: more than %d signature bits", KREF_SEL_LSH_MAX_BITS);
    else if (r->kind == KREF_SEL_LANDMARK && (size_t)r->page > n)
        snprintf(r->note, sizeof r->note, "not applicable: pages of %d tokens, contexts of %zu", r->page, n);
    else return;
    r->why = r->note;
}

/* One (layer, KV head) of the source: keys, queries (steps × group × dim) and values. */
static int load(const qest_source_t *src, size_t entry, uint64_t seed, float **k, float **q, float **v, size_t *n,
                int *dim, size_t *steps, int *group, bool *drawn, err_t *e)
{
    *drawn = false;
    if (src->synth) {
        const kvsynth_params_t *p = src->synth;
        *n = (size_t)p->tokens;
        *dim = (int)p->head_dim;
        *steps = (size_t)p->steps;
        *group = (int)p->group;
        *k = malloc(*n * *dim * sizeof **k);
        *v = malloc(*n * *dim * sizeof **v);
        *q = malloc(*steps * *group * *dim * sizeof **q);
        if (!*k || !*v || !*q) return err_set(e, ERR_NOMEM, "quality: out of memory");
        return kvsynth_head(p, (int)(entry / p->kv_heads), (int)(entry % p->kv_heads), *k, *q, *v, e);
    }
    int rc = kvdump_load(src->dump, entry, k, n, dim, q, steps, group, v, e);
    if (rc || *v) return rc;
    *drawn = true;
    *v = malloc(*n * *dim * sizeof **v);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!*v || !r) {
        gsl_rng_free(r);
        return err_set(e, ERR_NOMEM, "quality: out of memory");
    }
    gsl_rng_set(r, (unsigned long)(seed * 1000003u + entry));
    for (size_t i = 0; i < *n * (size_t)*dim; i++) (*v)[i] = (float)gsl_ran_gaussian_ziggurat(r, 1.0);
    gsl_rng_free(r);
    return ERR_OK;
}

/* Every row over the steps of one (layer, KV head). */
static int run_entry(const qest_opts_t *o, qest_row_t *rows, size_t n_rows, size_t entry, const float *k,
                     float *q, const float *v, size_t n, int dim, size_t steps, int group, int kk_k, err_t *e)
{
    for (size_t i = 0; i < steps * group * (size_t)dim; i++) q[i] /= sqrtf((float)dim);   /* logits q.k/sqrt(d) */
    kref_sel_keys_t kk;
    uint32_t *sel = malloc(n * (size_t)group * sizeof *sel);
    size_t *nsel = malloc((size_t)group * sizeof *nsel);
    double *err_sum = calloc(n_rows, sizeof *err_sum);
    int rc = sel && nsel && err_sum ? kref_sel_keys_init(&kk, k, n, dim, q, steps * group) : -1;
    int lsh_bits = 0;   /* the most any row asks: the others reuse their prefix */
    for (size_t r = 0; r < n_rows; r++)
        if (rows[r].kind == KREF_SEL_LSH && !rows[r].why && rows[r].budget_bits > lsh_bits) lsh_bits = (int)rows[r].budget_bits;
    if (!rc && lsh_bits) rc = kref_sel_lsh_build(&kk, lsh_bits, o->seed);
    if (rc) {
        free(sel), free(nsel), free(err_sum);
        return err_set(e, ERR_NOMEM, "quality: out of memory");
    }
    for (size_t s = 0; !rc && s < steps; s++) {
        const float *qs = q + s * group * dim;
        kref_sel_truth_t tr;
        rc = kref_sel_truth(&kk, v, qs, group, kk_k, o->per_head, &tr);
        for (size_t r = 0; !rc && r < n_rows; r++) {
            qest_row_t *row = &rows[r];
            if (row->kind < 0 || row->why) continue;
            kref_sel_cfg_t c = {(kref_sel_method_t)row->kind, kk_k, row->budget_bits, row->page, o->per_head, o->seed};
            kref_sel_info_t info;
            kref_sel_metrics_t m;
            rc = kref_sel_select(&kk, qs, group, &c, sel, nsel, &info);
            if (!rc) rc = kref_sel_measure(&tr, sel, kref_sel_cap(&kk, &c), nsel, &m);
            if (rc) break;
            row->n++;
            stat_add(&row->recall, m.recall);
            stat_add(&row->kept_mass, m.kept_mass);
            stat_add(&row->attn_error, m.attn_error);
            row->read_bits += info.read_bits;
            row->plane_bits += info.plane_bits;
            row->active += info.active;
            for (int set = 0; set < (o->per_head ? group : 1); set++)
                row->tokens += (double)nsel[set] / (o->per_head ? group : 1);
            err_sum[r] += m.attn_error;
        }
        kref_sel_truth_free(&tr);
    }
    for (size_t r = 0; !rc && r < n_rows; r++)
        if (rows[r].entry_error) rows[r].entry_error[entry] = err_sum[r] / (double)steps;
    kref_sel_keys_free(&kk);
    free(sel), free(nsel), free(err_sum);
    return rc ? err_set(e, rc == -1 ? ERR_NOMEM : ERR_INVAL, "quality: selection failed (%s)",
                        rc == -1 ? "out of memory" : "bad configuration") : ERR_OK;
}

int qest_run(const qest_source_t *src, const qest_opts_t *o, qest_row_t *rows, size_t n_rows, qest_summary_t *sum,
             err_t *e)
{
    memset(sum, 0, sizeof *sum);
    sum->n_min = SIZE_MAX;
    sum->k_min = INT32_MAX;
    for (size_t r = 0; r < n_rows; r++) {
        rows[r].entry_error = calloc(src->entries, sizeof *rows[r].entry_error);
        if (!rows[r].entry_error) return err_set(e, ERR_NOMEM, "quality: out of memory");
    }
    int rc = ERR_OK;
    for (size_t en = 0; !rc && en < src->entries; en++) {
        float *k = NULL, *q = NULL, *v = NULL;
        size_t n = 0, steps = 0;
        int dim = 0, group = 0;
        bool drawn;
        rc = load(src, en, o->seed, &k, &q, &v, &n, &dim, &steps, &group, &drawn, e);
        int kk_k = o->k > 0 ? o->k : (int)((n + o->sparsity - 1) / o->sparsity);
        kk_k = (size_t)kk_k > n ? (int)n : kk_k;
        for (size_t r = 0; !rc && r < n_rows; r++)
            if (!rows[r].why) check_applies(&rows[r], dim, n);
        if (!rc) rc = run_entry(o, rows, n_rows, en, k, q, v, n, dim, steps, group, kk_k, e);
        if (!rc) {
            sum->entries++;
            sum->steps += steps;
            sum->dim = dim;
            sum->group = group;
            sum->n_min = n < sum->n_min ? n : sum->n_min;
            sum->n_max = n > sum->n_max ? n : sum->n_max;
            sum->k_min = kk_k < sum->k_min ? kk_k : sum->k_min;
            sum->k_max = kk_k > sum->k_max ? kk_k : sum->k_max;
            sum->values_drawn |= drawn;
        }
        free(k), free(q), free(v);
    }
    for (size_t r = 0; !rc && r < n_rows; r++)
        if (rows[r].n) {
            rows[r].read_bits /= (double)rows[r].n;
            rows[r].plane_bits /= (double)rows[r].n;
            rows[r].active /= (double)rows[r].n;
            rows[r].tokens /= (double)rows[r].n;
        }
    return rc;
}

void qest_rows_free(qest_row_t *rows, size_t n)
{
    for (size_t r = 0; r < n; r++) {
        free(rows[r].entry_error);
        rows[r].entry_error = NULL;
    }
}
