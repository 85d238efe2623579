#include "cli/report.h"
#include "common/version.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/gnuplot.h"
#include "common/outset.h"

/* ---- text ----------------------------------------------------------------------------------- */

/* Seconds with an SI prefix by magnitude: "12.3 ms", "-209 ms" (an interval's bound). */
static const char *fmt_s(char *buf, size_t n, double s)
{
    double a = fabs(s);
    if (!isfinite(s)) snprintf(buf, n, "-");
    else if (s == 0) snprintf(buf, n, "0 s");
    else if (a < 1e-6) snprintf(buf, n, "%.3g ns", s * 1e9);
    else if (a < 1e-3) snprintf(buf, n, "%.3g us", s * 1e6);
    else if (a < 1) snprintf(buf, n, "%.3g ms", s * 1e3);
    else snprintf(buf, n, "%.3g s", s);
    return buf;
}

/* " [lo, hi]" when the interval exists, ", k of R replications" when some gave no sample. */
static void text_interval(FILE *fp, study_stat_t st, uint32_t reps, const char *lo, const char *hi)
{
    if (!isnan(st.lo)) fprintf(fp, " [%s, %s]", lo, hi);
    if (st.n && st.n < reps) fprintf(fp, " (%u of %u replications)", st.n, reps);
}

static void text_stat_s(FILE *fp, const char *name, study_stat_t st, uint32_t reps)
{
    char a[32], b[32], c[32];
    if (isnan(st.mean)) {
        fprintf(fp, " %s n/a", name);
        return;
    }
    fprintf(fp, " %s %s", name, fmt_s(a, sizeof a, st.mean));
    text_interval(fp, st, reps, fmt_s(b, sizeof b, st.lo), fmt_s(c, sizeof c, st.hi));
}

static void text_stat(FILE *fp, const char *name, study_stat_t st, uint32_t reps, const char *unit)
{
    char b[32], c[32];
    if (isnan(st.mean)) {
        fprintf(fp, " %s n/a", name);
        return;
    }
    fprintf(fp, " %s %.4g%s", name, st.mean, unit);
    snprintf(b, sizeof b, "%.4g", st.lo);
    snprintf(c, sizeof c, "%.4g", st.hi);
    text_interval(fp, st, reps, b, c);
}

/* The latency, TTFT, rate and SLO figures of the whole study or of a class: what text_latency prints. */
typedef struct figs {
    study_stat_t step_p50_s, step_p95_s, step_p99_s, ttft_p50_s, ttft_p95_s, ttft_p99_s, tps_session_mean, tps_total,
        slo_attainment;
    bool slo_met;
} figs_t;

#define FIGS_OF(x) ((figs_t){(x)->step_p50_s, (x)->step_p95_s, (x)->step_p99_s, (x)->ttft_p50_s, (x)->ttft_p95_s, \
                             (x)->ttft_p99_s, (x)->tps_session_mean, (x)->tps_total, (x)->slo_attainment, (x)->slo_met})

/* `in` indents every line after the first two spaces more (a class's block). */
static void text_latency(FILE *fp, figs_t f, uint32_t reps, const char *in, const char *box)
{
    fprintf(fp, "  %sstep latency  ", in);
    text_stat_s(fp, "p50", f.step_p50_s, reps);
    text_stat_s(fp, "p95", f.step_p95_s, reps);
    text_stat_s(fp, "p99", f.step_p99_s, reps);
    if (!f.step_p50_s.n) fprintf(fp, " (no decode step finished)");
    fprintf(fp, "\n  %sTTFT per turn ", in);
    text_stat_s(fp, "p50", f.ttft_p50_s, reps);
    text_stat_s(fp, "p95", f.ttft_p95_s, reps);
    text_stat_s(fp, "p99", f.ttft_p99_s, reps);
    if (!f.ttft_p50_s.n) fprintf(fp, " (no turn's first token)");
    fprintf(fp, "\n  %stokens/s      ", in);
    text_stat(fp, "per session", f.tps_session_mean, reps, "");
    text_stat(fp, box, f.tps_total, reps, "");
    fprintf(fp, "\n  %sSLO           ", in);
    text_stat(fp, "turns meeting it", f.slo_attainment, reps, "");
    if (!f.slo_attainment.n) fprintf(fp, " (no turn judged)");
    fprintf(fp, " -> %s\n", f.slo_met ? "met (in >= 95% of replications)" : "NOT met");
}

