/* The random replay workload generator (validation/wlgen.h): its declared parameters, round trips
 * through the replay format, docs/replay.md's bounds and the strata of the committed sets. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "validation/wlgen.h"

static wlgen_params_t params(void)
{
    wlgen_params_t p;
    err_t e;
    cr_assert_eq(wlgen_params_default(&p, &e), 0, "%s", e.msg);
    return p;
}

static rf_workload_t *alloc_w(void)
{
    rf_workload_t *w = malloc(sizeof *w);
    cr_assert(w);
    return w;
}

/* The issue's distributions, as declared (a change here would change the sealed set). */
Test(wlgen, declared_defaults_are_the_issue_ones)
{
    wlgen_params_t p = params();
    cr_assert_eq(p.sessions_mid_max, 4);
    cr_assert_eq(p.sessions_max, 16);
    cr_assert_float_eq(p.step_min_s, 0.5e-3, 1e-15);
    cr_assert_float_eq(p.short_step_max_s, 2e-3, 1e-15);
    cr_assert_float_eq(p.step_max_s, 50e-3, 1e-15);
    cr_assert_float_eq(p.w_gather, 0.2, 0);
    cr_assert_float_eq(p.w_h2d + p.w_d2h + p.w_h2d2d + p.w_h2dbatch + p.w_gather + p.w_hbm + p.w_compute + p.w_spin +
                           p.w_sync,
                       0.95, 1e-12);
    cr_assert_float_eq(p.region_cap1_bytes, 8.0 * (1u << 30), 0);
    cr_assert_float_eq(p.ce_Bps, 50e9, 0);
    cr_assert_float_eq(p.call_s, 5e-6, 1e-18);
    const wlgen_set_t *d = wlgen_set_find("random_dev"), *s = wlgen_set_find("random");
    cr_assert(d && s && !wlgen_set_find("random_sealed"));
    cr_assert(d->count == 120 && d->seed0 == 1000000 && !strcmp(d->prefix, "rdev") && !d->sealed);
    cr_assert(s->count == 240 && s->seed0 == 2000000 && !strcmp(s->prefix, "rsealed") && s->sealed);
}

Test(wlgen, nominal_times_are_the_closed_forms)
{
    wlgen_params_t p = params();
    rf_op_t o = {.kind = RF_OP_H2D, .pieces = 4, .piece_bytes = 1 << 20, .span_bytes = 4 << 20};
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &o), 4 * (5e-6 + 1048576 / 50e9), 1e-15);
    o.kind = RF_OP_H2DBATCH;
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &o), 5e-6 + 4 * 1048576 / 50e9, 1e-15);
    o.kind = RF_OP_GATHER;
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &o), 5e-6 + 4 * 1048576 / 20e9, 1e-15);
    o.piece_bytes = 256; /* small pieces: a rate in pieces */
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &o), 5e-6 + 4 / 200e6, 1e-15);
    rf_op_t k = {.kind = RF_OP_COMPUTE, .flops = 1000000000};
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &k), 5e-6 + 1e9 / 50e12, 1e-15);
    rf_op_t h = {.kind = RF_OP_HOST, .us = 40}, y = {.kind = RF_OP_SYNC};
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &h), 40e-6, 1e-15);
    cr_assert_float_eq(wlgen_op_nominal_s(&p, &y), 0, 0);
}

/* rf_write to memory, rf_parse back: the same workload; with wlgen_write's comment too. */
static void round_trip(const wlgen_set_t *set, const wlgen_info_t *in, const rf_workload_t *w, bool comment)
{
    char *buf = NULL, err[512] = "";
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert(f);
    cr_assert_eq(comment ? wlgen_write(f, set, in, w) : rf_write(f, w), 0);
    fclose(f);
    rf_workload_t *back = alloc_w();
    cr_assert_eq(rf_parse(buf, n, w->name, back, err, sizeof err), 0, "%s", err);
    cr_assert(rf_equal(w, back), "%s differs after a round trip", w->name);
    free(back);
    free(buf);
}

