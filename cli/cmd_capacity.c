/* odsim capacity SCENARIO — per sweep point, the largest closed population of sessions that meets
 * the SLO in at least 95% of replications, found by doubling then bisection, with what binds. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "common/version.h"
#include "cli/report.h"
#include "cli/study.h"
#include "cli/study_assume.h"
#include "cli/study_trust.h"
#include "cli/study_wire.h"
#include "cli/par.h"
#include "common/gnuplot.h"

static int capacity_main(int argc, char **argv);

const cmd_t cmd_capacity = {
    "capacity", "largest number of concurrent sessions meeting the SLO, per sweep point",
    "usage: odsim capacity SCENARIO.yaml [options]\n"
    "       odsim capacity --box BOX --model MODEL --method METHOD --context TOKENS [--slo LIST] [options]\n"
    "  The workload must be a closed-population generator (workload.generator.arrival: closed): the\n"
    "  search varies the population N (users, each running one agent session at a time). A point is\n"
    "  feasible when the SLO holds in at least 95% of its replications.\n"
    "  --set KEY=VALUE  override any scenario key (repeatable)\n"
    "  --max N          largest population tried (default 4096)\n"
    "  --json           results as JSON on stdout\n"
    "  --out DIR        capacity.csv and its plot (SVG, PNG), and results.{csv,json} and plots of each\n"
    "                   point at capacity, published together with DIR/MANIFEST (see odsim run --help)\n"
    "  --replications R run exactly R replications (run.replications, and run.ci_target off)\n"
    "quick form (no scenario file): scenarios/capacity_quick.yaml with these keys set; sessions join\n"
    "holding 3/4 of TOKENS (a reused prefix) and grow towards TOKENS:\n"
    "  --box BOX        hardware.box (models/catalog/boxes.yaml)\n"
    "  --model MODEL    model.name (models/catalog/llms.yaml)\n"
    "  --method METHOD  method.method; --budget BITS and --k K set method.budget and method.k\n"
    "  --context TOKENS context the sessions grow to, with the scenarios' suffixes (1M = 10^6, 1Mi = 2^20)\n"
    "  --slo LIST       comma-separated step_p99=DURATION, ttft=DURATION, tokens_per_s=X, attainment=X\n"
    "                   (default: the template's TTFT 30 s, 5 tokens/s, attainment 0.9)\n",
    capacity_main};

typedef struct cap_point {
    uint32_t sessions;        /* largest feasible population (0: none) */
    study_result_t *at;       /* result at that population (NULL when 0) */
    study_result_t *beyond;   /* result at the first infeasible population tried (NULL: none) */
    char *binding;            /* what stops the next session */
    uint32_t runs;
} cap_point_t;

typedef struct cap_args {
    const char *scenario, *out;
    const char *box, *model, *method, *context, *slo, *budget, *k; /* the quick form */
    bool quick;
    char *quick_sets;   /* the quick form's --set strings, NUL-separated (owned) */
    const char **sets;
    size_t n_sets;
    bool json;
    long max, replications;
} cap_args_t;

/* Runs point i at population n; *ok tells whether the SLO held. Infeasible memory counts as a miss. */
static int try_population(study_t *s, size_t i, uint32_t n, const cap_args_t *a, bool *ok, study_result_t **out, err_t *e)
{
    study_opts_t o = {.replications = (int)a->replications, .sessions = n};
    *out = NULL;
    int rc = study_run(s, i, &o, out, e);
    if (rc == ERR_INFEASIBLE) {
        *ok = false;
        return ERR_OK;
    }
    if (rc) return rc;
    *ok = (*out)->slo_met && !(*out)->evictions && !(*out)->waiting;
    return ERR_OK;
}