/* Each session class's block: its sessions and figures, as the whole study's above it. */
static void text_classes(FILE *fp, const study_result_t *r)
{
    for (size_t c = 0; c < r->n_classes; c++) {
        const study_class_result_t *cr = &r->classes[c];
        fprintf(fp, "  class %s (share %.4g, method %s): sessions %llu, turns done %llu, decode tokens %llu, "
                "prefill tokens %llu\n", cr->name, cr->share, cr->method, (unsigned long long)cr->sessions,
                (unsigned long long)cr->turns, (unsigned long long)cr->decode_tokens, (unsigned long long)cr->prefill_tokens);
        text_latency(fp, FIGS_OF(cr), r->replications, "  ", "class on the box");
        if (cr->preemptions || cr->evictions || cr->waiting)
            fprintf(fp, "    memory        preemptions %llu, evictions %llu, waiting for memory at the end %llu\n",
                    (unsigned long long)cr->preemptions, (unsigned long long)cr->evictions, (unsigned long long)cr->waiting);
    }
}

static void text_resources(FILE *fp, const study_result_t *r)
{
    char a[32], b[32];
    fprintf(fp, "  memory         HBM peak %.1f of %.1f GB per GPU; host DRAM peak %.1f of %.1f GB", r->hbm_peak_bytes / 1e9,
            r->hbm_capacity_bytes / 1e9, r->host_peak_bytes / 1e9, r->host_capacity_bytes / 1e9);
    if (r->cxl_capacity_bytes > 0) fprintf(fp, "; CXL tier peak %.1f of %.1f GB", r->cxl_peak_bytes / 1e9, r->cxl_capacity_bytes / 1e9);
    fputc('\n', fp);
    const char *ge = r->admit_never ? ">= " : "";
    fprintf(fp, "  admission      wait p50 %s%s p99 %s%s", ge, isnan(r->admit_wait_p50_s) ? "n/a" : fmt_s(a, sizeof a, r->admit_wait_p50_s),
            ge, isnan(r->admit_wait_p99_s) ? "n/a" : fmt_s(b, sizeof b, r->admit_wait_p99_s));
    if (r->admit_never) fprintf(fp, " (%llu never admitted: their waits so far count)", (unsigned long long)r->admit_never);
    fprintf(fp, "; preemptions %llu, evictions %llu, waiting for memory at the end %llu\n", (unsigned long long)r->preemptions,
            (unsigned long long)r->evictions, (unsigned long long)r->waiting);
    fprintf(fp, "  utilisation   ");
    for (size_t i = 0; i < r->n_res; i++)
        if (r->res[i].utilisation >= 0.005) fprintf(fp, " %s %.0f%%", r->res[i].name, 100 * r->res[i].utilisation);
    fprintf(fp, " launch-thread %.0f%%; busiest %s\n", 100 * r->launch_utilisation, r->binding ? r->binding : "-");
    fprintf(fp, "  where time went per plan: alone %s;", fmt_s(a, sizeof a, r->standalone_step_s));
    for (size_t i = 0; i < r->n_lost; i++)
        if (r->lost[i].per_step_s > 0.001 * r->standalone_step_s && r->lost[i].per_step_s > 0)
            fprintf(fp, " %s +%s", r->lost[i].name, fmt_s(a, sizeof a, r->lost[i].per_step_s));
    fputc('\n', fp);
}

/* The widest relative half-width among the headline figures, and its figure's name. */
static double widest_ci(const study_result_t *r, const char **name)
{
    const struct { const char *name; study_stat_t st; } f[] = {
        {"step p50", r->step_p50_s}, {"step p99", r->step_p99_s}, {"TTFT p50", r->ttft_p50_s},
        {"TTFT p99", r->ttft_p99_s}, {"tokens/s per session", r->tps_session_mean}};
    double w = 0;
    *name = "-";
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        double h = isnan(f[i].st.lo) ? INFINITY : (f[i].st.hi - f[i].st.mean) / fabs(f[i].st.mean);
        if (f[i].st.n && !(h <= w)) w = h, *name = f[i].name;
    }
    return w;
}

