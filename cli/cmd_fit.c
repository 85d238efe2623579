/* odsim fit — fits the calibration profile from measured kbench CSVs (validation/fit.h) and writes
 * it atomically. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cmd.h"
#include "common/atomicio.h"
#include "cli/study.h"
#include "models/calib.h"
#include "models/hwcat.h"
#include "validation/fit.h"
#include "validation/heldout.h"
#include "validation/kbcsv.h"
#include "validation/plot.h"
#include "validation/profile.h"

static const char fit_usage[] =
    "usage: odsim fit DATA_DIR -o PROFILE [options]\n"
    "\n"
    "Fits every calibration parameter the measured CSVs of DATA_DIR (validation/data/<device>/)\n"
    "determine, using only the rows the held-out rule puts in the fit set, and writes the profile\n"
    "(value, standard error, fitted range, unit, origin; sources with hashes; residuals) atomically.\n"
    "A fit that does not converge says so and writes nothing.\n"
    "\n"
    "  -o PROFILE        output file (e.g. models/calib/h200.yaml)\n"
    "  --heldout FILE    the held-out rule (default validation/heldout.yaml)\n"
    "  --device NAME     the device the CSV headers must name (default: DATA_DIR's basename)\n"
    "  --catalog DIR     hardware catalogs for values the data does not determine (default models/catalog under the data root)\n"
    "  --seeds FILE      the pre-fit seeds: starting values of the fitted parameters (default validation/seeds.yaml)\n"
    "  --box NAME        box preset of the measured machine (default h200-1): the profile's platform\n"
    "  --profile NAME    profile name written in the file (default: <device>-fitted)\n"
    "  --plots DIR       also plot every fitted row against the fitted model: DIR/fit.{svg,png}\n"
    "                    (gnuplot; without it the data and script are written and a note says so)\n"
    "  --quiet           no summary on stdout\n"
    "  --json            the summary as one JSON document on stdout: {profile, rows: {fit, heldout, unused},\n"
    "                    params: [{name, value, stderr, unit, lo, hi, origin}], residuals: [{name, n, rms_rel,\n"
    "                    max_rel}], notes} (lo/hi null without a fitted range, stderr null when not determined)\n";

typedef struct fit_args {
    const char *dir, *out, *heldout, *device, *catalog, *box, *profile, *plots, *seeds;
    int quiet, json;
} fit_args_t;

static int fit_main(int argc, char **argv);

const cmd_t cmd_fit = {"fit", "fit the calibration profile from measured kbench CSVs", fit_usage, fit_main};

static int parse_args(int argc, char **argv, fit_args_t *a)
{
    *a = (fit_args_t){.heldout = "validation/heldout.yaml", .catalog = STUDY_DEFAULT_CATALOG, .box = "h200-1",
                        .seeds = "validation/seeds.yaml"};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **dst = !strcmp(s, "-o")          ? &a->out
                           : !strcmp(s, "--heldout") ? &a->heldout
                           : !strcmp(s, "--device")  ? &a->device
                           : !strcmp(s, "--catalog") ? &a->catalog
                           : !strcmp(s, "--seeds")   ? &a->seeds
                           : !strcmp(s, "--box")     ? &a->box
                           : !strcmp(s, "--profile") ? &a->profile
                           : !strcmp(s, "--plots")   ? &a->plots
                                                     : NULL;
        if (dst) {
            if (i + 1 >= argc) return cmd_usage_error(&cmd_fit, "%s needs a value", s);
            *dst = argv[++i];
        } else if (!strcmp(s, "--quiet")) {
            a->quiet = 1;
        } else if (!strcmp(s, "--json")) {
            a->json = 1;
        } else if (s[0] == '-') {
            return cmd_usage_error(&cmd_fit, "unknown option '%s'", s);
        } else if (!a->dir) {
            a->dir = s;
        } else {
            return cmd_usage_error(&cmd_fit, "one DATA_DIR only ('%s')", s);
        }
    }
    if (!a->dir) return cmd_usage_error(&cmd_fit, "DATA_DIR is missing");
    if (!a->out) return cmd_usage_error(&cmd_fit, "-o PROFILE is missing");
    return 0;
}

static void print_summary(const fit_t *f)
{
    size_t nf, nh, nu;
    fit_row_counts(f, &nf, &nh, &nu);
    printf("rows: %zu fitted, %zu held out, %zu unused\n\n", nf, nh, nu);
    printf("%-24s %14s %11s %10s  %-s\n", "parameter", "value", "stderr", "unit", "range");
    for (size_t i = 0; i < fit_n_params(f); i++) {
        const fit_param_t *p = fit_param_at(f, i);
        printf("%-24s %14.6g %11.3g %10s", p->name, p->value, p->stderr_v, p->unit);
        if (p->lo <= p->hi) printf("  [%.6g, %.6g]", p->lo, p->hi);
        putchar('\n');
    }
    printf("\n%-32s %6s %10s %10s\n", "residuals (relative)", "n", "rms %", "max %");
    for (size_t i = 0; i < fit_n_resid(f); i++) {
        const fit_resid_t *r = fit_resid_at(f, i);
        printf("%-32s %6zu %10.2f %10.2f\n", r->name, r->n, 100 * r->rms_rel, 100 * r->max_rel);
    }
    if (fit_n_notes(f)) printf("\nnotes:\n");
    for (size_t i = 0; i < fit_n_notes(f); i++) printf("  - %s\n", fit_note_at(f, i));
}

static json_t *num_or_null(bool ok, double v) { return ok ? json_real(v) : json_null(); }

/* print_summary's content as one JSON document. */
static int print_json(const fit_t *f, const char *profile)
{
    size_t nf, nh, nu;
    fit_row_counts(f, &nf, &nh, &nu);
    json_t *params = json_array(), *resid = json_array(), *notes = json_array();
    for (size_t i = 0; i < fit_n_params(f); i++) {
        const fit_param_t *p = fit_param_at(f, i);
        json_array_append_new(params, json_pack("{s:s,s:f,s:o,s:s,s:o,s:o,s:s}", "name", p->name, "value", p->value,
                                                "stderr", num_or_null(p->stderr_v > 0, p->stderr_v), "unit", p->unit,
                                                "lo", num_or_null(p->lo <= p->hi, p->lo), "hi", num_or_null(p->lo <= p->hi, p->hi),
                                                "origin", p->origin ? p->origin : ""));
    }
    for (size_t i = 0; i < fit_n_resid(f); i++) {
        const fit_resid_t *r = fit_resid_at(f, i);
        json_array_append_new(resid, json_pack("{s:s,s:I,s:f,s:f}", "name", r->name, "n", (json_int_t)r->n, "rms_rel",
                                               r->rms_rel, "max_rel", r->max_rel));
    }
    for (size_t i = 0; i < fit_n_notes(f); i++) json_array_append_new(notes, json_string(fit_note_at(f, i)));
    json_t *doc = json_pack("{s:s,s:{s:I,s:I,s:I},s:o,s:o,s:o}", "profile", profile, "rows", "fit", (json_int_t)nf,
                            "heldout", (json_int_t)nh, "unused", (json_int_t)nu, "params", params, "residuals", resid,
                            "notes", notes);
    return cmd_put_json("fit", doc);
}