static char *binding_of(const study_result_t *r, const err_t *infeasible)
{
    char buf[512];
    if (!r) snprintf(buf, sizeof buf, "memory: %s", infeasible->msg);
    else if (r->preemptions || r->waiting || r->admit_wait_p99_s > 0) {
        /* the fuller of the two pools is the one sessions wait for */
        double hbm = r->hbm_capacity_bytes > 0 ? r->hbm_peak_bytes / r->hbm_capacity_bytes : 0;
        double host = r->host_capacity_bytes > 0 ? r->host_peak_bytes / r->host_capacity_bytes : 0;
        bool h = hbm >= host;
        snprintf(buf, sizeof buf, "%s capacity (sessions wait for memory; peak %.1f of %.1f GB)", h ? "HBM" : "host DRAM",
                 (h ? r->hbm_peak_bytes : r->host_peak_bytes) / 1e9, (h ? r->hbm_capacity_bytes : r->host_capacity_bytes) / 1e9);
    }
    else snprintf(buf, sizeof buf, "%s", r->binding ? r->binding : "-");
    return strdup(buf);
}

static void keep(study_result_t **slot, study_result_t *r)
{
    study_result_free(*slot);
    *slot = r;
}

static int search(study_t *s, size_t i, const cap_args_t *a, cap_point_t *cp, err_t *e)
{
    uint32_t lo = 0, hi = 0; /* lo feasible (0 trivially), hi infeasible (0: none found yet) */
    err_t why = {0};
    for (uint32_t n = 1; n <= (uint32_t)a->max; n *= 2) {
        bool ok;
        study_result_t *r;
        int rc = try_population(s, i, n, a, &ok, &r, &why);
        cp->runs++;
        if (rc) return *e = why, rc;
        if (ok) { lo = n; keep(&cp->at, r); }
        else { hi = n; keep(&cp->beyond, r); break; }
    }
    while (hi && hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        bool ok;
        study_result_t *r;
        int rc = try_population(s, i, mid, a, &ok, &r, &why);
        cp->runs++;
        if (rc) return *e = why, rc;
        if (ok) { lo = mid; keep(&cp->at, r); }
        else { hi = mid; keep(&cp->beyond, r); }
    }
    cp->sessions = lo;
    cp->binding = hi ? binding_of(cp->beyond, &why) : strdup("none up to --max");
    return cp->binding ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
}

/* The sweep points as par units (cli/par.h): unit i is point i's search, packed as its sessions,
 * runs and binding, then its results at and beyond capacity (cli/study_wire.h; length 0: none). */
typedef struct cap_units {
    study_t *s;
    const cap_args_t *a;
} cap_units_t;

typedef struct cap_wire {
    uint32_t sessions, runs;
    uint64_t binding_len, at_len, beyond_len;
} cap_wire_t;

static int cap_unit(size_t i, void *ctx, char **buf, size_t *len, err_t *e)
{
    const cap_units_t *u = ctx;
    if (isatty(2) && !par_rank()) fprintf(stderr, "capacity: point %zu/%zu (%s)\n", i + 1, study_n_points(u->s), study_point_label(u->s, i));
    cap_point_t cp = {0};
    char *at = NULL, *beyond = NULL;
    size_t at_len = 0, beyond_len = 0;
    int rc = search(u->s, i, u->a, &cp, e);
    if (!rc && cp.at) rc = study_wire_pack(cp.at, &at, &at_len, e);
    if (!rc && cp.beyond) rc = study_wire_pack(cp.beyond, &beyond, &beyond_len, e);
    cap_wire_t w = {cp.sessions, cp.runs, cp.binding ? strlen(cp.binding) : 0, at_len, beyond_len};
    char *b = rc ? NULL : malloc(sizeof w + w.binding_len + at_len + beyond_len);
    if (!rc && !b) rc = err_set(e, ERR_NOMEM, "out of memory");
    if (b) {
        memcpy(b, &w, sizeof w);
        if (w.binding_len) memcpy(b + sizeof w, cp.binding, w.binding_len);
        if (at_len) memcpy(b + sizeof w + w.binding_len, at, at_len);
        if (beyond_len) memcpy(b + sizeof w + w.binding_len + at_len, beyond, beyond_len);
        *buf = b;
        *len = sizeof w + w.binding_len + at_len + beyond_len;
    }
    free(at);
    free(beyond);
    study_result_free(cp.at);
    study_result_free(cp.beyond);
    free(cp.binding);
    return rc;
}

