/* odsim run SCENARIO [--set key=value]... [--json] [--out DIR] [--timeline FILE] [--replications R] */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "cli/study_assume.h"
#include "cli/study_trust.h"
#include "common/version.h"
#include "cli/report.h"
#include "cli/study.h"
#include "cli/study_wire.h"
#include "cli/par.h"
#include "common/atomicio.h"

static int run_main(int argc, char **argv);

const cmd_t cmd_run = {
    "run", "simulate a scenario: latency, TTFT, tokens/s, utilisation, where time went",
    "usage: odsim run SCENARIO.yaml [options]\n"
    "  --set KEY=VALUE    override any scenario key (repeatable), e.g. --set hardware.link=pcie4\n"
    "  --json             print the results as JSON on stdout instead of the text table\n"
    "  --out DIR          write results.csv, results.json and plots (SVG, PNG) into DIR\n"
    "  --timeline FILE    write the first plans' ops as Chrome trace-event JSON (opens in Perfetto)\n"
    "  --timeline-plans N plans recorded in the timeline (default 8)\n"
    "  --replications R   run exactly R replications (run.replications, and run.ci_target off)\n"
    "  --point I          run only sweep point I\n"
    "  --timing           print to stderr, per point, simulated seconds per wall second and events/s\n"
    "  Outputs never destroy: each file is written to a temporary beside it and renamed when whole. An\n"
    "  existing output is replaced only when it is a regular, writable file with one link; a device,\n"
    "  FIFO, directory, symbolic link, read-only or hard-linked file there is an error before anything\n"
    "  runs ('-' is standard output). --out DIR is one set: its files appear together, then\n"
    "  DIR/MANIFEST listing them; a run stopped before that changes nothing in DIR but leaves no\n"
    "  MANIFEST. Interrupted runs (SIGINT, SIGTERM) remove their temporaries.\n"
    "  A sweep's values are checked before anything runs, each beside the other axes' first values;\n"
    "  each point is resolved when it runs, so a value bad only beside another axis's value (a budget\n"
    "  one swept method cannot meet) stops the run at that point, naming it.\n",
    run_main};

typedef struct run_args {
    const char *scenario, *out, *timeline;
    const char **sets;
    size_t n_sets;
    bool json, timing;
    int replications;
    long point;
    uint32_t timeline_plans;
} run_args_t;


static int parse_args(int argc, char **argv, run_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->point = -1;
    a->timeline_plans = 8;
    a->sets = calloc((size_t)argc, sizeof *a->sets);
    if (!a->sets) return cmd_fail("run", "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool has_val = i + 1 < argc;
        long v;
        if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--timing")) a->timing = true;
        else if (!strcmp(o, "--set") && has_val) a->sets[a->n_sets++] = argv[++i];
        else if (!strcmp(o, "--out") && has_val) a->out = argv[++i];
        else if (!strcmp(o, "--timeline") && has_val) a->timeline = argv[++i];
        else if (!strcmp(o, "--replications") && has_val) {
            if (cmd_parse_long(argv[++i], 1, 1000, &v)) return cmd_usage_error(&cmd_run, "--replications: expected 1..1000, got '%s'", argv[i]);
            a->replications = (int)v;
        } else if (!strcmp(o, "--timeline-plans") && has_val) {
            if (cmd_parse_long(argv[++i], 1, 100000, &v)) return cmd_usage_error(&cmd_run, "--timeline-plans: expected 1..100000, got '%s'", argv[i]);
            a->timeline_plans = (uint32_t)v;
        } else if (!strcmp(o, "--point") && has_val) {
            if (cmd_parse_long(argv[++i], 0, 1000000, &v)) return cmd_usage_error(&cmd_run, "--point: expected a point index, got '%s'", argv[i]);
            a->point = v;
        } else if (o[0] == '-' && o[1]) return cmd_usage_error(&cmd_run, "unknown option or missing value: '%s'", o);
        else if (a->scenario) return cmd_usage_error(&cmd_run, "one scenario at a time (got '%s' and '%s')", a->scenario, o);
        else a->scenario = o;
    }
    if (!a->scenario) return cmd_usage_error(&cmd_run, "no scenario given");
    return 0;
}

/* The validation group covering each point first (cli/study_trust.h), then the assumed parameters
 * that move its one-step plan (cli/study_assume.h). */
static int emit(const run_args_t *a, study_t *s, study_result_t **rs, const study_assumptions_t *as, const study_trust_t *vs,
                size_t first, size_t n)
{
    err_t e;
    if (a->json) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
            json_t *pt = report_json(s, first + i, rs[i]);
            json_object_set_new(pt, "validation", study_trust_json(&vs[i]));
            json_object_set_new(pt, "assumptions", study_assumptions_json(&as[i]));
            json_array_append_new(arr, pt);
        }
        char *txt = arr ? json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(arr);
        if (!txt) return cmd_fail("run", "out of memory");
        puts(txt);
        free(txt);
    } else {
        study_trust_print(stdout, s, vs, first, n);
        for (size_t i = 0; i < n; i++) {
            if (as[i].n) printf("point %zu (%s): ", first + i, study_point_label(s, first + i));
            study_assumptions_print(stdout, &as[i]);
        }
        printf("odsim %s (%s): %s\n", ODSIM_VERSION, odsim_git_rev, a->scenario);
        for (size_t i = 0; i < n; i++) {
            putchar('\n');
            report_text(stdout, s, first + i, rs[i]);
        }
        if (n) printf("\ncalibration profile hash %016llx\n", (unsigned long long)rs[0]->calib_hash);
    }
    if (a->out && report_write_dir(a->out, s, rs, n, &e)) return cmd_fail("run", "%s", e.msg);
    return 0;
}