/* Plots every fitted row against its fitted value (the plot is optional: notes go to stderr). */
static int plot_fit(const char *dir, const fit_t *f, err_t *e)
{
    if (mkdir(dir, 0777) && errno != EEXIST) return err_set(e, ERR_IO, "%s: cannot create directory", dir);
    size_t ng = fit_n_resid(f), n = fit_n_points(f);
    const char **names = malloc((ng + 1) * sizeof *names);
    plot_point_t *pts = malloc((n + 1) * sizeof *pts);
    int rc = (!names || !pts) ? err_set(e, ERR_NOMEM, "fit: out of memory") : ERR_OK;
    for (size_t g = 0; !rc && g < ng; g++) names[g] = fit_resid_at(f, g)->name;
    for (size_t i = 0; !rc && i < n; i++) {
        const fit_point_t *p = fit_point_at(f, i);
        pts[i] = (plot_point_t){p->resid, p->meas, p->meas, p->meas, p->pred};
    }
    char note[1024] = "";
    if (!rc) rc = plot_pred_vs_meas(dir, "fit", "value (times in us; sharing groups: ratios)", names, ng, pts, n, note,
                                    sizeof note, e);
    if (!rc && *note) fprintf(stderr, "odsim fit: %s\n", note);
    free(names);
    free(pts);
    return rc;
}