/* A point packed by cap_unit into *cp (which owns what it gets, also on error). */
static int unpack_point(const char *buf, size_t len, cap_point_t *cp, err_t *e)
{
    cap_wire_t w;
    if (len < sizeof w) return err_set(e, ERR_PARSE, "a packed capacity point of %zu bytes is malformed", len);
    memcpy(&w, buf, sizeof w);
    if (w.binding_len > len || w.at_len > len || w.beyond_len > len || sizeof w + w.binding_len + w.at_len + w.beyond_len != len)
        return err_set(e, ERR_PARSE, "a packed capacity point of %zu bytes is malformed", len);
    cp->sessions = w.sessions;
    cp->runs = w.runs;
    if (!(cp->binding = strndup(buf + sizeof w, w.binding_len))) return err_set(e, ERR_NOMEM, "out of memory");
    const char *p = buf + sizeof w + w.binding_len;
    if (w.at_len && study_wire_unpack(p, w.at_len, &cp->at, e)) return e->code;
    if (w.beyond_len && study_wire_unpack(p + w.at_len, w.beyond_len, &cp->beyond, e)) return e->code;
    return 0;
}


#define QUICK_TEMPLATE "scenarios/capacity_quick.yaml"

/* Appends "key=value" to a->quick_sets and a->sets. */
static int quick_add(cap_args_t *a, size_t *used, const char *key, const char *value)
{
    size_t n = strlen(key) + strlen(value) + 2;
    char *p = a->quick_sets + *used;
    snprintf(p, n, "%s=%s", key, value);
    *used += n;
    a->sets[a->n_sets++] = p;
    return 0;
}

/* The quick form as --set overrides of the template (values pass through the scenario reader, so
 * every unit and range check is the scenario's). */
static int quick_sets(cap_args_t *a)
{
    if (!a->box || !a->model || !a->method || !a->context)
        return cmd_usage_error(&cmd_capacity, "the quick form needs --box, --model, --method and --context");
    long long ctx;
    if (cmd_parse_count(a->context, 4096, 1LL << 32, &ctx))
        return cmd_usage_error(&cmd_capacity, "--context %s: expected a token count from 4096 to 4Gi (e.g. 1M, 1Mi)", a->context);
    size_t cap = 1024 + strlen(a->box) + strlen(a->model) + strlen(a->method) + (a->slo ? 2 * strlen(a->slo) : 0) +
                 (a->budget ? strlen(a->budget) : 0) + (a->k ? strlen(a->k) : 0);
    size_t used = 0;
    if (!(a->quick_sets = malloc(cap))) return cmd_fail("capacity", "out of memory");
    char num[32];
    quick_add(a, &used, "hardware.box", a->box);
    quick_add(a, &used, "model.name", a->model);
    quick_add(a, &used, "method.method", a->method);
    if (a->budget) quick_add(a, &used, "method.budget", a->budget);
    if (a->k) quick_add(a, &used, "method.k", a->k);
    snprintf(num, sizeof num, "%lld", (long long)ctx);
    quick_add(a, &used, "workload.generator.max_context_tokens", num);
    quick_add(a, &used, "workload.generator.shared_prefix_tokens", num);
    snprintf(num, sizeof num, "%lld", (long long)(ctx / 4 * 3));
    quick_add(a, &used, "workload.generator.initial_context_median", num);
    static const char *const slo_keys[][2] = {
        {"step_p99", "slo.step_p99_s"}, {"ttft", "slo.ttft_s"}, {"tokens_per_s", "slo.tokens_per_s"}, {"attainment", "slo.attainment"}};
    unsigned seen = 0;
    for (const char *p = a->slo; p && *p;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p), *eq = memchr(p, '=', (size_t)(end - p));
        size_t kl = eq ? (size_t)(eq - p) : 0;
        int hit = -1;
        for (int j = 0; eq && j < 4; j++)
            if (strlen(slo_keys[j][0]) == kl && !strncmp(p, slo_keys[j][0], kl)) hit = j;
        if (hit < 0 || eq + 1 == end)
            return cmd_usage_error(&cmd_capacity, "--slo: '%.*s' is not step_p99=, ttft=, tokens_per_s= or attainment= with a value",
                                   (int)(end - p), p);
        if (seen & (1u << hit)) return cmd_usage_error(&cmd_capacity, "--slo: %s given twice", slo_keys[hit][0]);
        seen |= 1u << hit;
        char key[32], val[128];
        snprintf(key, sizeof key, "%s", slo_keys[hit][1]);
        snprintf(val, sizeof val, "%.*s", (int)(end - eq - 1), eq + 1);
        quick_add(a, &used, key, val);
        p = comma ? comma + 1 : end;
    }
    a->scenario = QUICK_TEMPLATE;
    return 0;
}

