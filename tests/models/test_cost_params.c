/* The cost parameter table (models/cost_params.c): each name once, each cost_t field filled by one
 * parameter, every knot's name saying the region cost_row_knot_bytes / cost_plane_knot_bytes puts it
 * at, and cost_init filling each bound field with the profile's value times the declared scale. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "models/cost.h"

Test(cost_params, each_name_and_field_once)
{
    for (size_t i = 0; i < cost_param_count; i++)
        for (size_t j = i + 1; j < cost_param_count; j++) {
            cr_expect(strcmp(cost_param_defs[i].key, cost_param_defs[j].key), "%s twice", cost_param_defs[i].key);
            if (cost_param_defs[i].field >= 0)
                cr_expect_neq(cost_param_defs[i].field, cost_param_defs[j].field, "%s and %s fill one field",
                              cost_param_defs[i].key, cost_param_defs[j].key);
        }
}

/* "<prefix><N>MiB" or "<prefix><N>GiB" at the end of a knot's name, in bytes. */
static double knot_bytes_of(const char *name)
{
    const char *u = name + strlen(name) - 3;
    const char *d = u;
    while (d > name && d[-1] >= '0' && d[-1] <= '9') d--;
    double v = atof(d);
    return !strcmp(u, "MiB") ? v * 1048576 : !strcmp(u, "GiB") ? v * 1073741824.0 : NAN;
}

Test(cost_params, knot_names_say_their_regions)
{
    size_t found = 0;
    for (int t = 0; t < COST_ROW_TABLES; t++)
        for (int k = 0; k < COST_ROW_KNOTS; k++) {
            cr_expect_eq(knot_bytes_of(cost_row_names[t][k]), cost_row_knot_bytes[k], "%s", cost_row_names[t][k]);
            for (size_t i = 0; i < cost_param_count; i++)
                if (!strcmp(cost_param_defs[i].key, cost_row_names[t][k])) {
                    found++;
                    cr_expect_eq(cost_param_defs[i].field, (ptrdiff_t)offsetof(cost_t, gather_rows_ps[t][k]));
                }
        }
    for (int p = 0; p < COST_PLANE_PIECES; p++)
        for (int k = 0; k < COST_PLANE_KNOTS; k++) {
            cr_expect_eq(knot_bytes_of(cost_plane_names[p][k]), cost_plane_knot_bytes[k], "%s", cost_plane_names[p][k]);
            for (size_t i = 0; i < cost_param_count; i++)
                if (!strcmp(cost_param_defs[i].key, cost_plane_names[p][k])) found++;
        }
    cr_expect_eq(found, COST_ROW_TABLES * COST_ROW_KNOTS + COST_PLANE_PIECES * COST_PLANE_KNOTS);
}

/* Each bound parameter set to a distinct value in a profile lands in its field, scaled. */
Test(cost_params, cost_init_fills_each_bound_field_scaled)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    err_t e;
    for (size_t i = 0; i < cost_param_count; i++) {
        calib_param_t p = {cost_param_defs[i].key, 1.0 + (double)i / 64, 0, 1, 0, cost_param_defs[i].unit, "assumed: test"};
        cr_assert_eq(calib_set(t.cal, &p, &e), 0, "%s", e.msg);
    }
    cost_t c;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < cost_param_count; i++) {
        const hw_param_def_t *d = &cost_param_defs[i];
        if (d->field < 0 || !strcmp(d->key, "l2_dirty_frac") || !strcmp(d->key, "l2_writeback_eff")) continue;
        double got = *(const double *)((const char *)&c + d->field);
        cr_expect(fabs(got - (1.0 + (double)i / 64) * d->scale) <= 1e-12 * fabs(got), "%s: %g", d->key, got);
    }
    th_machine_free(&t);
}

/* A curve in a profile: each point becomes its knot's parameter, with its own origin; a knot
 * written apart, an unknown knot and a wrong unit are errors naming the line and what to write. */
Test(cost_params, a_profile_curve_sets_its_knots)
{
    const char *y = "params:\n"
                    "  gather_rows_Mps: {unit: \"Mrows/s\", points: {\n"
                    "      256MiB: {value: 200, origin: \"fitted: a\"},\n"
                    "      4GiB: {value: 40, stderr: 2, lo: 64, hi: 512, origin: \"fitted: b\"}}}\n";
    calib_t *c = NULL;
    err_t e;
    cr_assert_eq(calib_load_string("p.yaml", y, &c, &e), 0, "%s", e.msg);
    const calib_param_t *p = calib_find(c, "gather_rows_Mps_4GiB");
    cr_assert(p);
    cr_expect_eq(p->value, 40);
    cr_expect_eq(p->stderr_v, 2);
    cr_expect_eq(p->hi, 512);
    cr_expect_str_eq(p->origin, "fitted: b");
    cr_expect_eq(calib_find(c, "gather_rows_Mps_256MiB")->value, 200);
    cr_expect_null(calib_find(c, "gather_rows_Mps_1GiB"));
    calib_free(c);
    static const struct { const char *yaml, *msg; } bad[] = {
        {"params:\n  gather_rows_Mps_4GiB: {value: 40, origin: \"x\"}\n",
         "p.yaml:2:25: key 'params.gather_rows_Mps_4GiB': a point of the curve gather_rows_Mps: write it as gather_rows_Mps: {points: {4GiB: {...}}}"},
        {"params:\n  gather_rows_Mps: {points: {3GiB: {value: 40, origin: \"x\"}}}\n", "gather_rows_Mps has no knot '3GiB' (its knots: 256MiB, 512MiB, 1GiB, 2GiB, 4GiB, 8GiB, 16GiB)"},
        {"params:\n  gather_rows_Mps: {unit: \"GB/s\", points: {}}\n", "unit 'GB/s' is not the unit of gather_rows_Mps ('Mrows/s')"},
        {"params:\n  gather_rows_Mps: {points: [1, 2]}\n", "expected a map of knot to parameter"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_neq(calib_load_string("p.yaml", bad[i].yaml, &c, &e), 0, "%s", bad[i].yaml);
        cr_expect(strstr(e.msg, bad[i].msg), "%s\nwanted: %s", e.msg, bad[i].msg);
    }
}
