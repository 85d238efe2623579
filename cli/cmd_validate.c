/* odsim validate — predicts every held-out measured case through the study assembly (the same
 * scenario → providers → engine path as `odsim run`) and compares p50, p99 and throughput with the
 * measurement, per case and per group (validation/compare.h). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cmd.h"
#include "common/outset.h"
#include "cli/study.h"
#include "common/atomicio.h"
#include "common/cfg.h"
#include "models/calib.h"
#include "models/opkind.h"
#include "validation/compare.h"
#include "validation/heldout.h"
#include "validation/kbcsv.h"
#include "validation/probe.h"
#include "validation/vreport.h"

static const char validate_usage[] =
    "usage: odsim validate DATA_DIR [--calib FILE] [--json] [--out DIR] [options]\n"
    "\n"
    "Predicts every held-out case of DATA_DIR's kbench CSVs (validation/heldout.yaml: whole steps,\n"
    "concurrent sessions, runs at n > 256K) through the study assembly, and compares the predicted\n"
    "p50, p99 and throughput with the measured ones (error %, measured p10..p90 spread), with a\n"
    "summary per group (median and max absolute error). Predictions that used a calibration\n"
    "parameter outside its fitted range, or an assumed one, are flagged. A held-out case measured\n"
    "under another host runtime than the fit set (its CSV's `# runtime:` header, else\n"
    "`# virtualisation:`) is not predicted: it fails.\n"
    "\n"
    "  --calib FILE     calibration profile (default models/calib/<device>.yaml)\n"
    "  --json           print the report as JSON instead of the text table\n"
    "  --out DIR        also write DIR/validate.{txt,json,csv} and the predicted-vs-measured plot\n"
    "                   DIR/validate.{svg,png} (gnuplot)\n"
    "  --heldout FILE   the held-out rule (default validation/heldout.yaml)\n"
    "  --device NAME    the device the CSV headers must name (default: DATA_DIR's basename)\n"
    "  --box NAME       box preset of the measured machine (default h200-1)\n"
    "  --group NAMES    only the held-out groups named (comma-separated; a name takes its subgroups:\n"
    "                   concurrency is concurrency:procs and concurrency:streams)\n"
    "  --max N          at most N cases (0: all)\n"
    "  --sealed         also the sealed groups (heldout.yaml's `sealed: true`, e.g. whole_model): run\n"
    "                   once, when the issue that sealed them closes; without it they are skipped\n"
    "  --floor DIR2     (repeatable, up to 64) other runs of the same cases: each compared value\n"
    "                   gets its run-to-run floor, the largest |difference| of their measurements,\n"
    "                   and each group counts the errors beyond their floor\n"
    "  --repeat DIR2    no predictions: compare with another run's measurements of the same cases\n"
    "                   (DIR2's CSVs, same device), the run-to-run differences no prediction can\n"
    "                   be expected to beat; a case DIR2 lacks counts as failed\n"
    "\n"
    "Exit status: 0 when every case was predicted, 1 when some prediction failed (the report says\n"
    "which and why), 2 bad usage.\n";

#define VAL_MAX_FLOORS 64

typedef struct val_args {
    const char *dir, *calib, *heldout, *device, *box, *out, *group, *repeat;
    const char *floors[VAL_MAX_FLOORS];
    int n_floors, json, sealed;
    long max;
} val_args_t;

static int validate_main(int argc, char **argv);

const cmd_t cmd_validate = {"validate", "predict held-out measured cases and report the errors", validate_usage,
                            validate_main};

static int parse_args(int argc, char **argv, val_args_t *a)
{
    *a = (val_args_t){.heldout = "validation/heldout.yaml", .box = "h200-1"};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *maxs = NULL;
        const char **dst = !strcmp(s, "--calib")     ? &a->calib
                           : !strcmp(s, "--heldout") ? &a->heldout
                           : !strcmp(s, "--device")  ? &a->device
                           : !strcmp(s, "--box")     ? &a->box
                           : !strcmp(s, "--out")     ? &a->out
                           : !strcmp(s, "--group")   ? &a->group
                           : !strcmp(s, "--repeat")  ? &a->repeat
                           : !strcmp(s, "--max")     ? &maxs
                                                     : NULL;
        if (dst) {
            if (i + 1 >= argc) return cmd_usage_error(&cmd_validate, "%s needs a value", s);
            *dst = argv[++i];
            if (maxs) {
                char *end;
                a->max = strtol(maxs, &end, 10);
                if (*end || a->max < 0) return cmd_usage_error(&cmd_validate, "--max wants a count, not '%s'", maxs);
            }
        } else if (!strcmp(s, "--floor")) {
            if (i + 1 >= argc) return cmd_usage_error(&cmd_validate, "--floor needs a value");
            if (a->n_floors == VAL_MAX_FLOORS) return cmd_usage_error(&cmd_validate, "at most %d --floor runs", VAL_MAX_FLOORS);
            a->floors[a->n_floors++] = argv[++i];
        } else if (!strcmp(s, "--json")) {
            a->json = 1;
        } else if (!strcmp(s, "--sealed")) {
            a->sealed = 1;
        } else if (s[0] == '-') {
            return cmd_usage_error(&cmd_validate, "unknown option '%s'", s);
        } else if (!a->dir) {
            a->dir = s;
        } else {
            return cmd_usage_error(&cmd_validate, "one DATA_DIR only ('%s')", s);
        }
    }
    if (!a->dir) return cmd_usage_error(&cmd_validate, "DATA_DIR is missing");
    return 0;
}

/* Whether `group` is one of the comma-separated names of sel, or a subgroup of one ("name:..."). */
static bool group_selected(const char *sel, const char *group)
{
    while (*sel) {
        size_t n = strcspn(sel, ",");
        if (!strncmp(group, sel, n) && (group[n] == 0 || group[n] == ':')) return true;
        sel += n + (sel[n] == ',');
    }
    return false;
}

