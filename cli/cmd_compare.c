/* odsim compare A.json B.json — two runs' figures side by side: for each point both runs hold (by
 * label) and each figure given over replications ({mean, ci95_lo, ci95_hi, n}), B − A with its
 * Welch 95% interval, and whether that interval excludes 0 (the runs differ beyond their
 * replications' spread). The runs' calibration, version and scenario differences come first. */
#include <gsl/gsl_cdf.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/report.h"

static int compare_main(int argc, char **argv);

const cmd_t cmd_compare = {
    "compare", "two runs' figures side by side, each difference with its 95% interval",
    "usage: odsim compare A.json B.json [--json]\n"
    "  A and B are `odsim run --json` outputs (or an --out set's results.json). For each point both\n"
    "  hold (matched by label) and each figure given over replications, B - A and its Welch 95%\n"
    "  interval from the two runs' intervals; 'differs' when the interval excludes 0, 'n/a' when a\n"
    "  side has fewer than two replications with a sample. Points in one run only are listed.\n"
    "  --json: one JSON document {a, b, notes, points: [{point, figures: [{name, a, b, diff, ci95_lo,\n"
    "  ci95_hi, differs}]}], only_in_a, only_in_b}.\n",
    compare_main};

/* The figure's mean, its interval's half-width and n; false when it is not a figure. */
typedef struct fig {
    double mean, half;
    double n;
} fig_t;

static bool fig_of(const json_t *o, fig_t *f)
{
    if (!json_is_object(o)) return false;
    const json_t *m = json_object_get(o, "mean"), *lo = json_object_get(o, "ci95_lo"), *hi = json_object_get(o, "ci95_hi"),
                 *n = json_object_get(o, "n");
    if (!m || !lo || !hi || !n) return false;
    f->mean = json_is_number(m) ? json_number_value(m) : NAN;
    f->half = json_is_number(lo) && json_is_number(hi) ? (json_number_value(hi) - json_number_value(lo)) / 2 : NAN;
    f->n = json_is_integer(n) ? (double)json_integer_value(n) : 0;
    return true;
}

/* B − A and its Welch 95% half-width (NAN when either side has no interval). */
static double welch_half(const fig_t *a, const fig_t *b)
{
    if (a->n < 2 || b->n < 2 || isnan(a->half) || isnan(b->half)) return NAN;
    /* each side's standard error from its Student-t half-width */
    double sa = a->half / gsl_cdf_tdist_Pinv(0.975, a->n - 1), sb = b->half / gsl_cdf_tdist_Pinv(0.975, b->n - 1);
    double se2 = sa * sa + sb * sb;
    if (se2 <= 0) return 0;
    double df = se2 * se2 / (pow(sa, 4) / (a->n - 1) + pow(sb, 4) / (b->n - 1));
    return gsl_cdf_tdist_Pinv(0.975, df) * sqrt(se2);
}

static json_t *load(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        cmd_fail("compare", "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_array(j) || !json_array_size(j)) {
        cmd_fail("compare", "%s: not an odsim run --json output (expected a list of points)", path);
        json_decref(j);
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(j); i++)
        if (!json_is_string(json_object_get(json_array_get(j, i), "point"))) {
            cmd_fail("compare", "%s: entry %zu has no 'point' label", path, i);
            json_decref(j);
            return NULL;
        }
    return j;
}

static const json_t *point_named(const json_t *run, const char *label)
{
    for (size_t i = 0; i < json_array_size(run); i++) {
        const json_t *p = json_array_get(run, i);
        if (!strcmp(json_string_value(json_object_get(p, "point")), label)) return p;
    }
    return NULL;
}

/* Notes on what differs between the runs besides their figures. */
static json_t *notes_of(const json_t *a, const json_t *b)
{
    json_t *notes = json_array();
    static const char *const keys[] = {"calibration_hash", "odsim_git", "duration_s", "replications"};
    const json_t *pa = json_array_get(a, 0), *pb = json_array_get(b, 0);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const json_t *x = json_object_get(pa, keys[k]), *y = json_object_get(pb, keys[k]);
        if (x && y && !json_equal(x, y)) {
            char *sx = json_dumps(x, JSON_ENCODE_ANY), *sy = json_dumps(y, JSON_ENCODE_ANY);
            json_array_append_new(notes, json_sprintf("%s differs: %s in A, %s in B", keys[k], sx ? sx : "?", sy ? sy : "?"));
            free(sx);
            free(sy);
        }
    }
    return notes;
}

