#include "validation/vreport.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomicio.h"
#include "validation/plot.h"
#include "validation/vflags.h"

#ifndef ODSIM_VERSION
#define ODSIM_VERSION "unknown"
#endif

static void provenance(FILE *fp, const vreport_info_t *info, const char *comment)
{
    fprintf(fp, "%sodsim %s validate; data %s; held-out rule %s (fnv1a %016llx)\n", comment, ODSIM_VERSION,
            info->data_dir, info->heldout_path, (unsigned long long)info->heldout_hash);
    if (info->against)
        fprintf(fp, "%sno predictions: the measurements of %s stand for them (run-to-run differences)\n", comment,
                info->against);
    else
        fprintf(fp, "%scalibration %s (hash %016llx)\n", comment, info->calib_path, (unsigned long long)info->calib_hash);
}

static const char *base_name(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static void fmt_err(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%+.1f", v);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool same_kind(const cmp_case_t *a, const cmp_case_t *b)
{
    return !strcmp(a->group, b->group) && !strcmp(a->row->op_name, b->row->op_name) &&
           !strcmp(a->row->policy, b->row->policy);
}

/* Where the errors come from: p50 errors per group, op and kbench policy (signed median: the
 * direction the model errs in). */
static void by_op(FILE *fp, const cmp_t *c)
{
    size_t n = cmp_n_cases(c);
    double *e = malloc((n + 1) * sizeof *e), *a = malloc((n + 1) * sizeof *a);
    if (!e || !a) {
        free(e);
        free(a);
        return;
    }
    fprintf(fp, "\n%-22s %-14s %-22s %6s %12s %14s %11s\n", "by op (p50)", "op", "policy", "cases", "median err%",
            "median |err|%", "max |err|%");
    for (size_t i = 0; i < n; i++) {
        const cmp_case_t *ci = cmp_case_at(c, i);
        bool first = true;
        for (size_t j = 0; j < i && first; j++) first = !same_kind(cmp_case_at(c, j), ci);
        if (!first) continue;
        size_t k = 0;
        double mx = 0;
        for (size_t j = i; j < n; j++) {
            const cmp_case_t *cj = cmp_case_at(c, j);
            if (!same_kind(cj, ci) || !cj->ok || isnan(cj->err_p50_pct)) continue;
            e[k] = cj->err_p50_pct;
            a[k] = fabs(e[k]);
            mx = fmax(mx, a[k++]);
        }
        if (k) fprintf(fp, "%-22s %-14s %-22s %6zu %+12.1f %14.1f %11.1f\n", ci->group, ci->row->op_name, ci->row->policy,
                       k, median_of(e, k), median_of(a, k), mx);
    }
    free(e);
    free(a);
}

static bool extrapolates(const cmp_case_t *cs) { return !strcmp(cs->group, "context") || !strncmp(cs->group, "whole", 5); }

/* Errors against the context's ratio to the largest fitted one: per extrapolating group and ratio,
 * every compared value of its cases pooled. */
static void by_context(FILE *fp, const cmp_t *c, double fit_max)
{
    size_t n = cmp_n_cases(c);
    double *a = malloc((3 * n + 1) * sizeof *a);
    if (!a || !(fit_max > 0)) {
        free(a);
        return;
    }
    bool header = false;
    for (size_t i = 0; i < n; i++) {
        const cmp_case_t *ci = cmp_case_at(c, i);
        if (!extrapolates(ci) || isnan(ci->row->n_tokens)) continue;
        bool first = true;
        for (size_t j = 0; j < i && first; j++) {
            const cmp_case_t *cj = cmp_case_at(c, j);
            first = !(extrapolates(cj) && !strcmp(cj->group, ci->group) && cj->row->n_tokens == ci->row->n_tokens);
        }
        if (!first) continue;
        size_t k = 0, cases = 0;
        for (size_t j = i; j < n; j++) {
            const cmp_case_t *cj = cmp_case_at(c, j);
            if (strcmp(cj->group, ci->group) || cj->row->n_tokens != ci->row->n_tokens || !cj->ok) continue;
            cases++;
            double v[3] = {cj->err_p50_pct, cj->err_p99_pct, cj->err_tput_pct};
            for (int m = 0; m < 3; m++)
                if (!isnan(v[m])) a[k++] = fabs(v[m]);
        }
        if (!k) continue;
        if (!header)
            fprintf(fp, "\n%-22s %9s %12s %6s %14s %11s\n", "by context", "n_tokens", "x fit max", "cases", "median |err|%",
                    "max |err|%");
        header = true;
        double mx = 0;
        for (size_t j = 0; j < k; j++) mx = fmax(mx, a[j]);
        fprintf(fp, "%-22s %9.0f %12.3g %6zu %14.2f %11.2f\n", ci->group, ci->row->n_tokens, ci->row->n_tokens / fit_max, cases,
                median_of(a, k), mx);
    }
    if (header) fprintf(fp, "(x fit max: the case's context over the largest in the fit set, %.0f tokens)\n", fit_max);
    free(a);
}

/* ---- the strata of replay groups: serving mode and sessions ------------------------------------ */

static const char *const strata_modes[] = {"procs", "streams", "batched"};
static const char *const strata_sessions[] = {"1", "2-4", "5-16"};
enum { N_MODES = 3, N_BUCKETS = 3 };

/* A replay row's serving mode (0..2, -1 other) and sessions bucket (0: 1, 1: 2-4, 2: 5-16, -1 other),
 * from its policy "MODE:N". */
static void stratum_of(const kbrow_t *r, int *mode, int *bucket)
{
    size_t n = strcspn(r->policy, ":");
    *mode = *bucket = -1;
    for (int m = 0; m < N_MODES; m++)
        if (strlen(strata_modes[m]) == n && !strncmp(r->policy, strata_modes[m], n)) *mode = m;
    long k = r->policy[n] == ':' ? strtol(r->policy + n + 1, NULL, 10) : 0;
    *bucket = k == 1 ? 0 : k >= 2 && k <= 4 ? 1 : k >= 5 && k <= 16 ? 2 : -1;
}

static bool replay_group(const cmp_t *c, const char *group)
{
    for (size_t i = 0; i < cmp_n_cases(c); i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        if (!strcmp(cs->group, group) && cs->row->suite && !strcmp(cs->row->suite, "replay")) return true;
    }
    return false;
}

/* |error|s of group's predicted cases in a stratum (mode or bucket -1: any), p50, p99 and throughput
 * pooled: *cases, and their median and maximum into st (NAN when none). */
static void stratum_stat(const cmp_t *c, const char *group, int mode, int bucket, size_t *cases, cmp_stat_t *st)
{
    size_t n = cmp_n_cases(c), k = 0;
    double *a = malloc((3 * n + 1) * sizeof *a);
    *cases = 0;
    *st = (cmp_stat_t){0, NAN, NAN};
    for (size_t i = 0; a && i < n; i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        int m, b;
        stratum_of(cs->row, &m, &b);
        if (strcmp(cs->group, group) || !cs->ok || (mode >= 0 && m != mode) || (bucket >= 0 && b != bucket)) continue;
        (*cases)++;
        double v[3] = {cs->err_p50_pct, cs->err_p99_pct, cs->err_tput_pct};
        for (int j = 0; j < 3; j++)
            if (!isnan(v[j])) a[k++] = fabs(v[j]);
    }
    if (k) {
        double mx = 0;
        for (size_t j = 0; j < k; j++) mx = fmax(mx, a[j]);
        *st = (cmp_stat_t){k, median_of(a, k), mx};
    }
    free(a);
}

/* One stratum of a group: its label, cases and pooled |error|s. */
typedef struct stratum {
    char label[48];
    size_t cases;
    cmp_stat_t st;
} stratum_t;
enum { N_STRATA = N_MODES + N_BUCKETS + N_MODES * N_BUCKETS };

/* Group's strata into out[N_STRATA]: by sessions, by mode, then each mode by sessions. */
static void strata_of(const cmp_t *c, const char *group, stratum_t *out)
{
    size_t k = 0;
    for (int mode = -1; mode < N_MODES; mode++)
        for (int bucket = -1; bucket < N_BUCKETS; bucket++) {
            if (mode < 0 && bucket < 0) continue;
            stratum_t *s = &out[k++];
            stratum_stat(c, group, mode, bucket, &s->cases, &s->st);
            if (mode >= 0 && bucket >= 0)
                snprintf(s->label, sizeof s->label, "%s, sessions %s", strata_modes[mode], strata_sessions[bucket]);
            else if (mode >= 0) snprintf(s->label, sizeof s->label, "%s", strata_modes[mode]);
            else snprintf(s->label, sizeof s->label, "sessions %s", strata_sessions[bucket]);
        }
}

/* Each replay group by serving mode, by sessions, and by both. */
static void by_stratum(FILE *fp, const cmp_t *c)
{
    for (size_t g = 0; g < cmp_n_groups(c); g++) {
        const char *name = cmp_group_at(c, g)->name;
        if (!replay_group(c, name)) continue;
        stratum_t s[N_STRATA];
        strata_of(c, name, s);
        fprintf(fp, "\n%-22s %-26s %6s %14s %11s\n", "by stratum", "stratum", "cases", "median |err|%", "max |err|%");
        for (int i = 0; i < N_STRATA; i++)
            fprintf(fp, "%-22s %-26s %6zu %14.2f %11.2f\n", name, s[i].label, s[i].cases, s[i].st.median_abs_err_pct,
                    s[i].st.max_abs_err_pct);
    }
}

/* The strata of group as a JSON object (NULL when it holds no replay rows). */
static json_t *strata_json(const cmp_t *c, const char *group);

void vreport_text(FILE *fp, const cmp_t *c, const vreport_info_t *info)
{
    provenance(fp, info, "# ");
    fprintf(fp, "\n%-22s %-20s %-13s %9s %10s %21s %10s %7s %10s %10s %7s %11s %11s %7s\n", "group", "case", "op", "n_tokens",
            "meas p50", "(p10..p90)", "pred p50", "err%", "meas p99", "pred p99", "err%", "meas tput/s", "pred tput/s", "err%");
    for (size_t i = 0; i < cmp_n_cases(c); i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        char where[64], e1[16], e2[16], e3[16], sp[48];
        snprintf(where, sizeof where, "%s:%d", base_name(cs->row->file), cs->row->line);
        snprintf(sp, sizeof sp, "(%.4g..%.4g)", cs->meas_p10_us, cs->meas_p90_us);
        fmt_err(e1, sizeof e1, cs->err_p50_pct);
        fmt_err(e2, sizeof e2, cs->err_p99_pct);
        fmt_err(e3, sizeof e3, cs->err_tput_pct);
        fprintf(fp, "%-22s %-20s %-13s %9.0f %10.4g %21s %10.4g %7s %10.4g %10.4g %7s %11.4g %11.4g %7s%s\n", cs->group, where,
                cs->row->op_name, cs->row->n_tokens, cs->meas_p50_us, sp, cs->pred.p50_us, e1, cs->meas_p99_us,
                cs->pred.p99_us, e2, cs->meas_tput_per_s, cs->pred.tput_per_s, e3, cs->flagged ? "  [flagged]" : "");
        if (!cs->ok) fprintf(fp, "%-22s   no prediction: %s\n", "", cs->error);
    }
    fprintf(fp, "\n%-24s %6s %7s %8s %14s %14s %12s %12s %12s %13s\n", "group summary", "cases", "failed", "flagged",
            "median |err|%", "max |err|%", "p50 med/max", "p99 med/max", "tput med/max", "beyond floor");
    for (size_t i = 0; i < cmp_n_groups(c); i++) {
        const cmp_group_t *g = cmp_group_at(c, i);
        char a[32], b[32], d[32], f[48] = "-";
        if (g->n_floored) snprintf(f, sizeof f, "%zu/%zu", g->n_beyond, g->n_floored);
        snprintf(a, sizeof a, "%.1f/%.1f", g->p50.median_abs_err_pct, g->p50.max_abs_err_pct);
        snprintf(b, sizeof b, "%.1f/%.1f", g->p99.median_abs_err_pct, g->p99.max_abs_err_pct);
        snprintf(d, sizeof d, "%.1f/%.1f", g->tput.median_abs_err_pct, g->tput.max_abs_err_pct);
        fprintf(fp, "%-24s %6zu %7zu %8zu %14.2f %14.2f %12s %12s %12s %13s\n", g->name, g->n_cases, g->n_failed,
                g->n_flagged, g->all.median_abs_err_pct, g->all.max_abs_err_pct, a, b, d, f);
    }
    by_op(fp, c);
    by_context(fp, c, info->fit_max_n_tokens);
    by_stratum(fp, c);
    vflags_text(fp, c);
}

static json_t *num_or_null(double v) { return isnan(v) || isinf(v) ? json_null() : json_real(v); }

static json_t *stat_json(const cmp_stat_t *s)
{
    return json_pack("{s:I,s:o,s:o}", "n", (json_int_t)s->n, "median_abs_err_pct", num_or_null(s->median_abs_err_pct),
                     "max_abs_err_pct", num_or_null(s->max_abs_err_pct));
}

static json_t *strata_json(const cmp_t *c, const char *group)
{
    if (!replay_group(c, group)) return NULL;
    stratum_t s[N_STRATA];
    strata_of(c, group, s);
    json_t *o = json_object();
    for (int i = 0; o && i < N_STRATA; i++) {
        json_t *j = stat_json(&s[i].st);
        json_object_set_new(j, "cases", json_integer((json_int_t)s[i].cases));
        json_object_set_new(o, s[i].label, j);
    }
    return o;
}

int vreport_json(const cmp_t *c, const vreport_info_t *info, char **out, err_t *e)
{
    char hash[32], hhash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)info->calib_hash);
    snprintf(hhash, sizeof hhash, "%016llx", (unsigned long long)info->heldout_hash);
    json_t *summary = json_object(), *cases = json_array();
    for (size_t i = 0; summary && i < cmp_n_groups(c); i++) {
        const cmp_group_t *g = cmp_group_at(c, i);
        json_object_set_new(summary, g->name,
                            json_pack("{s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:{s:I,s:I}}", "n", (json_int_t)g->n_cases,
                                      "failed", (json_int_t)g->n_failed, "flagged", (json_int_t)g->n_flagged,
                                      "median_abs_err_pct", num_or_null(g->all.median_abs_err_pct), "max_abs_err_pct",
                                      num_or_null(g->all.max_abs_err_pct), "p50", stat_json(&g->p50), "p99",
                                      stat_json(&g->p99), "throughput", stat_json(&g->tput), "beyond_floor", "n",
                                      (json_int_t)g->n_beyond, "of", (json_int_t)g->n_floored));
        json_t *strata = strata_json(c, g->name);
        if (strata) json_object_set_new(json_object_get(summary, g->name), "strata", strata);
    }
    for (size_t i = 0; cases && i < cmp_n_cases(c); i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        json_t *m = json_pack("{s:o,s:o,s:o,s:o,s:o}", "p50_us", num_or_null(cs->meas_p50_us), "p10_us",
                              num_or_null(cs->meas_p10_us), "p90_us", num_or_null(cs->meas_p90_us), "p99_us",
                              num_or_null(cs->meas_p99_us), "throughput_per_s", num_or_null(cs->meas_tput_per_s));
        json_t *p = json_pack("{s:o,s:o,s:o}", "p50_us", num_or_null(cs->pred.p50_us), "p99_us", num_or_null(cs->pred.p99_us),
                              "throughput_per_s", num_or_null(cs->pred.tput_per_s));
        json_t *er = json_pack("{s:o,s:o,s:o}", "p50_pct", num_or_null(cs->err_p50_pct), "p99_pct",
                               num_or_null(cs->err_p99_pct), "throughput_pct", num_or_null(cs->err_tput_pct));
        json_t *fl = json_pack("{s:o,s:o,s:o}", "p50_pct", num_or_null(cs->floor_p50_pct), "p99_pct",
                               num_or_null(cs->floor_p99_pct), "throughput_pct", num_or_null(cs->floor_tput_pct));
        json_t *cl = json_pack("{s:s,s:o,s:o,s:o,s:o,s:s}", "params", cs->clamped, "p50_us", num_or_null(cs->pred_clamped.p50_us),
                               "p99_us", num_or_null(cs->pred_clamped.p99_us), "throughput_per_s",
                               num_or_null(cs->pred_clamped.tput_per_s), "shift_pct", num_or_null(cs->clamp_shift_pct),
                               "flagged_by", cs->flagged_by);
        json_array_append_new(cases, json_pack("{s:s,s:s,s:i,s:s,s:s,s:s,s:o,s:b,s:s,s:o,s:o,s:o,s:o,s:s,s:b,s:o,s:s}", "group",
                                               cs->group, "file", cs->row->file, "line", cs->row->line, "suite",
                                               cs->row->suite, "op", cs->row->op_name, "policy", cs->row->policy,
                                               "n_tokens", num_or_null(cs->row->n_tokens), "ok", cs->ok, "error",
                                               cs->error, "measured", m, "predicted", p, "error_pct", er, "floor_pct", fl,
                                               "flags", cs->flags, "flagged", cs->flagged, "clamped", cl,
                                               "scenario", cs->scenario));
    }
    json_t *flags = vflags_json(c);
    json_t *root = summary && cases && flags
                       ? json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:s,s:o,s:o,s:o}", "odsim", ODSIM_VERSION, "data", info->data_dir,
                                   "calibration", info->calib_path, "calibration_hash", hash, "against",
                                   info->against ? json_string(info->against) : json_null(), "heldout", info->heldout_path,
                                   "heldout_fnv1a", hhash, "summary", summary, "flags", flags, "cases", cases)
                       : NULL;
    if (!root) {
        json_decref(summary);
        json_decref(cases);
        json_decref(flags);
        return err_set(e, ERR_NOMEM, "validate: out of memory (JSON)");
    }
    *out = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    json_decref(root);
    return *out ? ERR_OK : err_set(e, ERR_NOMEM, "validate: out of memory (JSON)");
}