/* A prediction already made for the same scenario (the name line aside): concurrent sessions'
 * rows share their configuration's simulation. */
typedef struct pcache {
    char *key;
    study_result_t *res;
} pcache_t;

typedef struct run_ctx {
    const val_args_t *a;
    const char *calib;
    pcache_t *cache;
    size_t n_cache;
    uint64_t calib_hash;
} run_ctx_t;

/* Runs (or finds) the study for scenario yaml. *res is owned by the cache. */
static int predict(run_ctx_t *x, const char *yaml, const study_result_t **res, err_t *e)
{
    const char *key = strchr(yaml, '\n');
    key = key ? key + 1 : yaml;
    for (size_t i = 0; i < x->n_cache; i++)
        if (!strcmp(x->cache[i].key, key)) {
            *res = x->cache[i].res;
            return ERR_OK;
        }
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_string("validate-probe.yaml", yaml, strlen(yaml), &doc, e);
    if (rc) return rc;
    study_t *s = NULL;
    rc = study_open_doc(doc, "validate-probe", &s, e);
    study_result_t *r = NULL;
    if (!rc) {
        if (study_n_points(s) != 1) rc = err_set(e, ERR_INVAL, "a probe scenario must have one point");
        study_opts_t opts = {.replications = 1};
        if (!rc) rc = study_run(s, 0, &opts, &r, e);
    }
    study_free(s);
    if (rc) return rc;
    pcache_t *nc = realloc(x->cache, (x->n_cache + 1) * sizeof *nc);
    size_t klen = strlen(key) + 1;
    char *k = nc ? malloc(klen) : NULL;
    if (!k) {
        if (nc) x->cache = nc;
        study_result_free(r);
        return err_set(e, ERR_NOMEM, "validate: out of memory");
    }
    memcpy(k, key, klen);
    x->cache = nc;
    x->cache[x->n_cache++] = (pcache_t){k, r};
    if (!x->calib_hash) x->calib_hash = r->calib_hash;
    *res = r;
    return ERR_OK;
}

/* Predicted p50, p99 (µs) and throughput of row r from its study result. Throughput is compared
 * only where kbench measured it independently of the step time: concurrent sessions (steps per
 * second of a session, or of all sessions for the aggregate row). */
static cmp_pred_t pred_of(const kbrow_t *r, const study_result_t *res)
{
    cmp_pred_t p = {res->step_p50_s.mean * 1e6, res->step_p99_s.mean * 1e6, NAN};
    if (r->op == OPKIND_PREFILL_CHUNK) p = (cmp_pred_t){res->prefill_p50_s.mean * 1e6, res->prefill_p99_s.mean * 1e6, NAN};
    if (r->op == OPKIND_SESSION_STEP)
        p.tput_per_s = isnan(r->concurrent_id) ? res->tps_total.mean : res->tps_session_mean.mean;
    return p;
}

/* Row i of set compared with another run's measurement of the same case (--repeat): that run's
 * p50, p99 and throughput stand for the prediction. */