/* run.duration_s auto and run.ci_target: how long the replications ran, whether steady, how many. */
static void text_run(FILE *fp, const study_result_t *r)
{
    char a[32];
    double lo = INFINITY, hi = 0, warm = INFINITY, turn = 0;
    for (uint32_t k = 0; k < r->replications; k++) {
        const double *f = r->rep_figs + (size_t)k * STUDY_REP_N;
        lo = fmin(lo, f[STUDY_REP_DURATION_S]);
        hi = fmax(hi, f[STUDY_REP_DURATION_S]);
        warm = fmin(warm, f[STUDY_REP_WARMUP_S]);
        if (k == 0) turn = f[STUDY_REP_MEAN_TURN_S];
    }
    if (r->duration_auto && r->transient)
        fprintf(fp, "  transient: %.3g turns: a replication's window spanned %.3g of the %.4g mean turn durations asked "
                "(run.steady_turns) within run.max_duration_s; not judged against the SLO\n", r->window_turns,
                r->window_turns, r->steady_turns);
    else if (r->duration_auto)
        fprintf(fp, "  steady state   windows of >= %.3g mean turns (%s each in the first replication) after >= %.4g s "
                "warm-up; replications of %.4g to %.4g s simulated\n", r->window_turns,
                isnan(turn) ? "n/a" : fmt_s(a, sizeof a, turn), warm, lo, hi);
    if (r->ci_target > 0) {
        const char *name;
        double w = widest_ci(r, &name);
        fprintf(fp, "  replications   %u: headline intervals within +-%.3g%% %s", r->replications, 100 * r->ci_target,
                r->ci_reached ? "(run.ci_target reached)" : "NOT reached");
        if (!r->ci_reached) fprintf(fp, isfinite(w) ? " (widest: %s +-%.3g%%)" : " (%s: no interval)", name, 100 * w);
        fputc('\n', fp);
    }
}

void report_text(FILE *fp, const study_t *s, size_t i, const study_result_t *r)
{
    if (r->duration_auto)
        fprintf(fp, "point %zu: %s  (%u replication%s, each until steady)\n", i, study_point_label(s, i), r->replications,
                r->replications == 1 ? "" : "s");
    else
        fprintf(fp, "point %zu: %s  (%u replication%s of %.4g s simulated)\n", i, study_point_label(s, i), r->replications,
                r->replications == 1 ? "" : "s", r->duration_s);
    fprintf(fp, "  sessions %llu, turns done %llu, decode tokens %llu, prefill tokens %llu\n",
            (unsigned long long)r->sessions, (unsigned long long)r->turns, (unsigned long long)r->decode_tokens,
            (unsigned long long)r->prefill_tokens);
    if (r->rep_figs) text_run(fp, r);
    if (r->placement) fprintf(fp, "  placement      %s\n", r->placement);
    text_latency(fp, FIGS_OF(r), r->replications, "", "box");
    text_resources(fp, r);
    text_classes(fp, r);
    if (r->flags && *r->flags) fprintf(fp, "  calibration parameters assumed or used outside their fitted range:\n%s", r->flags);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

json_t *report_num(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *stat_json(study_stat_t st)
{
    /* no sample (mean) or fewer than two (the interval): null, never 0 */
    json_t *o = json_object();
    json_object_set_new(o, "mean", isnan(st.mean) ? json_null() : json_real(st.mean));
    json_object_set_new(o, "ci95_lo", isnan(st.lo) ? json_null() : json_real(st.lo));
    json_object_set_new(o, "ci95_hi", isnan(st.hi) ? json_null() : json_real(st.hi));
    json_object_set_new(o, "n", json_integer(st.n));
    return o;
}

static json_t *resources_json(const study_result_t *r)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < r->n_res; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:f,s:f,s:f}", "name", r->res[i].name, "unit", r->res[i].unit,
                                           "capacity_per_s", r->res[i].capacity, "utilisation", r->res[i].utilisation,
                                           "work", r->res[i].work));
    return a;
}

