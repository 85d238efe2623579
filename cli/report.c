#include "cli/report.h"
#include "common/version.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/atomicio.h"

/* ---- text ----------------------------------------------------------------------------------- */

/* Seconds with an SI prefix: "12.3 ms". */
static const char *fmt_s(char *buf, size_t n, double s)
{
    if (!isfinite(s)) snprintf(buf, n, "-");
    else if (s == 0) snprintf(buf, n, "0 s");
    else if (s < 1e-6) snprintf(buf, n, "%.3g ns", s * 1e9);
    else if (s < 1e-3) snprintf(buf, n, "%.3g us", s * 1e6);
    else if (s < 1) snprintf(buf, n, "%.3g ms", s * 1e3);
    else snprintf(buf, n, "%.3g s", s);
    return buf;
}

static void text_stat_s(FILE *fp, const char *name, study_stat_t st, uint32_t reps)
{
    char a[32], b[32], c[32];
    fprintf(fp, " %s %s", name, fmt_s(a, sizeof a, st.mean));
    if (reps > 1) fprintf(fp, " [%s, %s]", fmt_s(b, sizeof b, st.lo), fmt_s(c, sizeof c, st.hi));
}

static void text_stat(FILE *fp, const char *name, study_stat_t st, uint32_t reps, const char *unit)
{
    fprintf(fp, " %s %.4g%s", name, st.mean, unit);
    if (reps > 1) fprintf(fp, " [%.4g, %.4g]", st.lo, st.hi);
}

static void text_latency(FILE *fp, const study_result_t *r)
{
    fprintf(fp, "  step latency  ");
    text_stat_s(fp, "p50", r->step_p50_s, r->replications);
    text_stat_s(fp, "p95", r->step_p95_s, r->replications);
    text_stat_s(fp, "p99", r->step_p99_s, r->replications);
    fprintf(fp, "\n  TTFT per turn ");
    text_stat_s(fp, "p50", r->ttft_p50_s, r->replications);
    text_stat_s(fp, "p95", r->ttft_p95_s, r->replications);
    text_stat_s(fp, "p99", r->ttft_p99_s, r->replications);
    fprintf(fp, "\n  tokens/s      ");
    text_stat(fp, "per session", r->tps_session_mean, r->replications, "");
    text_stat(fp, "box", r->tps_total, r->replications, "");
    fprintf(fp, "\n  SLO           ");
    text_stat(fp, "turns meeting it", r->slo_attainment, r->replications, "");
    fprintf(fp, " -> %s\n", r->slo_met ? "met (in >= 95% of replications)" : "NOT met");
}