static json_t *compare_runs(const json_t *a, const json_t *b, const char *pa, const char *pb)
{
    json_t *root = json_object(), *points = json_array(), *only_a = json_array(), *only_b = json_array();
    json_object_set_new(root, "a", json_string(pa));
    json_object_set_new(root, "b", json_string(pb));
    json_object_set_new(root, "notes", notes_of(a, b));
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *x = json_array_get(a, i);
        const char *label = json_string_value(json_object_get(x, "point"));
        const json_t *y = point_named(b, label);
        if (!y) {
            json_array_append_new(only_a, json_string(label));
            continue;
        }
        json_t *figs = json_array();
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)x, key, v) {
            fig_t fa, fb;
            if (!fig_of(v, &fa) || !fig_of(json_object_get(y, key), &fb)) continue;
            double d = fb.mean - fa.mean, h = welch_half(&fa, &fb);
            json_array_append_new(figs, json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "name", key, "a", report_num(fa.mean), "b",
                                                  report_num(fb.mean), "diff", report_num(d), "ci95_lo", report_num(d - h), "ci95_hi",
                                                  report_num(d + h), "differs",
                                                  isnan(h) || isnan(d) ? json_null() : json_boolean(fabs(d) > h)));
        }
        json_array_append_new(points, json_pack("{s:s,s:o}", "point", label, "figures", figs));
    }
    for (size_t i = 0; i < json_array_size(b); i++) {
        const char *label = json_string_value(json_object_get(json_array_get(b, i), "point"));
        if (!point_named(a, label)) json_array_append_new(only_b, json_string(label));
    }
    json_object_set_new(root, "points", points);
    json_object_set_new(root, "only_in_a", only_a);
    json_object_set_new(root, "only_in_b", only_b);
    return root;
}

static void print_num(double v)
{
    if (isnan(v)) printf(" %12s", "n/a");
    else printf(" %12.6g", v);
}

static void print_text(const json_t *r)
{
    printf("odsim compare: A %s, B %s\n", json_string_value(json_object_get(r, "a")), json_string_value(json_object_get(r, "b")));
    const json_t *notes = json_object_get(r, "notes");
    for (size_t i = 0; i < json_array_size(notes); i++) printf("note: %s\n", json_string_value(json_array_get(notes, i)));
    const json_t *points = json_object_get(r, "points");
    for (size_t i = 0; i < json_array_size(points); i++) {
        const json_t *p = json_array_get(points, i);
        printf("\npoint %s\n  %-26s %12s %12s %12s %27s\n", json_string_value(json_object_get(p, "point")), "figure", "A", "B",
               "B - A", "95% interval of B - A");
        const json_t *figs = json_object_get(p, "figures");
        for (size_t k = 0; k < json_array_size(figs); k++) {
            const json_t *f = json_array_get(figs, k);
            printf("  %-26s", json_string_value(json_object_get(f, "name")));
            static const char *const cols[] = {"a", "b", "diff"};
            for (int c = 0; c < 3; c++) {
                const json_t *v = json_object_get(f, cols[c]);
                print_num(json_is_number(v) ? json_number_value(v) : NAN);
            }
            const json_t *lo = json_object_get(f, "ci95_lo"), *hi = json_object_get(f, "ci95_hi"), *df = json_object_get(f, "differs");
            if (json_is_number(lo)) printf("  [%11.4g, %11.4g] %s\n", json_number_value(lo), json_number_value(hi),
                                           json_is_true(df) ? "differs" : "");
            else printf("  %27s\n", "n/a (< 2 replications)");
        }
    }
    static const char *const only[] = {"only_in_a", "only_in_b"};
    for (int s = 0; s < 2; s++) {
        const json_t *l = json_object_get(r, only[s]);
        for (size_t i = 0; i < json_array_size(l); i++)
            printf("%spoint %s: in %s only\n", i ? "" : "\n", json_string_value(json_array_get(l, i)), s ? "B" : "A");
    }
}

static int compare_main(int argc, char **argv)
{
    const char *paths[2] = {NULL, NULL};
    int n = 0;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (argv[i][0] == '-' && argv[i][1]) return cmd_usage_error(&cmd_compare, "unknown option '%s'", argv[i]);
        else if (n < 2) paths[n++] = argv[i];
        else return cmd_usage_error(&cmd_compare, "two runs to compare, not more");
    }
    if (n != 2) return cmd_usage_error(&cmd_compare, "two runs to compare: A.json B.json");
    json_t *a = load(paths[0]);
    json_t *b = a ? load(paths[1]) : NULL;
    if (!a || !b) {
        json_decref(a);
        return 1;
    }
    json_t *r = compare_runs(a, b, paths[0], paths[1]);
    int rc = 0;
    if (!r) rc = cmd_fail("compare", "out of memory");
    else if (json) {
        char *txt = json_dumps(r, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (txt) puts(txt);
        else rc = cmd_fail("compare", "out of memory");
        free(txt);
    } else {
        print_text(r);
    }
    json_decref(r);
    json_decref(a);
    json_decref(b);
    return rc;
}