static json_t *lost_json(const study_result_t *r)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < r->n_lost; i++) json_object_set_new(o, r->lost[i].name, json_real(r->lost[i].per_step_s));
    return o;
}

/* The classes' figures, keyed as the whole study's are. */
static json_t *classes_json(const study_result_t *r)
{
    json_t *a = json_array();
    for (size_t c = 0; a && c < r->n_classes; c++) {
        const study_class_result_t *cr = &r->classes[c];
        json_array_append_new(
            a, json_pack("{s:s,s:f,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b}",
                         "name", cr->name, "share", cr->share, "method", cr->method, "sessions", (json_int_t)cr->sessions,
                         "turns", (json_int_t)cr->turns, "decode_tokens", (json_int_t)cr->decode_tokens, "prefill_tokens",
                         (json_int_t)cr->prefill_tokens, "preemptions", (json_int_t)cr->preemptions, "evictions",
                         (json_int_t)cr->evictions, "waiting_for_memory", (json_int_t)cr->waiting, "step_p50_s",
                         stat_json(cr->step_p50_s), "step_p95_s", stat_json(cr->step_p95_s), "step_p99_s",
                         stat_json(cr->step_p99_s), "step_mean_s", stat_json(cr->step_mean_s), "ttft_p50_s",
                         stat_json(cr->ttft_p50_s), "ttft_p95_s", stat_json(cr->ttft_p95_s), "ttft_p99_s",
                         stat_json(cr->ttft_p99_s), "prefill_chunk_p50_s", stat_json(cr->prefill_p50_s),
                         "prefill_chunk_p99_s", stat_json(cr->prefill_p99_s), "tokens_per_s_per_session",
                         stat_json(cr->tps_session_mean), "tokens_per_s_total", stat_json(cr->tps_total),
                         "slo_attainment", stat_json(cr->slo_attainment), "slo_met", cr->slo_met));
    }
    return a;
}

/* How the replications ran: duration auto, steady or transient, ci_target, and each replication's
 * own figures (the intervals can be recomputed from them). */
static json_t *run_json(const study_result_t *r)
{
    static const char *const names[STUDY_REP_N] = {"duration_s", "warmup_s", "mean_turn_s", "window_turns", "step_p50_s",
                                                   "step_p99_s", "ttft_p50_s", "ttft_p99_s", "tokens_per_s_per_session"};
    json_t *reps = json_array();
    for (uint32_t k = 0; reps && r->rep_figs && k < r->replications; k++) {
        json_t *o = json_object();
        for (int j = 0; j < STUDY_REP_N; j++) json_object_set_new(o, names[j], report_num(r->rep_figs[(size_t)k * STUDY_REP_N + (size_t)j]));
        json_array_append_new(reps, o);
    }
    return json_pack("{s:b,s:b,s:f,s:f,s:f,s:b,s:o}", "duration_auto", r->duration_auto, "transient", r->transient,
                     "steady_turns", r->steady_turns, "window_turns", r->window_turns, "ci_target", r->ci_target,
                     "ci_reached", r->ci_reached, "per_replication", reps);
}