static int parse_args(int argc, char **argv, cap_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->max = 4096;
    if (!(a->sets = calloc((size_t)argc + 16, sizeof *a->sets))) return cmd_fail("capacity", "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        char *end = NULL;
        if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--set") && i + 1 < argc) a->sets[a->n_sets++] = argv[++i];
        else if (!strcmp(o, "--out") && i + 1 < argc) a->out = argv[++i];
        else if (!strcmp(o, "--box") && i + 1 < argc) a->box = argv[++i];
        else if (!strcmp(o, "--model") && i + 1 < argc) a->model = argv[++i];
        else if (!strcmp(o, "--method") && i + 1 < argc) a->method = argv[++i];
        else if (!strcmp(o, "--context") && i + 1 < argc) a->context = argv[++i];
        else if (!strcmp(o, "--slo") && i + 1 < argc) a->slo = argv[++i];
        else if (!strcmp(o, "--budget") && i + 1 < argc) a->budget = argv[++i];
        else if (!strcmp(o, "--k") && i + 1 < argc) a->k = argv[++i];
        else if (!strcmp(o, "--max") && i + 1 < argc) {
            a->max = strtol(argv[++i], &end, 10);
            if (*end || a->max < 1 || a->max > 1000000) return cmd_usage_error(&cmd_capacity, "--max: expected 1..1000000, got '%s'", argv[i]);
        } else if (!strcmp(o, "--replications") && i + 1 < argc) {
            a->replications = strtol(argv[++i], &end, 10);
            if (*end || a->replications < 1 || a->replications > 1000) return cmd_usage_error(&cmd_capacity, "--replications: expected 1..1000, got '%s'", argv[i]);
        } else if (o[0] == '-' && o[1]) return cmd_usage_error(&cmd_capacity, "unknown option or missing value: '%s'", o);
        else if (a->scenario) return cmd_usage_error(&cmd_capacity, "one scenario at a time");
        else a->scenario = o;
    }
    a->quick = a->box || a->model || a->method || a->context || a->slo || a->budget || a->k;
    if (a->quick && a->scenario)
        return cmd_usage_error(&cmd_capacity, "--box, --model, --method, --context, --slo, --budget and --k are the quick "
                                              "form, without a scenario (with one, use --set)");
    if (a->quick) return quick_sets(a);
    return a->scenario ? 0 : cmd_usage_error(&cmd_capacity, "no scenario given");
}

static json_t *point_json(const study_t *s, size_t i, const cap_point_t *cp, const study_assumptions_t *as, const study_trust_t *v)
{
    json_t *o = json_pack("{s:s,s:I,s:s,s:I}", "point", study_point_label(s, i), "max_sessions", (json_int_t)cp->sessions,
                          "binding", cp->binding, "simulations", (json_int_t)cp->runs);
    if (o) json_object_set_new(o, "validation", study_trust_json(v));
    if (o) json_object_set_new(o, "assumptions", study_assumptions_json(as));
    if (o && cp->at) json_object_set_new(o, "at_capacity", report_json(s, i, cp->at));
    return o;
}

static void print_text(const study_t *s, const cap_point_t *cps, size_t n)
{
    printf("%-48s %10s %12s %12s  %s\n", "point", "sessions", "step p99", "tok/s box", "binding at +1 session");
    for (size_t i = 0; i < n; i++) {
        const cap_point_t *c = &cps[i];
        printf("%-48s %10u", study_point_label(s, i), c->sessions);
        if (c->at) printf(" %10.3g ms %12.4g", c->at->step_p99_s.mean * 1e3, c->at->tps_total.mean);
        else printf(" %12s %12s", "-", "-");
        printf("  %s\n", c->binding);
    }
}

