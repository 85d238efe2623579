/* odsim validate — predicts every held-out measured case through the study assembly (the same
 * scenario → providers → engine path as `odsim run`; a replay workload's rows through `odsim replay`'s
 * prediction, cli/replay_pred.h) and compares p50, p99 and throughput with the measurement, per case
 * and per group (validation/compare.h). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cmd.h"
#include "cli/replay_pred.h"
#include "common/outset.h"
#include "common/str.h"
#include "cli/study.h"
#include "cli/val_clamp.h"
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
    "  --workloads DIR  where replay rows' workloads are (default validation/workloads): a row of the\n"
    "                   replay suite is predicted from DIR/VARIANT.replay or DIR/*/VARIANT.replay, whose\n"
    "                   bytes must hash to the row's workload_fnv (else an error naming the row)\n"
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
    const char *dir, *calib, *heldout, *device, *box, *out, *group, *repeat, *workloads;
    const char *floors[VAL_MAX_FLOORS];
    int n_floors, json, sealed;
    long max;
} val_args_t;

static int validate_main(int argc, char **argv);

const cmd_t cmd_validate = {"validate", "predict held-out measured cases and report the errors", validate_usage,
                            validate_main};

static int parse_args(int argc, char **argv, val_args_t *a)
{
    *a = (val_args_t){.heldout = "validation/heldout.yaml", .box = "h200-1", .workloads = "validation/workloads"};
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
                           : !strcmp(s, "--workloads") ? &a->workloads
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

/* A replay workload's prediction with some parameters clamped (val_clamp). */
typedef struct rclamp {
    char *clamp;
    rpred_t pred;
    int rc;                /* the prediction's error code (ERR_OK: made) */
} rclamp_t;

/* A replay workload's prediction, made once for all its rows. */
typedef struct rcache {
    char name[RF_NAME_MAX + 1];
    char *path;            /* the workload file */
    uint64_t fnv;
    rf_mode_t mode;
    uint32_t n_sessions;
    uint64_t min_steps;
    char group[128];       /* the held-out group of its rows */
    rpred_t pred;
    char *error;           /* the prediction failed: why (NULL: it was made) */
    rclamp_t *cl;
    size_t n_cl;
} rcache_t;

typedef struct run_ctx {
    const val_args_t *a;
    const char *calib;
    pcache_t *cache;
    size_t n_cache;
    rcache_t *rcache;
    size_t n_rcache;
    struct missing **missing; /* rows standing for workloads without a measured row */
    size_t n_missing;
    char *workloads;       /* the workloads directory, resolved */
    uint64_t calib_hash;
} run_ctx_t;

/* Runs (or finds) the study for scenario yaml, the parameters of `clamp` clamped (NULL: none).
 * *res is owned by the cache. */
static int predict(run_ctx_t *x, const char *yaml, const char *clamp, const study_result_t **res, err_t *e)
{
    const char *rest = strchr(yaml, '\n');
    rest = rest ? rest + 1 : yaml;
    size_t klen = (clamp ? strlen(clamp) : 0) + strlen(rest) + 2;
    char *key = malloc(klen);
    if (!key) return err_set(e, ERR_NOMEM, "validate: out of memory");
    snprintf(key, klen, "%s\n%s", clamp ? clamp : "", rest);
    for (size_t i = 0; i < x->n_cache; i++)
        if (!strcmp(x->cache[i].key, key)) {
            *res = x->cache[i].res;
            free(key);
            return ERR_OK;
        }
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_string("validate-probe.yaml", yaml, strlen(yaml), &doc, e);
    study_t *s = NULL;
    if (!rc) rc = study_open_doc(doc, "validate-probe", &s, e);
    study_result_t *r = NULL;
    if (!rc) {
        if (study_n_points(s) != 1) rc = err_set(e, ERR_INVAL, "a probe scenario must have one point");
        study_opts_t opts = {.replications = 1, .clamp = clamp};
        if (!rc) rc = study_run(s, 0, &opts, &r, e);
    }
    study_free(s);
    pcache_t *nc = rc ? NULL : realloc(x->cache, (x->n_cache + 1) * sizeof *nc);
    if (!rc && !nc) rc = err_set(e, ERR_NOMEM, "validate: out of memory");
    if (rc) {
        study_result_free(r);
        free(key);
        return rc;
    }
    x->cache = nc;
    x->cache[x->n_cache++] = (pcache_t){key, r};
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

/* A probe case's prediction again, some parameters clamped (val_clamp_fn). */
typedef struct probe_clamp {
    run_ctx_t *x;
    const char *yaml;
    const kbrow_t *row;
} probe_clamp_t;

static int probe_clamped(void *arg, const char *clamp, cmp_pred_t *out, err_t *e)
{
    probe_clamp_t *pc = arg;
    const study_result_t *res = NULL;
    int rc = predict(pc->x, pc->yaml, clamp, &res, e);
    if (!rc) *out = pred_of(pc->row, res);
    return rc;
}

/* Row i of set predicted through the study assembly and compared, and flagged or not (val_clamp). */
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
    int prc = predict(x, yaml, NULL, &res, &pe);
    if (prc == ERR_NOMEM) {
        st = err_set(e, ERR_NOMEM, "%s", pe.msg);
    } else if (prc) {
        (*n_failed)++;
        st = cmp_add(cmp, group, r, NULL, pe.msg, NULL, yaml, e);
    } else {
        cmp_pred_t p = pred_of(r, res);
        st = cmp_add(cmp, group, r, &p, NULL, res->flags, yaml, e);
        probe_clamp_t pc = {x, yaml, r};
        if (!st) st = val_clamp_case(cmp, cmp_n_cases(cmp) - 1, res->clamps, probe_clamped, &pc, e);
    }
    free(yaml);
    return st;
}

/* The file of workload `name` under dir: dir/NAME.replay, else dir/SUB/NAME.replay for exactly one
 * subdirectory SUB (a set's own folder). *out is heap (NULL when there is none). Errors: ERR_INVAL
 * (in several sets), ERR_NOMEM. */
static int workload_find(const char *dir, const char *name, char **out, err_t *e)
{
    struct stat st;
    size_t n = strlen(dir) + strlen(name) + 300;
    char *path = malloc(n), *found = NULL;
    if (!path) return err_set(e, ERR_NOMEM, "out of memory");
    *out = NULL;
    snprintf(path, n, "%s/%s.replay", dir, name);
    if (!stat(path, &st) && S_ISREG(st.st_mode)) {
        *out = path;
        return ERR_OK;
    }
    DIR *d = opendir(dir);
    int rc = ERR_OK;
    for (struct dirent *de; !rc && d && (de = readdir(d));) {
        if (de->d_name[0] == '.' || strlen(de->d_name) > 255) continue;
        snprintf(path, n, "%s/%s/%s.replay", dir, de->d_name, name);
        if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        if (found) rc = err_set(e, ERR_INVAL, "workload %s: in two sets (%s and %s)", name, found, path);
        else if (!(found = malloc(n))) rc = err_set(e, ERR_NOMEM, "out of memory");
        else memcpy(found, path, n);
    }
    if (d) closedir(d);
    free(path);
    if (rc) free(found);
    else *out = found;
    return rc;
}

/* The prediction of row r's workload (its variant), made on first use: the file found, read, its
 * bytes checked against the row's workload_fnv and predicted. Errors (fatal: the data and the files
 * disagree): ERR_NOTFOUND (no file), ERR_INVAL (no or another hash, another name), ERR_PARSE; a
 * failed prediction is kept in the entry. */
static int replay_entry(run_ctx_t *x, const kbrow_t *r, const rcache_t **out, err_t *e)
{
    for (size_t i = 0; i < x->n_rcache; i++)
        if (!strcmp(x->rcache[i].name, r->variant)) {
            *out = &x->rcache[i];
            return ERR_OK;
        }
    char *path = NULL;
    int rc = workload_find(x->workloads, r->variant, &path, e);
    if (!rc && !path)
        rc = err_set(e, ERR_NOTFOUND, "%s:%d: no workload %s.replay in %s or its sets' folders (--workloads)", r->file,
                     r->line, r->variant, x->workloads);
    rf_workload_t *w = rc ? NULL : malloc(sizeof *w);
    if (!rc && !w) rc = err_set(e, ERR_NOMEM, "out of memory");
    uint64_t fnv = 0;
    if (!rc) rc = rpred_load(path, w, &fnv, e);
    char *end = NULL;
    uint64_t want = !rc && r->workload_fnv ? strtoull(r->workload_fnv, &end, 16) : 0;
    if (!rc && (!*r->workload_fnv || *end))
        rc = err_set(e, ERR_INVAL, "%s:%d: column 'workload_fnv': '%s' is not a hexadecimal FNV-1a 64 of the workload file",
                     r->file, r->line, r->workload_fnv);
    else if (!rc && want != fnv)
        rc = err_set(e, ERR_INVAL, "%s:%d: workload_fnv %016" PRIx64 ", but %s hashes to %016" PRIx64
                     ": not the file that was measured", r->file, r->line, want, path, fnv);
    else if (!rc && strcmp(w->name, r->variant))
        rc = err_set(e, ERR_INVAL, "%s:%d: %s names workload '%s', the row '%s'", r->file, r->line, path, w->name, r->variant);
    rcache_t *nc = rc ? NULL : realloc(x->rcache, (x->n_rcache + 1) * sizeof *nc);
    if (!rc && !nc) rc = err_set(e, ERR_NOMEM, "out of memory");
    if (rc) {
        free(w);
        free(path);
        return rc;
    }
    x->rcache = nc;
    rcache_t *c = &nc[x->n_rcache++];
    *c = (rcache_t){.path = path, .fnv = fnv, .mode = w->mode, .n_sessions = w->n_sessions, .min_steps = w->min_steps};
    snprintf(c->name, sizeof c->name, "%s", w->name);
    rpred_opts_t o = {.calib_path = x->calib, .box = x->a->box};
    err_t pe;
    int prc = rpred_run(w, &o, &c->pred, &pe);
    free(w);
    if (prc == ERR_NOMEM) return err_set(e, ERR_NOMEM, "%s", pe.msg);
    if (prc && !(c->error = str_dup(pe.msg))) return err_set(e, ERR_NOMEM, "out of memory");
    if (!prc && !x->calib_hash) x->calib_hash = c->pred.calib_hash;
    *out = c;
    return ERR_OK;
}

/* A replay row's prediction again, some parameters clamped (val_clamp_fn): the workload's, made
 * once per set of parameters. */
typedef struct replay_clamp {
    run_ctx_t *x;
    rcache_t *c;
    double id;             /* the row's session (NAN: pooled) */
} replay_clamp_t;

static int replay_clamped(void *arg, const char *clamp, cmp_pred_t *out, err_t *e)
{
    replay_clamp_t *rc = arg;
    rcache_t *c = rc->c;
    rclamp_t *k = NULL;
    for (size_t i = 0; i < c->n_cl && !k; i++)
        if (!strcmp(c->cl[i].clamp, clamp)) k = &c->cl[i];
    if (!k) {
        rclamp_t *nv = realloc(c->cl, (c->n_cl + 1) * sizeof *nv);
        if (!nv) return err_set(e, ERR_NOMEM, "out of memory");
        c->cl = nv;
        k = &nv[c->n_cl];
        *k = (rclamp_t){.clamp = str_dup(clamp)};
        if (!k->clamp) return err_set(e, ERR_NOMEM, "out of memory");
        c->n_cl++;
        rpred_opts_t o = {.calib_path = rc->x->calib, .box = rc->x->a->box, .clamp = clamp};
        rf_workload_t *w = malloc(sizeof *w);   /* about 1 MB: read again, not kept */
        uint64_t fnv;
        k->rc = w ? rpred_load(c->path, w, &fnv, e) : err_set(e, ERR_NOMEM, "out of memory");
        if (!k->rc) k->rc = rpred_run(w, &o, &k->pred, e);
        free(w);
        if (k->rc == ERR_NOMEM) return k->rc;
    }
    if (k->rc) return err_set(e, k->rc, "replay %s with %s clamped: the prediction failed", c->name, clamp);
    const rpred_stat_t *s = isnan(rc->id) ? &k->pred.pooled : &k->pred.session[(uint32_t)rc->id];
    *out = (cmp_pred_t){s->p50_s * 1e6, s->p99_s * 1e6, s->per_s};
    return ERR_OK;
}

/* Row r of the replay suite: a session's row (concurrent_id i) against the prediction's session i,
 * the aggregate row against every session's steps pooled (steps per second summed). */
static int add_replay(run_ctx_t *x, cmp_t *cmp, const char *group, const kbrow_t *r, size_t *n_failed, err_t *e)
{
    rcache_t *c = NULL;
    int st = replay_entry(x, r, (const rcache_t **)&c, e);
    if (st) return st;
    snprintf(c->group, sizeof c->group, "%s", group);
    char why[600] = "", mode[32];
    snprintf(mode, sizeof mode, "%.*s", (int)strcspn(r->policy, ":"), r->policy);
    const char *colon = strchr(r->policy, ':');
    double sessions = colon ? atof(colon + 1) : NAN;
    double id = r->concurrent_id;
    if (c->error) snprintf(why, sizeof why, "%s", c->error);
    else if (strcmp(mode, rf_mode_name((int)c->mode)) || sessions != c->n_sessions)
        snprintf(why, sizeof why, "policy %s, but %s runs %u sessions as %s", r->policy, c->path, c->n_sessions,
                 rf_mode_name((int)c->mode));
    else if (!isnan(id) && !(id >= 0 && id < c->n_sessions && id == floor(id)))
        snprintf(why, sizeof why, "concurrent_id %g: %s has sessions 0..%u", id, c->path, c->n_sessions - 1);
    if (*why) {
        (*n_failed)++;
        return cmp_add(cmp, group, r, NULL, why, NULL, c->path, e);
    }
    if (!isnan(id) && r->reps < (double)c->min_steps) {   /* the exclusion rule (validation/heldout.yaml) */
        fprintf(stderr, "odsim validate: %s:%d: excluded as unstable: %s session %g measured %g steps, fewer than its "
                "min_steps %" PRIu64 "\n", r->file, r->line, c->name, id, r->reps, c->min_steps);
        return ERR_OK;
    }
    const rpred_stat_t *s = isnan(id) ? &c->pred.pooled : &c->pred.session[(uint32_t)id];
    cmp_pred_t p = {s->p50_s * 1e6, s->p99_s * 1e6, s->per_s};
    st = cmp_add(cmp, group, r, &p, NULL, c->pred.flags, c->path, e);
    replay_clamp_t rcl = {x, c, id};
    return st ? st : val_clamp_case(cmp, cmp_n_cases(cmp) - 1, c->pred.clamps, replay_clamped, &rcl, e);
}

/* A row standing for a workload of a validated set that has no measured row. */
typedef struct missing {
    kbrow_t row;
    char *path, *name;
    char policy[32];
} missing_t;

static void missing_free(missing_t *m)
{
    if (!m) return;
    free(m->path);
    free(m->name);
    free(m);
}

/* The workload file `file` of folder dir, read for its name and mode, as a row of suite replay. */
static int missing_row(const char *dir, const char *file, missing_t **out, err_t *e)
{
    missing_t *m = calloc(1, sizeof *m);
    rf_workload_t *w = malloc(sizeof *w);
    size_t n = strlen(dir) + strlen(file) + 2;
    int rc = m && w && (m->path = malloc(n)) ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
    uint64_t fnv;
    if (!rc) snprintf(m->path, n, "%s/%s", dir, file);
    if (!rc) rc = rpred_load(m->path, w, &fnv, e);
    if (!rc && !(m->name = str_dup(w->name))) rc = err_set(e, ERR_NOMEM, "out of memory");
    if (rc) {
        free(w);
        missing_free(m);
        return rc;
    }
    snprintf(m->policy, sizeof m->policy, "%s:%u", rf_mode_name((int)w->mode), w->n_sessions);
    free(w);
    kbrow_t *r = &m->row;
    r->file = m->path;
    r->suite = "replay";
    r->op_name = "session_step";
    r->op = OPKIND_SESSION_STEP;
    r->variant = m->name;
    r->policy = m->policy;
    r->allocator = r->placement = r->layout = r->method = r->model = r->workload_fnv = "";
    double *nums[] = {&r->n_tokens, &r->heads, &r->bits, &r->k, &r->batch, &r->piece_bytes, &r->region_bytes, &r->pieces,
                      &r->blocks, &r->streams, &r->procs, &r->bytes_moved, &r->reps, &r->t_med_us, &r->t_p10_us,
                      &r->t_p90_us, &r->t_p99_us, &r->per_s, &r->gbps, &r->concurrent_id, &r->qheads, &r->chunk_tokens,
                      &r->t_mean_us, &r->flops};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) *nums[i] = NAN;
    *out = m;
    return ERR_OK;
}