static int add_repeat(cmp_t *cmp, const char *group, const kbset_t *set, size_t i, const kbset_t *other,
                      const char *other_dir, size_t *n_failed, err_t *e)
{
    const kbrow_t *r = kbset_row(set, i), *o = kbset_match(other, set, i);
    if (!o) {
        char why[600];
        snprintf(why, sizeof why, "%s: no row measuring this case", other_dir);
        (*n_failed)++;
        return cmp_add(cmp, group, r, NULL, why, NULL, NULL, e);
    }
    cmp_pred_t p = {o->t_med_us, o->t_p99_us, r->op == OPKIND_SESSION_STEP ? o->per_s : NAN};
    return cmp_add(cmp, group, r, &p, NULL, NULL, NULL, e);
}

/* The last case added (row i of set) gets its run-to-run floor from the other runs (--floor). */
static int add_floor(cmp_t *cmp, const kbset_t *set, size_t i, kbset_t *const *floors, int n_floors, err_t *e)
{
    const kbrow_t *others[VAL_MAX_FLOORS];
    for (int k = 0; k < n_floors; k++) others[k] = kbset_match(floors[k], set, i);
    return cmp_set_floor(cmp, cmp_n_cases(cmp) - 1, others, (size_t)n_floors, e);
}

/* Row i of set predicted through the study assembly and compared. */
static int add_predicted(run_ctx_t *x, cmp_t *cmp, const char *group, const kbset_t *set, size_t i, size_t *n_failed,
                         err_t *e)
{
    const kbrow_t *r = kbset_row(set, i);
    const char *start = kbset_meta(set, r->file_index, "start");   /* kbench: "busy: ..." */
    char *yaml = NULL;
    int st = probe_scenario(r, x->a->box, x->calib, start && !strncmp(start, "busy", 4),
                            kbset_meta(set, r->file_index, "key_sigma2"), &yaml, e);
    if (st) return st;
    const study_result_t *res = NULL;
    err_t pe;
    err_clear(&pe);
    int prc = predict(x, yaml, &res, &pe);
    if (prc == ERR_NOMEM) {
        st = err_set(e, ERR_NOMEM, "%s", pe.msg);
    } else if (prc) {
        (*n_failed)++;
        st = cmp_add(cmp, group, r, NULL, pe.msg, NULL, yaml, e);
    } else {
        cmp_pred_t p = pred_of(r, res);
        st = cmp_add(cmp, group, r, &p, NULL, res->flags, yaml, e);
    }
    free(yaml);
    return st;
}

static int make_dir(const char *dir, err_t *e)
{
    if (mkdir(dir, 0777) && errno != EEXIST) return err_set(e, ERR_IO, "%s: cannot create directory", dir);
    return ERR_OK;
}

static int write_outputs(const val_args_t *a, const cmp_t *c, const vreport_info_t *info, err_t *e)
{
    char path[4096];
    int rc = make_dir(a->out, e);
    char *json = NULL;
    if (!rc) rc = vreport_json(c, info, &json, e);
    if (!rc) {
        snprintf(path, sizeof path, "%s/validate.json", a->out);
        rc = atomicio_write(path, json, strlen(json), e);
    }
    free(json);
    if (!rc) {
        snprintf(path, sizeof path, "%s/validate.csv", a->out);
        rc = vreport_csv(path, c, info, e);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/validate.txt", a->out);
        atomicio_t *f = NULL;
        rc = atomicio_open(path, &f, e);
        if (!rc) {
            vreport_text(atomicio_file(f), c, info);
            rc = atomicio_commit(f, e);
        }
    }
    char note[1024];
    if (!rc) rc = vreport_plot(a->out, c, note, sizeof note, e);
    if (!rc && *note) fprintf(stderr, "odsim validate: %s\n", note);
    return rc;
}