json_t *report_json(const study_t *s, size_t i, const study_result_t *r)
{
    char *scn = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&scn, &len);
    if (mem) {
        study_point_emit(s, i, mem);
        fclose(mem);
    }
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->calib_hash);
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:i,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
        "s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,"
        "s:f,s:o,s:o,s:I,s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:s,s:s}",
        "odsim_version", ODSIM_VERSION, "odsim_git", odsim_git_rev, "calibration_hash", hash, "point", r->label,
        "replications", (int)r->replications, "duration_s", r->duration_s, "sessions", (json_int_t)r->sessions,
        "turns", (json_int_t)r->turns, "decode_tokens", (json_int_t)r->decode_tokens, "prefill_tokens",
        (json_int_t)r->prefill_tokens, "preemptions", (json_int_t)r->preemptions, "evictions",
        (json_int_t)r->evictions, "waiting_for_memory", (json_int_t)r->waiting,
        "step_p50_s", stat_json(r->step_p50_s), "step_p95_s", stat_json(r->step_p95_s), "step_p99_s",
        stat_json(r->step_p99_s), "step_mean_s", stat_json(r->step_mean_s), "ttft_p50_s", stat_json(r->ttft_p50_s),
        "ttft_p95_s", stat_json(r->ttft_p95_s), "ttft_p99_s", stat_json(r->ttft_p99_s), "tokens_per_s_per_session",
        stat_json(r->tps_session_mean), "tokens_per_s_total", stat_json(r->tps_total), "slo_attainment",
        stat_json(r->slo_attainment), "slo_met", r->slo_met,
        "standalone_step_s", r->standalone_step_s, "admit_wait_p50_s", report_num(r->admit_wait_p50_s),
        "admit_wait_p99_s", report_num(r->admit_wait_p99_s), "admit_never", (json_int_t)r->admit_never, "hbm_peak_bytes", r->hbm_peak_bytes, "hbm_capacity_bytes", r->hbm_capacity_bytes,
        "host_peak_bytes", r->host_peak_bytes, "host_capacity_bytes", r->host_capacity_bytes,
        "launch_thread_utilisation", r->launch_utilisation, "resources", resources_json(r), "lost_per_plan_s",
        lost_json(r), "busiest_resource", r->binding ? r->binding : "", "calibration_flags", r->flags ? r->flags : "");
    if (o) json_object_set_new(o, "scenario", json_string(scn ? scn : ""));
    if (o) json_object_set_new(o, "run", run_json(r));
    if (o) json_object_set_new(o, "transient_turns", r->transient ? json_real(r->window_turns) : json_null());
    if (o && r->placement) json_object_set_new(o, "placement", json_string(r->placement));
    if (o && r->n_classes) json_object_set_new(o, "classes", classes_json(r));
    if (o && r->cxl_capacity_bytes > 0) {
        json_object_set_new(o, "cxl_peak_bytes", json_real(r->cxl_peak_bytes));
        json_object_set_new(o, "cxl_capacity_bytes", json_real(r->cxl_capacity_bytes));
    }
    free(scn);
    return o;
}

/* ---- CSV ------------------------------------------------------------------------------------ */

void report_csv_header(FILE *fp)
{
    fputs("point,replications,sessions,decode_tokens,step_p50_s,step_p95_s,step_p99_s,ttft_p50_s,ttft_p99_s,"
          "tokens_per_s_per_session,tokens_per_s_total,tokens_per_s_total_ci_lo,tokens_per_s_total_ci_hi,"
          "slo_attainment,slo_met,hbm_peak_bytes,host_peak_bytes,busiest_resource,standalone_step_s\n",
          fp);
}

void report_csv_field(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"') fputs("\"\"", fp);
        else fputc(c < 0x20 || c == 0x7f ? ' ' : c, fp);
    }
    fputc('"', fp);
}

void report_csv_row(FILE *fp, const study_result_t *r)
{
    report_csv_field(fp, r->label);
    fprintf(fp, ",%u,%llu,%llu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.6g,%d,%.6g,%.6g,%s,%.9g\n",
            r->replications, (unsigned long long)r->sessions, (unsigned long long)r->decode_tokens,
            r->step_p50_s.mean, r->step_p95_s.mean, r->step_p99_s.mean, r->ttft_p50_s.mean, r->ttft_p99_s.mean,
            r->tps_session_mean.mean, r->tps_total.mean, r->tps_total.lo, r->tps_total.hi, r->slo_attainment.mean,
            r->slo_met, r->hbm_peak_bytes, r->host_peak_bytes, r->binding ? r->binding : "", r->standalone_step_s);
}

/* ---- files and plots ------------------------------------------------------------------------ */