/* capacity.csv and its plot; labels reach the script only through gnuplot_quote, numbers through
 * the datablock. */
static int add_capacity(outset_t *set, const study_t *s, const cap_point_t *cps, size_t n, err_t *e)
{
    FILE *fp;
    int rc = outset_file(set, "capacity.csv", &fp, e);
    if (rc) return rc;
    study_provenance(s, 0, fp, "#");
    fputs("index,point,max_sessions,binding\n", fp);
    for (size_t i = 0; i < n; i++) {
        fprintf(fp, "%zu,", i);
        report_csv_field(fp, study_point_label(s, i));
        fprintf(fp, ",%u,", cps[i].sessions);
        report_csv_field(fp, cps[i].binding);
        fputc('\n', fp);
    }
    char *data = NULL, *setup = NULL;
    size_t dlen = 0, slen = 0;
    FILE *d = open_memstream(&data, &dlen), *st = open_memstream(&setup, &slen);
    if (d && st) {
        fputs("$cap << EOD\n", d);
        for (size_t i = 0; i < n; i++) fprintf(d, "%zu,%u\n", i, cps[i].sessions);
        fputs("EOD\n", d);
        fprintf(st, "set datafile separator ','\nset style fill solid 0.6\nset boxwidth 0.6\nset key off\n"
                    "set ylabel 'largest population meeting the SLO'\nset xrange [-0.5:%zu.5]\nset yrange [0:*]\n"
                    "set xtics rotate by -30 (", n ? n - 1 : 0);
        for (size_t i = 0; i < n; i++) {
            fputs(i ? ", " : "", st);
            gnuplot_quote(st, study_point_label(s, i));
            fprintf(st, " %zu", i);
        }
        fputs(")\n", st);
    }
    if (d) fclose(d);
    if (st) fclose(st);
    rc = d && st && data && setup ? report_plot(set, "capacity", 1000, 560, data, setup, "plot $cap using 1:2 with boxes", e)
                                  : err_set(e, ERR_NOMEM, "out of memory");
    free(data);
    free(setup);
    return rc;
}

/* --out DIR may be written (before the search): the study's files and capacity's own. */
static int check_out(const char *dir, err_t *e)
{
    static const char *const mine[] = {"capacity.csv", "capacity.gp", "capacity.svg", "capacity.png"};
    int rc = report_check_dir(dir, e);
    return rc ? rc : outset_check(dir, mine, sizeof mine / sizeof *mine, e);
}

