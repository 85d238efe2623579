/* odsim replay FILE [--calib FILE] [--box NAME] [--json] — odsim's prediction of a replay workload
 * (docs/replay.md) as kbench replay measures it: per session the step time's quantiles and steps per
 * second over the measured window (cli/replay_pred.h). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/replay_pred.h"
#include "cli/report.h"
#include "cli/study.h"
#include "common/version.h"

static int replay_main(int argc, char **argv);

const cmd_t cmd_replay = {
    "replay", "predict a replay workload's step times per session (what kbench replay measures)",
    "usage: odsim replay FILE [--calib FILE] [--box NAME] [--json]\n"
    "  FILE          a replay workload (docs/replay.md)\n"
    "  --calib FILE  calibration profile (default " STUDY_DEFAULT_CALIBRATION ")\n"
    "  --box NAME    box preset of the machine (default h200-1); every session runs on its GPU 0\n"
    "  --json        print the prediction as JSON instead of the text table\n"
    "  Each session runs its warm-up steps, then all start together and each measures the steps it\n"
    "  begins within the workload's window (at least min_steps) while the others keep stepping; per\n"
    "  session (and all sessions' steps pooled) the step time's p10, p50, p90, p99 and mean, and steps\n"
    "  per second over the window (pooled: summed).\n",
    replay_main};

static json_t *stat_json(const rpred_stat_t *s)
{
    return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:o}", "steps", (json_int_t)s->steps, "p10_us", s->p10_s * 1e6, "p50_us",
                     s->p50_s * 1e6, "p90_us", s->p90_s * 1e6, "p99_us", s->p99_s * 1e6, "mean_us", s->mean_s * 1e6,
                     "steps_per_s", report_num(s->per_s));
}

static int print_json(const char *path, const rf_workload_t *w, uint64_t fnv, const rpred_opts_t *o, const rpred_t *r)
{
    json_t *sess = json_array(), *flags = json_array();
    for (uint32_t i = 0; sess && i < r->n_sessions; i++) {
        json_t *s = stat_json(&r->session[i]);
        json_object_set_new(s, "session", json_integer(i));
        json_object_set_new(s, "idle_us", json_integer((json_int_t)w->sessions[i].idle_us));
        json_array_append_new(sess, s);
    }
    for (const char *p = r->flags; flags && p && *p;) {
        size_t n = strcspn(p, "\n");
        json_array_append_new(flags, json_stringn(p, n));
        p += n + (p[n] == '\n');
    }
    char hash[24], wfnv[24];
    snprintf(hash, sizeof hash, "%016" PRIx64, r->calib_hash);
    snprintf(wfnv, sizeof wfnv, "%016" PRIx64, fnv);
    json_t *root = json_pack("{s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s},s:s,s:s,s:I,s:I,s:I,s:f,s:o,s:o,s:o}", "odsim",
                             ODSIM_VERSION, "workload", w->name, "file", path, "workload_fnv", wfnv, "mode",
                             rf_mode_name((int)w->mode), "calibration", "profile", r->profile, "path",
                             o->calib_path ? o->calib_path : STUDY_DEFAULT_CALIBRATION, "hash", hash, "box", r->box,
                             "gpu", r->gpu, "window_ms", (json_int_t)w->window_ms, "min_steps", (json_int_t)w->min_steps,
                             "warmup_steps", (json_int_t)w->warmup_steps, "start_s", r->start_s, "sessions", sess, "all",
                             stat_json(&r->pooled), "flags", flags);
    return cmd_put_json("replay", root);
}

static void stat_line(const char *who, const rpred_stat_t *s)
{
    printf("%-8s %8" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", who, s->steps, s->p10_s * 1e6, s->p50_s * 1e6,
           s->p90_s * 1e6, s->p99_s * 1e6, s->mean_s * 1e6, s->per_s);
}

static void print_text(const char *path, const rf_workload_t *w, uint64_t fnv, const rpred_opts_t *o, const rpred_t *r)
{
    printf("odsim %s (%s): replay %s (%s, workload_fnv %016" PRIx64 ")\n", ODSIM_VERSION, odsim_git_rev, w->name, path, fnv);
    printf("calibration profile: %s (%s, hash %016" PRIx64 ")\n", r->profile,
           o->calib_path ? o->calib_path : STUDY_DEFAULT_CALIBRATION, r->calib_hash);
    printf("machine: box %s, GPU %s; mode %s, %u session%s; warm-up %" PRIu64 " steps, windows of %" PRIu64
           " ms (at least %" PRIu64 " steps) from %.3f ms\n\n",
           r->box, r->gpu, rf_mode_name((int)w->mode), r->n_sessions, r->n_sessions == 1 ? "" : "s", w->warmup_steps,
           w->window_ms, w->min_steps, r->start_s * 1e3);
    printf("%-8s %8s %10s %10s %10s %10s %10s %10s\n", "session", "steps", "p10_us", "p50_us", "p90_us", "p99_us", "mean_us",
           "steps/s");
    for (uint32_t i = 0; i < r->n_sessions; i++) {
        char who[16];
        snprintf(who, sizeof who, "%u", i);
        stat_line(who, &r->session[i]);
    }
    stat_line("all", &r->pooled);
    if (r->flags && *r->flags) printf("\ncalibration flags:\n%s", r->flags);
}

static int replay_main(int argc, char **argv)
{
    rpred_opts_t o = {0};
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(s, "--json")) json = true;
        else if (!strcmp(s, "--calib") && has_val) o.calib_path = argv[++i];
        else if (!strcmp(s, "--box") && has_val) o.box = argv[++i];
        else if (s[0] == '-' && s[1]) return cmd_usage_error(&cmd_replay, "unknown option or missing value: '%s'", s);
        else if (path) return cmd_usage_error(&cmd_replay, "one workload at a time (got '%s' and '%s')", path, s);
        else path = s;
    }
    if (!path) return cmd_usage_error(&cmd_replay, "no workload file given");
    err_t e;
    uint64_t fnv = 0;
    rf_workload_t *w = malloc(sizeof *w);
    if (!w) return cmd_fail("replay", "out of memory");
    rpred_t r;
    int rc = rpred_load(path, w, &fnv, &e);
    if (!rc) rc = rpred_run(w, &o, &r, &e);
    if (rc) {
        free(w);
        return cmd_fail("replay", "%s", e.msg);
    }
    int st = 0;
    if (json) st = print_json(path, w, fnv, &o, &r);
    else print_text(path, w, fnv, &o, &r);
    rpred_free(&r);
    free(w);
    return st;
}