/* The sweep points as par units: unit i is point first + i, packed (cli/study_wire.h). */
typedef struct run_units {
    study_t *s;
    size_t first;
    const study_opts_t *opts;
} run_units_t;

static int run_unit(size_t i, void *ctx, char **buf, size_t *len, err_t *e)
{
    const run_units_t *u = ctx;
    study_opts_t opts = *u->opts;
    if (i) opts.timeline_path = NULL; /* the timeline shows the first point */
    study_result_t *r = NULL;
    int rc = study_run(u->s, u->first + i, &opts, &r, e);
    if (rc) return rc;
    rc = study_wire_pack(r, buf, len, e);
    study_result_free(r);
    return rc;
}

static int run_main(int argc, char **argv)
{
    run_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) {
        free(a.sets);
        return rc;
    }
    err_t e;
    study_t *s;
    if ((a.timeline && atomicio_check(a.timeline, &e)) || (a.out && report_check_dir(a.out, &e))) {
        free(a.sets);
        return cmd_fail("run", "%s", e.msg);
    }
    if (study_open(a.scenario, a.sets, a.n_sets, &s, &e)) {
        free(a.sets);
        return cmd_fail("run", "%s", e.msg);
    }
    size_t first = 0, n = study_n_points(s);
    if (a.point >= 0) {
        if ((size_t)a.point >= n) rc = cmd_usage_error(&cmd_run, "--point %ld: the scenario has %zu points", a.point, n);
        first = (size_t)a.point;
        n = 1;
    }
    study_result_t **rs = rc ? NULL : calloc(n, sizeof *rs);
    study_assumptions_t *as = rc ? NULL : calloc(n, sizeof *as);
    study_trust_t *vs = rc ? NULL : calloc(n, sizeof *vs);
    trust_t *trust = NULL;
    if (!rc && (!rs || !as || !vs)) rc = cmd_fail("run", "out of memory");
    if (!rc && study_trust_load(s, &trust, &e)) rc = cmd_fail("run", "%s", e.msg);
    for (size_t i = 0; !rc && i < n; i++)
        if (study_trust_of(s, trust, first + i, 0, &vs[i], &e)) rc = cmd_fail("run", "point %zu (%s): %s", first + i, study_point_label(s, first + i), e.msg);
    for (size_t i = 0; !rc && i < n; i++)
        if (study_assumptions_run(s, first + i, &as[i], &e)) rc = cmd_fail("run", "point %zu (%s): %s", first + i, study_point_label(s, first + i), e.msg);
    study_opts_t opts = {.replications = a.replications, .progress = isatty(2) && par_rank() == 0,
                         .timeline_path = a.timeline, .timeline_plans = a.timeline_plans};
    run_units_t u = {s, first, &opts};
    par_out_t *outs = rc || par_rank() ? NULL : calloc(n, sizeof *outs);
    if (!rc && !par_rank() && !outs) rc = cmd_fail("run", "out of memory");
    if (!rc && par_run(n, run_unit, &u, outs, &e)) rc = cmd_fail("run", "%s", e.msg);
    for (size_t i = 0; !rc && outs && i < n; i++) {
        if (outs[i].rc == 1) break; /* not run: an earlier point failed (reported below) */
        if (outs[i].rc || study_wire_unpack(outs[i].buf, outs[i].len, &rs[i], &e)) {
            if (!outs[i].rc) snprintf(outs[i].msg, sizeof outs[i].msg, "%s", e.msg), outs[i].rc = e.code;
            continue;
        }
        if (a.timing) {
            double sim_s = rs[i]->simulated_s;
            fprintf(stderr, "timing: point %zu: %.4g s simulated in %.3g s wall (%.3gx real time), %llu events (%.3g M events/s)\n",
                    first + i, sim_s, rs[i]->wall_s, sim_s / rs[i]->wall_s, (unsigned long long)rs[i]->events,
                    (double)rs[i]->events / rs[i]->wall_s / 1e6);
        }
    }
    /* Every failed point is named (one with a single rank, which stops there); nothing is written. */
    int failed = 0;
    for (size_t i = 0; !rc && outs && i < n; i++)
        if (outs[i].rc && outs[i].rc != 1)
            failed = cmd_fail("run", "point %zu (%s): %s", first + i, study_point_label(s, first + i), outs[i].msg);
    if (failed) rc = failed;
    for (size_t i = 0; outs && i < n; i++) free(outs[i].buf);
    free(outs);
    if (!rc && !par_rank()) rc = emit(&a, s, rs, as, vs, first, n); /* rank 0 writes everything */
    for (size_t i = 0; rs && i < n; i++) study_result_free(rs[i]);
    for (size_t i = 0; as && i < n; i++) study_assumptions_free(&as[i]);
    for (size_t i = 0; vs && i < n; i++) study_trust_free(&vs[i]);
    trust_free(trust);
    free(rs);
    free(as);
    free(vs);
    study_free(s);
    free(a.sets);
    return rc;
}