static void text_resources(FILE *fp, const study_result_t *r)
{
    char a[32], b[32];
    fprintf(fp, "  memory         HBM peak %.1f of %.1f GB per GPU; host DRAM peak %.1f of %.1f GB\n",
            r->hbm_peak_bytes / 1e9, r->hbm_capacity_bytes / 1e9, r->host_peak_bytes / 1e9, r->host_capacity_bytes / 1e9);
    fprintf(fp, "  admission      wait p50 %s p99 %s; preemptions %llu, evictions %llu, waiting for memory at the end %llu\n",
            fmt_s(a, sizeof a, r->admit_wait_p50_s), fmt_s(b, sizeof b, r->admit_wait_p99_s),
            (unsigned long long)r->preemptions, (unsigned long long)r->evictions, (unsigned long long)r->waiting);
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

void report_text(FILE *fp, const study_t *s, size_t i, const study_result_t *r)
{
    fprintf(fp, "point %zu: %s  (%u replication%s of %.4g s simulated)\n", i, study_point_label(s, i), r->replications,
            r->replications == 1 ? "" : "s", r->duration_s);
    fprintf(fp, "  sessions %llu, turns done %llu, decode tokens %llu, prefill tokens %llu\n",
            (unsigned long long)r->sessions, (unsigned long long)r->turns, (unsigned long long)r->decode_tokens,
            (unsigned long long)r->prefill_tokens);
    text_latency(fp, r);
    text_resources(fp, r);
    if (r->flags && *r->flags) fprintf(fp, "  calibration parameters assumed or used outside their fitted range:\n%s", r->flags);
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static json_t *stat_json(study_stat_t st)
{
    return json_pack("{s:f,s:f,s:f}", "mean", st.mean, "ci95_lo", st.lo, "ci95_hi", st.hi);
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
        "s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:s,s:s}",
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
        "standalone_step_s", r->standalone_step_s, "admit_wait_p50_s", r->admit_wait_p50_s, "admit_wait_p99_s",
        r->admit_wait_p99_s, "hbm_peak_bytes", r->hbm_peak_bytes, "hbm_capacity_bytes", r->hbm_capacity_bytes,
        "host_peak_bytes", r->host_peak_bytes, "host_capacity_bytes", r->host_capacity_bytes,
        "launch_thread_utilisation", r->launch_utilisation, "resources", resources_json(r), "lost_per_plan_s",
        lost_json(r), "busiest_resource", r->binding ? r->binding : "", "calibration_flags", r->flags ? r->flags : "");
    if (o) json_object_set_new(o, "scenario", json_string(scn ? scn : ""));
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

void report_csv_row(FILE *fp, const study_result_t *r)
{
    fprintf(fp, "\"%s\",%u,%llu,%llu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.6g,%d,%.6g,%.6g,%s,%.9g\n",
            r->label, r->replications, (unsigned long long)r->sessions, (unsigned long long)r->decode_tokens,
            r->step_p50_s.mean, r->step_p95_s.mean, r->step_p99_s.mean, r->ttft_p50_s.mean, r->ttft_p99_s.mean,
            r->tps_session_mean.mean, r->tps_total.mean, r->tps_total.lo, r->tps_total.hi, r->slo_attainment.mean,
            r->slo_met, r->hbm_peak_bytes, r->host_peak_bytes, r->binding ? r->binding : "", r->standalone_step_s);
}

/* ---- files and plots ------------------------------------------------------------------------ */

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Opens DIR/NAME for an atomic write. */
static int open_in(const char *dir, const char *name, atomicio_t **f, err_t *e)
{
    char *p = join(dir, name);
    int rc = p ? atomicio_open(p, f, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(p);
    return rc;
}

int report_gnuplot(const char *dir, const char *name, const char *script, err_t *e)
{
    char gp[512];
    snprintf(gp, sizeof gp, "%s.gp", name);
    atomicio_t *f;
    int rc = open_in(dir, gp, &f, e);
    if (rc) return rc;
    fputs(script, atomicio_file(f));
    if ((rc = atomicio_commit(f, e))) return rc;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        return err_set(e, ERR_NOTFOUND, "gnuplot is not installed: %s/%s written, plots skipped", dir, gp);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s' 2>&1", dir, gp);
    FILE *p = popen(cmd, "r");
    if (!p) return err_set(e, ERR_IO, "cannot run gnuplot");
    char line[512], first[512] = "";
    while (fgets(line, sizeof line, p))
        if (!first[0]) snprintf(first, sizeof first, "%s", line);
    int st = pclose(p);
    if (st != 0) return err_set(e, ERR_IO, "gnuplot failed on %s/%s: %s", dir, gp, first);
    return ERR_OK;
}

/* A script that draws `body` twice: as SVG and as PNG. */
static int plot_both(const char *dir, const char *name, const char *setup, const char *body, err_t *e)
{
    char *script = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&script, &len);
    if (!fp) return err_set(e, ERR_NOMEM, "out of memory");
    fprintf(fp, "set datafile separator ','\nset key outside right\nset grid\n%s\n", setup);
    fprintf(fp, "set terminal svg size 900,540 dynamic noenhanced\nset output '%s.svg'\n%s\n", name, body);
    fprintf(fp, "set terminal pngcairo size 900,540 noenhanced\nset output '%s.png'\n%s\n", name, body);
    fclose(fp);
    int rc = report_gnuplot(dir, name, script, e);
    free(script);
    return rc;
}

static int write_ctx_data(const char *dir, study_result_t *const *rs, size_t n, err_t *e)
{
    atomicio_t *f;
    int rc = open_in(dir, "latency_vs_context.csv", &f, e);
    if (rc) return rc;
    FILE *fp = atomicio_file(f);
    fputs("point,context_tokens,step_s\n", fp);
    for (size_t p = 0; p < n; p++)
        for (size_t i = 0; i < rs[p]->n_ctx; i++) fprintf(fp, "%zu,%.0f,%.9g\n", p, rs[p]->ctx_tokens[i], rs[p]->ctx_step_s[i]);
    return atomicio_commit(f, e);
}

static int write_util_data(const char *dir, const study_result_t *r, err_t *e)
{
    atomicio_t *f;
    int rc = open_in(dir, "utilisation.csv", &f, e);
    if (rc) return rc;
    FILE *fp = atomicio_file(f);
    fputs("t_s", fp);
    for (size_t j = 0; j < r->n_res; j++) fprintf(fp, ",%s", r->res[j].name);
    fputc('\n', fp);
    for (size_t i = 0; i < r->n_util; i++) {
        fprintf(fp, "%.9g", r->util_t_s[i]);
        for (size_t j = 0; j < r->n_res; j++) fprintf(fp, ",%.6g", r->util[i * r->n_res + j]);
        fputc('\n', fp);
    }
    return atomicio_commit(f, e);
}

/* A label safe inside a gnuplot single-quoted string. */
static void gp_label(const char *in, char *out, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; in[i] && j + 1 < n; i++) out[j++] = in[i] == '\'' ? '"' : in[i];
    out[j] = '\0';
}

static int write_plots(const char *dir, study_result_t *const *rs, size_t n, err_t *e)
{
    char body[16384], label[256];
    size_t len = (size_t)snprintf(body, sizeof body, "plot ");
    for (size_t p = 0; p < n && p < 24; p++) {
        gp_label(rs[p]->label, label, sizeof label);
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "%s'latency_vs_context.csv' using ($1==%zu?$2:1/0):($3*1e3) skip 1 with points pt 7 ps 0.4 title '%s'",
                                p ? ", " : "", p, label);
    }
    int rc = plot_both(dir, "latency_vs_context", "set xlabel 'context tokens'\nset ylabel 'decode step latency (ms)'\nset logscale xy", body, e);
    if (rc) return rc;
    const study_result_t *r = rs[0];
    len = (size_t)snprintf(body, sizeof body, "plot ");
    int drawn = 0;
    for (size_t j = 0; j < r->n_res; j++) {
        if (r->res[j].utilisation < 0.01) continue;
        len += (size_t)snprintf(body + len, sizeof body - len, "%s'utilisation.csv' using 1:($%zu*100) skip 1 with lines title '%s'",
                                drawn++ ? ", " : "", j + 2, r->res[j].name);
    }
    if (!drawn) snprintf(body, sizeof body, "plot 0 notitle");
    rc = plot_both(dir, "utilisation", "set xlabel 'simulated time (s)'\nset ylabel 'utilisation (%), point 0'\nset yrange [0:105]", body, e);
    if (rc) return rc;
    return plot_both(dir, "latency_vs_sessions",
                     "set xlabel 'sessions'\nset ylabel 'decode step latency (ms)'",
                     "plot 'results.csv' using 3:($5*1e3) skip 1 with linespoints title 'p50', "
                     "'results.csv' using 3:($7*1e3) skip 1 with linespoints title 'p99'", e);
}

int report_write_dir(const char *dir, const study_t *s, study_result_t *const *rs, size_t n, err_t *e)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return err_set(e, ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    atomicio_t *f;
    int rc = open_in(dir, "results.csv", &f, e);
    if (rc) return rc;
    study_provenance(s, 0, atomicio_file(f), "#");
    report_csv_header(atomicio_file(f));
    for (size_t i = 0; i < n; i++) report_csv_row(atomicio_file(f), rs[i]);
    if ((rc = atomicio_commit(f, e))) return rc;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) json_array_append_new(arr, report_json(s, i, rs[i]));
    char *txt = arr ? json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(arr);
    char *p = join(dir, "results.json");
    rc = (txt && p) ? atomicio_write(p, txt, strlen(txt), e) : err_set(e, ERR_NOMEM, "out of memory");
    free(txt);
    free(p);
    if (!rc) rc = write_ctx_data(dir, rs, n, e);
    if (!rc && n) rc = write_util_data(dir, rs[0], e);
    if (!rc && n) {
        rc = write_plots(dir, rs, n, e);
        if (rc == ERR_NOTFOUND) {
            fprintf(stderr, "odsim: %s\n", e->msg);
            rc = ERR_OK;
        }
    }
    return rc;
}