/* Every name report_add writes, for report_check_dir. */
static const char *const dir_files[] = {
    "results.csv", "results.json", "latency_vs_context.csv", "utilisation.csv",
    "latency_vs_context.gp", "latency_vs_context.svg", "latency_vs_context.png",
    "utilisation.gp", "utilisation.svg", "utilisation.png",
    "latency_vs_sessions.gp", "latency_vs_sessions.svg", "latency_vs_sessions.png"};

int report_check_dir(const char *dir, err_t *e)
{
    return outset_check(dir, dir_files, sizeof dir_files / sizeof *dir_files, e);
}

int report_plot(outset_t *set, const char *stem, int width_px, int height_px, const char *data, const char *setup,
                const char *body, err_t *e)
{
    int rc = gnuplot_render(set, stem, width_px, height_px, data, setup, body, e);
    if (rc == ERR_NOTFOUND) {
        fprintf(stderr, "odsim: %s\n", e->msg);
        rc = ERR_OK;
    }
    return rc;
}

/* Rows of numbers only: they go into the CSV files and, as they are, into the scripts' datablocks
 * (where a line of text could end the block). */
static void ctx_rows(FILE *fp, study_result_t *const *rs, size_t n)
{
    for (size_t p = 0; p < n; p++)
        for (size_t i = 0; i < rs[p]->n_ctx; i++) fprintf(fp, "%zu,%.0f,%.9g\n", p, rs[p]->ctx_tokens[i], rs[p]->ctx_step_s[i]);
}

static void util_rows(FILE *fp, const study_result_t *r)
{
    for (size_t i = 0; i < r->n_util; i++) {
        fprintf(fp, "%.9g", r->util_t_s[i]);
        for (size_t j = 0; j < r->n_res; j++) fprintf(fp, ",%.6g", r->util[i * r->n_res + j]);
        fputc('\n', fp);
    }
}

/* A point's series: its label without the population axis (points differing only in how many
 * sessions they run are one line of the latency-vs-sessions plot). */