static void csv_num(FILE *fp, double v)
{
    if (!isnan(v)) fprintf(fp, "%.8g", v);
    fputc(',', fp);
}

int vreport_csv(const char *path, const cmp_t *c, const vreport_info_t *info, err_t *e)
{
    atomicio_t *a = NULL;
    int rc = atomicio_open(path, &a, e);
    if (rc) return rc;
    FILE *fp = atomicio_file(a);
    provenance(fp, info, "# ");
    fputs("group,file,line,suite,op,policy,n_tokens,ok,meas_p50_us,meas_p10_us,meas_p90_us,meas_p99_us,meas_tput_per_s,"
          "pred_p50_us,pred_p99_us,pred_tput_per_s,err_p50_pct,err_p99_pct,err_tput_pct,flagged,floor_p50_pct,"
          "floor_p99_pct,floor_tput_pct\n",
          fp);
    for (size_t i = 0; i < cmp_n_cases(c); i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        fprintf(fp, "%s,%s,%d,%s,%s,%s,", cs->group, cs->row->file, cs->row->line, cs->row->suite, cs->row->op_name,
                cs->row->policy);
        csv_num(fp, cs->row->n_tokens);
        fprintf(fp, "%d,", cs->ok);
        double v[] = {cs->meas_p50_us, cs->meas_p10_us, cs->meas_p90_us, cs->meas_p99_us, cs->meas_tput_per_s,
                      cs->pred.p50_us, cs->pred.p99_us, cs->pred.tput_per_s, cs->err_p50_pct, cs->err_p99_pct,
                      cs->err_tput_pct};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) csv_num(fp, v[k]);
        fprintf(fp, "%d,", cs->flagged);
        csv_num(fp, cs->floor_p50_pct);
        csv_num(fp, cs->floor_p99_pct);
        if (!isnan(cs->floor_tput_pct)) fprintf(fp, "%.8g", cs->floor_tput_pct);
        fputc('\n', fp);
    }
    return atomicio_commit(a, e);
}

int vreport_plot(const char *dir, const cmp_t *c, char *note, size_t note_len, err_t *e)
{
    size_t ng = cmp_n_groups(c), n = cmp_n_cases(c);
    const char **names = malloc((ng + 1) * sizeof *names);
    plot_point_t *pts = malloc((n + 1) * sizeof *pts);
    if (!names || !pts) {
        free(names);
        free(pts);
        return err_set(e, ERR_NOMEM, "validate: out of memory (plot)");
    }
    for (size_t g = 0; g < ng; g++) names[g] = cmp_group_at(c, g)->name;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const cmp_case_t *cs = cmp_case_at(c, i);
        if (!cs->ok) continue;
        size_t g = 0;
        while (g < ng && strcmp(names[g], cs->group)) g++;
        pts[k++] = (plot_point_t){g, cs->meas_p50_us, cs->meas_p10_us, cs->meas_p90_us, cs->pred.p50_us};
    }
    int rc = plot_pred_vs_meas(dir, "validate", "p50 (us; bars: measured p10..p90)", names, ng, pts, k, note, note_len, e);
    free(names);
    free(pts);
    return rc;
}