/* Every file of --out as one set (common/outset.h). */
static int write_out(const char *dir, const study_t *s, const cap_point_t *cps, size_t n, err_t *e)
{
    study_result_t **rs = calloc(n ? n : 1, sizeof *rs);
    if (!rs) return err_set(e, ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (cps[i].at) rs[m++] = cps[i].at;
    outset_t *set;
    int rc = outset_open(dir, &set, e);
    if (!rc && m) rc = report_add(set, s, rs, m, e);
    free(rs);
    if (!rc) rc = add_capacity(set, s, cps, n, e);
    if (rc) {
        outset_abort(set);
        return rc;
    }
    return outset_commit(set, e);
}

static int capacity_main(int argc, char **argv)
{
    cap_args_t a;
    int rc = parse_args(argc, argv, &a);
    err_t e;
    study_t *s = NULL;
    if (!rc && a.out && check_out(a.out, &e)) rc = cmd_fail("capacity", "%s", e.msg);
    if (!rc && study_open(a.scenario, a.sets, a.n_sets, &s, &e)) rc = cmd_fail("capacity", "%s", e.msg);
    size_t n = s ? study_n_points(s) : 0;
    cap_point_t *cps = rc ? NULL : calloc(n, sizeof *cps);
    if (!rc && !cps) rc = cmd_fail("capacity", "out of memory");
    /* assumed parameters first, as odsim run says them: each point's that move its one-step plan */
    study_assumptions_t *as = rc ? NULL : calloc(n ? n : 1, sizeof *as);
    if (!rc && !as) rc = cmd_fail("capacity", "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        if (study_assumptions_run(s, i, &as[i], &e)) rc = cmd_fail("capacity", "point %zu (%s): %s", i, study_point_label(s, i), e.msg);
    cap_units_t u = {s, &a};
    par_out_t *outs = rc || par_rank() ? NULL : calloc(n, sizeof *outs);
    if (!rc && !par_rank() && !outs) rc = cmd_fail("capacity", "out of memory");
    if (!rc && par_run(n, cap_unit, &u, outs, &e)) rc = cmd_fail("capacity", "%s", e.msg);
    /* Every failed point is named (one with a single rank, which stops there); nothing is written. */
    int failed = 0;
    for (size_t i = 0; !rc && outs && i < n; i++) {
        if (!outs[i].rc && unpack_point(outs[i].buf, outs[i].len, &cps[i], &e))
            snprintf(outs[i].msg, sizeof outs[i].msg, "%s", e.msg), outs[i].rc = e.code;
        if (outs[i].rc && outs[i].rc != 1)
            failed = cmd_fail("capacity", "point %zu (%s): %s", i, study_point_label(s, i), outs[i].msg);
    }
    if (failed) rc = failed;
    for (size_t i = 0; outs && i < n; i++) free(outs[i].buf);
    free(outs);
    bool writes = !par_rank(); /* rank 0 writes everything */
    /* the validation group covering each answer: its regime at the population found (at least one) */
    study_trust_t *vs = rc || !writes ? NULL : calloc(n ? n : 1, sizeof *vs);
    trust_t *trust = NULL;
    if (!rc && writes && !vs) rc = cmd_fail("capacity", "out of memory");
    if (!rc && writes && study_trust_load(s, &trust, &e)) rc = cmd_fail("capacity", "%s", e.msg);
    for (size_t i = 0; !rc && writes && i < n; i++)
        if (study_trust_of(s, trust, i, cps[i].sessions ? cps[i].sessions : 1, &vs[i], &e))
            rc = cmd_fail("capacity", "point %zu (%s): %s", i, study_point_label(s, i), e.msg);
    if (!rc && writes && a.json) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) json_array_append_new(arr, point_json(s, i, &cps[i], &as[i], &vs[i]));
        char *txt = arr ? json_dumps(arr, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(arr);
        if (txt) puts(txt);
        else rc = cmd_fail("capacity", "out of memory");
        free(txt);
    } else if (!rc && writes) {
        study_trust_print(stdout, s, vs, 0, n);
        for (size_t i = 0; i < n; i++) {
            if (as[i].n) printf("point %zu (%s): ", i, study_point_label(s, i));
            study_assumptions_print(stdout, &as[i]);
        }
        printf("odsim %s (%s): %s — closed population N, SLO met in >= 95%% of replications\n", ODSIM_VERSION, odsim_git_rev, a.scenario);
        if (a.quick)
            printf("quick form: %s, %s, %s; sessions join holding 3/4 of %s tokens (a reused prefix) and grow towards it;\n"
                   "  SLO %s; everything else from %s (odsim params)\n", a.box, a.model, a.method, a.context,
                   a.slo ? a.slo : "ttft=30s,tokens_per_s=5,attainment=0.9", QUICK_TEMPLATE);
        print_text(s, cps, n);
    }
    if (!rc && writes && a.out && write_out(a.out, s, cps, n, &e)) rc = cmd_fail("capacity", "%s", e.msg);
    for (size_t i = 0; cps && i < n; i++) {
        study_result_free(cps[i].at);
        study_result_free(cps[i].beyond);
        free(cps[i].binding);
    }
    free(cps);
    for (size_t i = 0; vs && i < n; i++) study_trust_free(&vs[i]);
    free(vs);
    trust_free(trust);
    for (size_t i = 0; as && i < n; i++) study_assumptions_free(&as[i]);
    free(as);
    study_free(s);
    free(a.sets);
    free(a.quick_sets);
    return rc;
}