/* The seed: the pre-fit seeds file, then the box's presets for what it lacks (values the fits need
 * that the data does not determine). */
static int seed_from_catalog(const fit_args_t *a, calib_t **seed, char **gpu, char **link, err_t *e)
{
    hwcat_t *cat = NULL;
    hw_t hw;
    memset(&hw, 0, sizeof hw);
    char *dir = study_data_path(a->catalog);
    int rc = dir ? hwcat_load(dir, &cat, e) : err_set(e, ERR_NOMEM, "out of memory");
    free(dir);
    if (!rc) {
        hw_select_t sel = {.box = a->box};
        rc = hw_resolve(cat, &sel, NULL, &hw, e);
    }
    if (!rc) {
        char *seeds = study_data_path(a->seeds);
        rc = seeds ? calib_load(seeds, seed, e) : err_set(e, ERR_NOMEM, "out of memory");
        free(seeds);
        if (!rc) rc = calib_seed(*seed, &hw, e);
        *gpu = hw.gpu, *link = hw.link; /* the profile's platform */
        hw.gpu = hw.link = NULL;
        hw_free(&hw);
    }
    hwcat_free(cat);
    return rc;
}

static int fit_main(int argc, char **argv)
{
    fit_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    err_t e;
    err_clear(&e);
    heldout_t *ho = NULL;
    kbset_t *set = NULL;
    calib_t *seed = NULL;
    fit_t *f = NULL;
    char *gpu = NULL, *link = NULL;
    /* the profile's path is refused, if it is, before any fitting; the rule is found under the data root */
    int st = atomicio_check(a.out, &e);
    char *heldout = st ? NULL : study_data_path(a.heldout);
    if (!st && !heldout) st = err_set(&e, ERR_NOMEM, "out of memory");
    if (!st) st = heldout_load(heldout, &ho, &e);
    free(heldout);
    if (!st) st = kbset_load_dir(a.dir, a.device, &set, &e);
    if (!st && !kbset_n_files(set)) st = err_set(&e, ERR_NOTFOUND, "%s: no *.csv files", a.dir);
    if (!st) st = seed_from_catalog(&a, &seed, &gpu, &link, &e);
    if (!st) st = fit_run(set, ho, seed, &f, &e);
    if (!st) {
        char profile[256], command[1024];
        snprintf(profile, sizeof profile, "%s-fitted", kbset_device(set));
        size_t used = (size_t)snprintf(command, sizeof command, "odsim");
        for (int i = 0; i < argc && used < sizeof command; i++) {
            int k = snprintf(command + used, sizeof command - used, " %s", argv[i]);
            if (k < 0) break;
            used += (size_t)k;
        }
        profile_info_t info = {a.profile ? a.profile : profile, a.heldout, heldout_hash(ho), command, gpu, link, a.box};
        if (!a.quiet && !a.json) print_summary(f);
        st = profile_write(a.out, f, set, &info, &e);
        if (!st && !a.quiet && !a.json) printf("\nwrote %s (%zu parameters)\n", a.out, fit_n_params(f));
        if (!st && a.json && print_json(f, a.out)) st = err_set(&e, ERR_NOMEM, "the summary could not be printed");
        if (!st && a.plots) st = plot_fit(a.plots, f, &e);
    }
    fit_free(f);
    free(gpu);
    free(link);
    calib_free(seed);
    kbset_free(set);
    heldout_free(ho);
    if (st) {
        if (st == ERR_CONVERGE) return cmd_fail("fit", "%s — nothing written", e.msg);
        return cmd_fail("fit", "%s", e.msg);
    }
    return 0;
}