static bool has_entry(const run_ctx_t *x, const char *name)
{
    for (size_t i = 0; i < x->n_rcache; i++)
        if (!strcmp(x->rcache[i].name, name)) return true;
    return false;
}

/* Workloads of a set folder some of whose rows were validated, of the same group, that have no
 * measured row: not measured yet, or kbench replay failed on them (it says which in its log and
 * exits 1; the data's README records each committed run's failures). They are counted per group and
 * named in a note, never predicted and never counted as cases: a partly measured development set is
 * not a failed validation. */
static int add_missing(run_ctx_t *x, const heldout_t *ho, err_t *e)
{
    int rc = ERR_OK;
    for (size_t i = 0; !rc && i < x->n_rcache; i++) {
        const rcache_t *c = &x->rcache[i];
        const char *slash = strrchr(c->path, '/');
        size_t dl = slash ? (size_t)(slash - c->path) : 1;
        bool seen = false;   /* the folder of an earlier entry of the same group */
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(x->rcache[j].group, c->group) && !strncmp(x->rcache[j].path, c->path, dl) &&
                   x->rcache[j].path[dl] == '/' && !strchr(x->rcache[j].path + dl + 1, '/');
        if (seen || !*c->group) continue;
        char *dir = slash ? strndup(c->path, dl) : str_dup(".");
        DIR *d = dir ? opendir(dir) : NULL;
        if (!dir) rc = err_set(e, ERR_NOMEM, "out of memory");
        for (struct dirent *de; !rc && d && (de = readdir(d));) {
            size_t n = strlen(de->d_name);
            if (n < 8 || strcmp(de->d_name + n - 7, ".replay")) continue;
            missing_t *m = NULL;
            char group[128];
            rc = missing_row(dir, de->d_name, &m, e);
            if (!rc && (has_entry(x, m->name) || heldout_classify(ho, &m->row, group, sizeof group) == HELDOUT_UNUSED ||
                        strcmp(group, c->group))) {
                missing_free(m);
                continue;
            }
            missing_t **nm = rc ? NULL : realloc(x->missing, (x->n_missing + 1) * sizeof *nm);
            if (!rc && !nm) rc = err_set(e, ERR_NOMEM, "out of memory");
            if (rc) {
                missing_free(m);
                break;
            }
            snprintf(m->policy, sizeof m->policy, "%s", c->group);   /* the group, for the note */
            x->missing = nm;
            x->missing[x->n_missing++] = m;
        }
        if (d) closedir(d);
        free(dir);
    }
    return rc;
}