static void series_key(const char *label, char *key, size_t n)
{
    size_t k = 0;
    for (const char *p = label; *p && k + 1 < n;) {
        size_t len = strcspn(p, ",");
        bool pop = strstr(p, "population=") && (size_t)(strstr(p, "population=") - p) < len;
        if (!pop) k += (size_t)snprintf(key + k, n - k, "%s%.*s", k ? "," : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    key[k < n ? k : n - 1] = '\0';
}

/* Rows "series,sessions,p50,p99" ordered by series (first appearance) then sessions; *n_series. */
static void sessions_rows(FILE *fp, study_result_t *const *rs, size_t n, size_t *n_series, size_t *series_of_first)
{
    char (*keys)[256] = calloc(n ? n : 1, sizeof *keys);
    size_t *ser = calloc(n ? n : 1, sizeof *ser), ns = 0;
    if (!keys || !ser) {
        free(keys);
        free(ser);
        *n_series = 0;
        return;
    }
    for (size_t p = 0; p < n; p++) {
        char k[256];
        series_key(rs[p]->label, k, sizeof k);
        size_t s = 0;
        while (s < ns && strcmp(keys[s], k)) s++;
        if (s == ns) {
            snprintf(keys[ns], sizeof keys[ns], "%s", k);
            series_of_first[ns++] = p;
        }
        ser[p] = s;
    }
    for (size_t s = 0; s < ns; s++) {
        /* this series' points by sessions (insertion order among equals) */
        for (uint64_t last = 0, done = 0;;) {
            size_t best = n;
            for (size_t p = 0; p < n; p++)
                if (ser[p] == s && (rs[p]->sessions > last || (!done && rs[p]->sessions == last)) &&
                    (best == n || rs[p]->sessions < rs[best]->sessions))
                    best = p;
            if (best == n) break;
            for (size_t p = 0; p < n; p++)
                if (ser[p] == s && rs[p]->sessions == rs[best]->sessions)
                    fprintf(fp, "%zu,%llu,%.9g,%.9g\n", s, (unsigned long long)rs[p]->sessions, rs[p]->step_p50_s.mean,
                            rs[p]->step_p99_s.mean);
            last = rs[best]->sessions;
            done = 1;
        }
    }
    *n_series = ns;
    free(keys);
    free(ser);
}

/* A text being built in memory. */
typedef struct text {
    char *s;
    size_t len;
    FILE *fp;
} text_t;

static bool text_open(text_t *t)
{
    t->s = NULL;
    t->len = 0;
    t->fp = open_memstream(&t->s, &t->len);
    return t->fp != NULL;
}

/* Draws the plot from the finished data and body, then frees both. */
static int draw(outset_t *set, const char *stem, const char *setup, text_t *data, text_t *body, err_t *e)
{
    bool ok = data->fp && body->fp;
    if (data->fp) fclose(data->fp);
    if (body->fp) fclose(body->fp);
    int rc = ok && data->s && body->s ? report_plot(set, stem, 900, 540, data->s, setup, body->s, e)
                                      : err_set(e, ERR_NOMEM, "out of memory");
    free(data->s);
    free(body->s);
    return rc;
}

#define PLOT_SETUP "set datafile separator ','\nset key outside right\nset grid\n"

static int plot_ctx(outset_t *set, study_result_t *const *rs, size_t n, err_t *e)
{
    text_t d, b;
    bool ok = text_open(&d) & text_open(&b);
    if (ok) {
        fputs("$ctx << EOD\n", d.fp);
        ctx_rows(d.fp, rs, n);
        fputs("EOD\n", d.fp);
        fputs("plot ", b.fp);
        int drawn = 0;
        for (size_t p = 0; p < n && p < 24; p++) {
            if (!rs[p]->n_ctx) continue;   /* an empty series makes gnuplot fail */
            fprintf(b.fp, "%s$ctx using ($1==%zu?$2:1/0):($3*1e3) with points pt 7 ps 0.4 ", drawn ? ", " : "", p);
            if (drawn++ < 12) {   /* a legend of at most 12 entries */
                fputs("title ", b.fp);
                gnuplot_quote(b.fp, rs[p]->label);
            } else fputs("notitle", b.fp);
        }
        if (!drawn)
            fputs("1/0 notitle\n", b.fp), fputs("set label 1 'no decode steps recorded' at graph 0.5, graph 0.5 center\n"
                                                 "set xrange [1:10]\nset yrange [1:10]\n", d.fp);
    }
    return draw(set, "latency_vs_context",
                PLOT_SETUP "set xlabel 'context tokens'\nset ylabel 'decode step latency (ms)'\nset logscale xy", &d, &b, e);
}

static int plot_util(outset_t *set, const study_result_t *r, err_t *e)
{
    text_t d, b;
    bool ok = text_open(&d) & text_open(&b);
    if (ok) {
        fputs("$util << EOD\n", d.fp);
        util_rows(d.fp, r);
        fputs("EOD\n", d.fp);
        fputs("plot ", b.fp);
        int drawn = 0;
        for (size_t j = 0; j < r->n_res; j++) {
            if (r->res[j].utilisation < 0.01) continue;
            fprintf(b.fp, "%s$util using 1:($%zu*100) with lines title ", drawn++ ? ", " : "", j + 2);
            gnuplot_quote(b.fp, r->res[j].name);
        }
        if (!drawn) fputs("0 notitle", b.fp);
    }
    return draw(set, "utilisation",
                PLOT_SETUP "set xlabel 'simulated time (s)'\nset ylabel 'utilisation (%), point 0'\nset yrange [0:105]",
                &d, &b, e);
}

static int plot_sessions(outset_t *set, study_result_t *const *rs, size_t n, err_t *e)
{
    text_t d, b;
    bool ok = text_open(&d) & text_open(&b);
    if (ok) {
        fputs("$res << EOD\n", d.fp);
        size_t ns = 0, *first = calloc(n ? n : 1, sizeof *first);
        if (first) sessions_rows(d.fp, rs, n, &ns, first);
        fputs("EOD\n", d.fp);
        size_t with_steps = 0;
        for (size_t p = 0; p < n; p++) with_steps += rs[p]->step_p50_s.n > 0;
        if (with_steps && ns) {
            /* one line per series (p50 solid, p99 dashed in its colour); a legend of at most 12 entries */
            fputs("plot ", b.fp);
            size_t drawn = 0;
            for (size_t s = 0; s < ns; s++) {
                char key[256];
                series_key(rs[first[s]]->label, key, sizeof key);
                bool any = false;   /* a series without one defined point makes gnuplot fail */
                for (size_t p = 0; p < n; p++) {
                    char k2[256];
                    series_key(rs[p]->label, k2, sizeof k2);
                    any |= !strcmp(k2, key) && rs[p]->step_p50_s.n > 0;
                }
                if (!any) continue;
                fprintf(b.fp, "%s$res using ($1==%zu?$2:1/0):($3*1e3) with linespoints lc %zu pt 7 ", drawn++ ? ", " : "", s, s + 1);
                if (2 * drawn - 1 < 12) {
                    fputs("title ", b.fp);
                    char t[300];
                    snprintf(t, sizeof t, "%s p50", *key ? key : "p50");
                    gnuplot_quote(b.fp, t);
                } else fputs("notitle", b.fp);
                fprintf(b.fp, ", $res using ($1==%zu?$2:1/0):($4*1e3) with linespoints lc %zu dt 2 pt 6 ", s, s + 1);
                if (2 * drawn <= 12) {
                    fputs("title ", b.fp);
                    char t[300];
                    snprintf(t, sizeof t, "%s p99", *key ? key : "");
                    gnuplot_quote(b.fp, t);
                } else fputs("notitle", b.fp);
            }
        }
        free(first);
        if (!(with_steps && ns))   /* every point's figure is n/a: gnuplot fails on a plot with no defined value */
            fputs("set label 1 'no decode steps recorded' at graph 0.5, graph 0.5 center\n"
                  "set xrange [1:10]\nset yrange [1:10]\nplot 1/0 notitle\n", b.fp);
    }
    return draw(set, "latency_vs_sessions",
                PLOT_SETUP "set xlabel 'sessions'\nset ylabel 'decode step latency (ms)'\nset xrange [0:*]\nset yrange [0:*]", &d, &b, e);
}

/* A CSV file of the set: header, then rows. */
static int write_csv(outset_t *set, const char *name, const char *header, FILE **fp, err_t *e)
{
    int rc = outset_file(set, name, fp, e);
    if (!rc) fputs(header, *fp);
    return rc;
}

int report_add(outset_t *set, const study_t *s, study_result_t *const *rs, size_t n, err_t *e)
{
    FILE *fp;
    int rc = outset_file(set, "results.csv", &fp, e);
    if (rc) return rc;
    study_provenance(s, 0, fp, "#");
    report_csv_header(fp);
    for (size_t i = 0; i < n; i++) report_csv_row(fp, rs[i]);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) json_array_append_new(arr, report_json(s, i, rs[i]));
    char *txt = arr ? json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(arr);
    rc = txt ? outset_file(set, "results.json", &fp, e) : err_set(e, ERR_NOMEM, "out of memory");
    if (!rc) fputs(txt, fp);
    free(txt);
    if (!rc && !(rc = write_csv(set, "latency_vs_context.csv", "point,context_tokens,step_s\n", &fp, e))) ctx_rows(fp, rs, n);
    if (!rc && n && !(rc = write_csv(set, "utilisation.csv", "t_s", &fp, e))) {
        for (size_t j = 0; j < rs[0]->n_res; j++) fprintf(fp, ",%s", rs[0]->res[j].name);
        fputc('\n', fp);
        util_rows(fp, rs[0]);
    }
    if (!rc && n) rc = plot_ctx(set, rs, n, e);
    if (!rc && n) rc = plot_util(set, rs[0], e);
    if (!rc && n) rc = plot_sessions(set, rs, n, e);
    return rc;
}

int report_write_dir(const char *dir, const study_t *s, study_result_t *const *rs, size_t n, err_t *e)
{
    outset_t *set;
    int rc = outset_open(dir, &set, e);
    if (rc) return rc;
    if ((rc = report_add(set, s, rs, n, e))) {
        outset_abort(set);
        return rc;
    }
    return outset_commit(set, e);
}