static int validate_main(int argc, char **argv)
{
    val_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    err_t e;
    err_clear(&e);
    heldout_t *ho = NULL;
    kbset_t *set = NULL;
    cmp_t *cmp = NULL;
    /* an output refused is refused before any prediction */
    static const char *const outs[] = {"validate.json", "validate.csv", "validate.txt", "validate.svg", "validate.png"};
    int st = a.out ? outset_check(a.out, outs, sizeof outs / sizeof outs[0], &e) : ERR_OK;
    char *heldout = st ? NULL : study_data_path(a.heldout);
    if (!st && !heldout) st = err_set(&e, ERR_NOMEM, "out of memory");
    if (!st) st = heldout_load(heldout, &ho, &e);
    free(heldout);
    kbset_t *other = NULL;
    if (!st) st = kbset_load_dir(a.dir, a.device, &set, &e);
    if (!st && !kbset_n_files(set)) st = err_set(&e, ERR_NOTFOUND, "%s: no *.csv files", a.dir);
    if (!st && a.repeat) st = kbset_load_dir(a.repeat, kbset_device(set), &other, &e);
    kbset_t *floors[VAL_MAX_FLOORS] = {NULL};
    for (int k = 0; !st && k < a.n_floors; k++) st = kbset_load_dir(a.floors[k], kbset_device(set), &floors[k], &e);
    if (!st && a.repeat && !kbset_n_files(other)) st = err_set(&e, ERR_NOTFOUND, "%s: no *.csv files", a.repeat);
    if (!st) st = cmp_new(&cmp, &e);
    char calib_default[512];
    if (!st) snprintf(calib_default, sizeof calib_default, "models/calib/%s.yaml", kbset_device(set));
    run_ctx_t x = {&a, a.calib ? a.calib : calib_default, NULL, 0, 0};
    size_t n_failed = 0, n_done = 0;
    double fit_max_n = NAN;   /* the largest context the fit saw: how far a held-out case extrapolates */
    char fit_runtime[64] = "", runtime[64];   /* the host runtime of the fit set (the primary's) */
    for (size_t i = 0; !st && i < kbset_n_rows(set); i++) {
        const kbrow_t *r = kbset_row(set, i);
        if (heldout_classify(ho, r, NULL, 0) != HELDOUT_FIT) continue;
        if (!isnan(r->n_tokens) && !(r->n_tokens <= fit_max_n)) fit_max_n = r->n_tokens;
        if (!*fit_runtime) kbset_runtime(set, r->file_index, fit_runtime, sizeof fit_runtime);
    }
    for (size_t i = 0; !st && i < kbset_n_rows(set); i++) {
        const kbrow_t *r = kbset_row(set, i);
        char group[128];
        heldout_class_t hc = heldout_classify(ho, r, group, sizeof group);
        if (hc != HELDOUT_HELD && !(hc == HELDOUT_SEALED && a.sealed)) continue;
        if (a.group && !group_selected(a.group, group)) continue;
        if (a.max && (long)n_done >= a.max) break;
        n_done++;
        kbset_runtime(set, r->file_index, runtime, sizeof runtime);
        if (!other && *runtime && *fit_runtime && strcmp(runtime, fit_runtime)) {   /* issue 31: held out on the primary's runtime */
            char why[256];
            snprintf(why, sizeof why, "measured under %s, the fit set under %s: held-out data comes from the primary's runtime",
                     runtime, fit_runtime);
            n_failed++;
            st = cmp_add(cmp, group, r, NULL, why, NULL, NULL, &e);
            continue;
        }
        st = other ? add_repeat(cmp, group, set, i, other, a.repeat, &n_failed, &e)
                   : add_predicted(&x, cmp, group, set, i, &n_failed, &e);
        if (!st && a.n_floors) st = add_floor(cmp, set, i, floors, a.n_floors, &e);
    }
    if (!st && !cmp_n_cases(cmp))
        st = a.group ? err_set(&e, ERR_NOTFOUND, "%s: no held-out cases in the groups '%s' (%s)", a.dir, a.group, a.heldout)
                     : err_set(&e, ERR_NOTFOUND, "%s: no held-out cases (%s)", a.dir, a.heldout);
    if (!st) {
        vreport_info_t info = {a.dir, other ? "" : x.calib, a.heldout, x.calib_hash, heldout_hash(ho), a.repeat, fit_max_n};
        if (a.json) {
            char *json = NULL;
            st = vreport_json(cmp, &info, &json, &e);
            if (!st) puts(json);
            free(json);
        } else {
            vreport_text(stdout, cmp, &info);
            char why[512];
            if (!other && cmp_within(cmp, 5, 15, why, sizeof why))
                printf("\nissue targets (<= 5%% median, <= 15%% max |error| per held-out group): met\n");
            else if (!other)
                printf("\nissue targets (<= 5%% median, <= 15%% max |error| per held-out group): not met (first: %s)\n", why);
        }
        if (!st && a.out) st = write_outputs(&a, cmp, &info, &e);
    }
    for (size_t i = 0; i < x.n_cache; i++) {
        free(x.cache[i].key);
        study_result_free(x.cache[i].res);
    }
    free(x.cache);
    cmp_free(cmp);
    for (int k = 0; k < a.n_floors; k++) kbset_free(floors[k]);
    kbset_free(other);
    kbset_free(set);
    heldout_free(ho);
    if (st) return cmd_fail("validate", "%s", e.msg);
    if (n_failed && a.repeat)
        return cmd_fail("validate", "%zu of %zu held-out cases have no measurement in %s (see the report)", n_failed, n_done, a.repeat);
    if (n_failed) return cmd_fail("validate", "%zu of %zu held-out cases could not be predicted (see the report)", n_failed, n_done);
    return 0;
}