/* One note line per group with unmeasured workloads: how many, and the first few names. */
static void print_missing(FILE *fp, const run_ctx_t *x)
{
    for (size_t i = 0; i < x->n_missing; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++) first = strcmp(x->missing[j]->policy, x->missing[i]->policy) != 0;
        if (!first) continue;
        size_t n = 0;
        for (size_t j = i; j < x->n_missing; j++) n += !strcmp(x->missing[j]->policy, x->missing[i]->policy);
        fprintf(fp, "\nnote: %s: %zu workload(s) have no measured row (not measured yet, or kbench replay failed on them:"
                    " its log says which), e.g. %s\n", x->missing[i]->policy, n, x->missing[i]->name);
    }
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
    run_ctx_t x = {.a = &a, .calib = a.calib ? a.calib : calib_default, .workloads = study_data_path(a.workloads)};
    if (!st && !x.workloads) st = err_set(&e, ERR_NOMEM, "out of memory");
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
        size_t cases = cmp_n_cases(cmp);   /* an excluded row adds none */
        st = other                       ? add_repeat(cmp, group, set, i, other, a.repeat, &n_failed, &e)
             : !strcmp(r->suite, "replay") ? add_replay(&x, cmp, group, r, &n_failed, &e)
                                           : add_predicted(&x, cmp, group, set, i, &n_failed, &e);
        if (!st && a.n_floors && cmp_n_cases(cmp) > cases) st = add_floor(cmp, set, i, floors, a.n_floors, &e);
    }
    if (!st && !other && !a.max) st = add_missing(&x, ho, &e);
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
            print_missing(stdout, &x);
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
    for (size_t i = 0; i < x.n_rcache; i++) {
        free(x.rcache[i].path);
        free(x.rcache[i].error);
        rpred_free(&x.rcache[i].pred);
        for (size_t k = 0; k < x.rcache[i].n_cl; k++) {
            free(x.rcache[i].cl[k].clamp);
            rpred_free(&x.rcache[i].cl[k].pred);
        }
        free(x.rcache[i].cl);
    }
    free(x.rcache);
    for (size_t i = 0; i < x.n_missing; i++) missing_free(x.missing[i]);
    free(x.missing);
    free(x.workloads);
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