Test(wlgen, round_trips_and_is_deterministic)
{
    wlgen_params_t p = params();
    const char *names[] = {"random_dev", "random"};
    rf_workload_t *w = alloc_w(), *again = alloc_w();
    for (int s = 0; s < 2; s++) {
        const wlgen_set_t *set = wlgen_set_find(names[s]);
        for (uint32_t i = 0; i < set->count; i += 7) {
            wlgen_info_t in;
            err_t e;
            cr_assert_eq(wlgen_make(&p, set, i, w, &in, &e), 0, "%s", e.msg);
            round_trip(set, &in, w, i % 2);
            cr_assert_eq(wlgen_make(&p, set, i, again, NULL, &e), 0);
            cr_assert(rf_equal(w, again), "%s drawn twice differs", w->name);
            cr_assert_eq(w->seed, set->seed0 + i);
        }
        err_t e;
        cr_assert_eq(wlgen_make(&p, set, set->count, w, NULL, &e), ERR_RANGE);
        cr_assert(strstr(e.msg, names[s]));
    }
    free(w);
    free(again);
}

/* Every workload of both sets: the strata by index and the declared bounds. */
Test(wlgen, sets_keep_their_strata_and_bounds)
{
    wlgen_params_t p = params();
    const char *names[] = {"random_dev", "random"};
    rf_workload_t *w = alloc_w();
    for (int si = 0; si < 2; si++) {
        const wlgen_set_t *set = wlgen_set_find(names[si]);
        uint32_t mode[3] = {0}, stratum[3] = {0}, short_sync = 0;
        for (uint32_t i = 0; i < set->count; i++) {
            wlgen_info_t in;
            err_t e;
            cr_assert_eq(wlgen_make(&p, set, i, w, &in, &e), 0, "%s", e.msg);
            cr_assert_eq(w->mode, (rf_mode_t)(i % 3));
            cr_assert_eq(in.stratum, (i / 3) % 3);
            const uint32_t lo[] = {1, 2, 5}, hi[] = {1, 4, 16};
            cr_assert(w->n_sessions >= lo[in.stratum] && w->n_sessions <= hi[in.stratum], "%s", w->name);
            cr_assert(in.short_step ? in.target_s >= 0.5e-3 && in.target_s <= 2e-3
                                    : in.target_s >= 2e-3 && in.target_s <= 50e-3, "%s", w->name);
            cr_assert(w->window_ms >= 200 && w->window_ms <= 2000);
            cr_assert(w->min_steps == 10 && w->warmup_steps == 3);
            uint64_t pinned = 0, inside = 0;
            for (uint32_t k = 0; k < w->n_sessions; k++) {
                const rf_session_t *s = &w->sessions[k];
                pinned += s->region_bytes;
                inside += wlgen_sync_inside(s);
                cr_assert(s->region_bytes % 4096 == 0 && s->region_bytes >= (64u << 20));
                cr_assert(s->n_ops >= 2 && s->n_ops <= 24, "%s: %u ops", w->name, s->n_ops);
                cr_assert(s->idle_us == 0 || (s->idle_us >= 50 && s->idle_us <= 5000));
                for (uint32_t j = 0; j < s->n_ops; j++) {
                    const rf_op_t *o = &s->ops[j];
                    cr_assert(o->stream < 4);
                    for (uint32_t a = 0; a < o->n_after; a++)
                        cr_assert(s->ops[o->after[a]].stream != o->stream, "%s op %u", w->name, j);
                    if (rf_kind_is_transfer(o->kind)) {
                        cr_assert(o->piece_bytes >= 256 && o->piece_bytes <= (4u << 20));
                        cr_assert(o->pieces * o->piece_bytes <= o->span_bytes && o->span_bytes <= s->region_bytes);
                        if (o->kind == RF_OP_H2D || o->kind == RF_OP_D2H) cr_assert(o->pieces <= 256);
                    }
                    if (o->kind == RF_OP_HBM) cr_assert(o->bytes >= (1u << 20));
                    if (o->kind == RF_OP_COMPUTE) cr_assert(o->flops >= 100000000);
                    if (o->kind == RF_OP_SPIN) cr_assert(o->us >= 5 && o->us <= 2000);
                    if (o->kind == RF_OP_HOST) cr_assert(o->us >= 5 && o->us <= 500);
                }
            }
            cr_assert(pinned <= (16ull << 30), "%s pins %llu bytes", w->name, (unsigned long long)pinned);
            if (in.short_step) cr_assert_eq(inside, w->n_sessions, "%s: a short step without a sync inside", w->name);
            mode[w->mode]++;
            stratum[in.stratum]++;
            short_sync += in.short_step;
        }
        for (int k = 0; k < 3; k++) cr_assert(mode[k] >= 20 && stratum[k] >= 20, "%s", set->name);
        cr_assert(short_sync * 100 >= 30 * set->count, "%s: %u short", set->name, short_sync);
    }
    free(w);
}
