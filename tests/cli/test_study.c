/* The study assembly end to end: closed forms on an ideal profile, link what-ifs on the real one,
 * bytes at the resources against the plans, determinism, and scenario errors. Run from the repo root. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/study.h"
#include "models/provider.h"

static study_result_t *run_yaml(const char *yaml, const char *const *sets, size_t n_sets)
{
    cfg_doc_t *doc;
    err_t e;
    cr_assert_eq(cfg_parse_string("test.yaml", yaml, strlen(yaml), &doc, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < n_sets; i++) cr_assert_eq(cfg_set(doc, sets[i], "--set", &e), 0, "%s", e.msg);
    study_t *s;
    cr_assert_eq(study_open_doc(doc, "test.yaml", &s, &e), 0, "%s", e.msg);
    study_result_t *r;
    cr_assert_eq(study_run(s, 0, NULL, &r, &e), 0, "%s", e.msg);
    study_free(s);
    return r;
}

/* One session decoding at a fixed context on the ideal platform (no latencies, efficiency 1). */
static const char *ideal =
    "name: ideal\n"
    "calibration: tests/data/ideal_calib.yaml\n"
    "hardware: {box: h200-1, set: {duplex_GBps: 1000000}}\n"
    "model: {name: qwen3-8b}\n"
    "method: {method: dense, prefetch: 0}\n"
    "serving: {mode: streams}\n"
    "workload: {kind: probe, probe: {what: session_step, n_tokens: 32768, sessions: 1, steps: 3}}\n"
    "run: {replications: 1}\n";

/* Alone, the engine's step equals the plan's critical path (each op: bytes over bandwidth or FLOPs
 * over rate), to the clock's rounding. */
Test(study, ideal_step_equals_critical_path)
{
    study_result_t *r = run_yaml(ideal, NULL, 0);
    cr_assert_gt(r->step_mean_s.mean, 0);
    cr_assert_float_eq(r->step_mean_s.mean, r->standalone_step_s, 1e-6 * r->standalone_step_s,
                       "step %.12g s, critical path %.12g s", r->step_mean_s.mean, r->standalone_step_s);
    study_result_free(r);
}

/* Qwen3-8B holds 2·128·2·8·36 = 147456 B of bf16 K/V per token (DESIGN.md: 4.83 GB at n = 32768);
 * three steps from n = 32768 read n tokens' worth each over the link: the tokens they add join the
 * open chunk, attended from HBM. */
#define KV_PER_TOKEN (2.0 * 128 * 2 * 8 * 36)

/* With HBM and FLOPs made free, a dense step is K/V bytes over the link, at the preset's 55.3 GB/s.
 * N sessions on the one link take N times as long. */
Test(study, ideal_dense_is_bytes_over_link_and_scales_with_sessions)
{
    const double bytes = KV_PER_TOKEN * 32768; /* every step's offloaded tokens */
    const char *free_mem[] = {"hardware.set={duplex_GBps: 1000000, hbm_GBps: 1e9, bf16_TFLOPS: 1e9, host_dram_GBps: 1e9}"};
    study_result_t *r1 = run_yaml(ideal, free_mem, 1);
    double h2d = 0;
    for (size_t i = 0; i < r1->n_res; i++)
        if (!strcmp(r1->res[i].name, "gpu0.h2d")) h2d = r1->res[i].capacity;
    cr_assert_gt(h2d, 0);
    cr_assert_float_eq(r1->step_mean_s.mean, bytes / h2d, 1e-6 * bytes / h2d, "step %.9g s, bytes/link %.9g s",
                       r1->step_mean_s.mean, bytes / h2d);
    const char *four[] = {free_mem[0], "workload.probe.sessions=4"};
    study_result_t *r4 = run_yaml(ideal, four, 2);
    cr_assert_float_eq(r4->step_mean_s.mean, 4 * r1->step_mean_s.mean, 1e-6 * r4->step_mean_s.mean);
    study_result_free(r1);
    study_result_free(r4);
}

/* The bytes the link carried equal the plans' host bytes. */
Test(study, bytes_at_resources_equal_plan_bytes)
{
    study_result_t *r = run_yaml(ideal, NULL, 0);
    double h2d_work = -1;
    for (size_t i = 0; i < r->n_res; i++)
        if (!strcmp(r->res[i].name, "gpu0.h2d")) h2d_work = r->res[i].work;
    cr_assert_float_eq(h2d_work, KV_PER_TOKEN * 3 * 32768, 3.0, "carried %.12g B", h2d_work);
    study_result_free(r);
}

/* On the real profile: doubling the link of a link-bound point (dense, long context) speeds it up at
 * least 1.8×; of a compute-bound one (index and K/V in HBM reach, weights dominate) at most 1.1×. */
static const char *real =
    "name: real\n"
    "hardware: {box: h200-1}\n"
    "model: {name: qwen3-8b}\n"
    "method: {method: dense}\n"
    "serving: {mode: streams}\n"
    "workload: {kind: probe, probe: {what: session_step, n_tokens: 262144, sessions: 1, steps: 2}}\n"
    "run: {replications: 1}\n";

static double step_with(const char *const *sets, size_t n)
{
    study_result_t *r = run_yaml(real, sets, n);
    double t = r->step_mean_s.mean;
    study_result_free(r);
    return t;
}

Test(study, link_doubling_speeds_link_bound_not_compute_bound)
{
    const char *base[] = {"hardware.set={}"};
    const char *fast[] = {"hardware.set={h2d_GBps: 110.6, d2h_GBps: 110.6, duplex_GBps: 195.8}"};
    double t1 = step_with(base, 1), t2 = step_with(fast, 1);
    cr_assert_geq(t1 / t2, 1.8, "link-bound: %.4g s -> %.4g s (%.3fx)", t1, t2, t1 / t2);
    const char *small[] = {"method={method: fathom, budget: 56, k: 256, placement: hbm}", "workload.probe.n_tokens=4096",
                           "hardware.set={}"};
    const char *small_fast[] = {small[0], small[1], fast[0]};
    double c1 = step_with(small, 3), c2 = step_with(small_fast, 3);
    cr_assert_leq(c1 / c2, 1.1, "compute-bound: %.4g s -> %.4g s (%.3fx)", c1, c2, c1 / c2);
}

/* How much the mean step of scenario yaml grows with one --set. */
static double step_change(const char *yaml, const char *set)
{
    study_result_t *before = run_yaml(yaml, NULL, 0), *after = run_yaml(yaml, &set, 1);
    double d = after->step_mean_s.mean - before->step_mean_s.mean;
    study_result_free(before);
    study_result_free(after);
    return d;
}

/* kbench's dense step reads host K/V in place (zero-copy): reads of host memory leave the L2 alone,
 * so the tail stage's combine finds the 264 + 17 partials there. Only the combine changes:
 * (4 - 3) us + 281 * (360 - 200) ns = 45.96 us. */
Test(study, zero_copy_dense_tail_stage_combines_from_l2)
{
    static const char *tail =
        "name: tail\n"
        "hardware: {box: h200-1, set: {attn_combine_latency_us: 4, attn_combine_split_ns: 360, "
        "attn_combine_l2_latency_us: 3, attn_combine_l2_split_ns: 200}}\n"
        "model: {name: qwen3-8b}\n"
        "method: {method: dense, window: 1024}\n"
        "serving: {mode: streams, session_streams: one, latency_from: device}\n"
        "workload: {kind: probe, probe: {what: op, op: attn_tail, n_tokens: 32768, placement: host, stage: true, "
        "launch_hidden: true, steps: 3}}\n"
        "run: {replications: 1}\n";
    double d = -step_change(tail, "workload.probe.zero_copy=true");
    cr_expect(fabs(d - 45.96e-6) < 1e-9, "from L2 %.9g s faster", d);
}

/* kbench times a stage from an event after the one before: a scan after its index copy starts when
 * the copy's completion reaches the SMs, ce_handoff_us after it; its time alone has no copy before it.
 * In its step the layer's GEMMs are queued behind it too (after_layer_scan_us); alone, as the kernels
 * suite times it, nothing is. A stage of the scan after a copy-engine index fetch takes the hand-off
 * (7 us here) and the after-layer term (1.5 us) more: 8.5 us. */
Test(study, stage_after_a_copy_takes_the_handoff)
{
    static const char *scan =
        "name: scan\n"
        "hardware: {box: h200-1, set: {ce_handoff_us: 7, after_layer_scan_us: 1.5}}\n"
        "model: {name: qwen3-8b}\n"
        "method: {method: pertoken, index_fetch: ce}\n"
        "serving: {mode: streams, session_streams: one, latency_from: device}\n"
        "workload: {kind: probe, probe: {what: op, op: scan, n_tokens: 32768, placement: host, "
        "launch_hidden: true, steps: 3}}\n"
        "run: {replications: 1}\n";
    double d = step_change(scan, "workload.probe.stage=true");
    cr_expect(fabs(d - 8.5e-6) < 1e-9, "in its step %.9g s slower", d);
}

static int open_fails(const char *yaml, const char *want)
{
    cfg_doc_t *doc;
    err_t e;
    int rc = cfg_parse_string("bad.yaml", yaml, strlen(yaml), &doc, &e);
    if (!rc) {
        study_t *s;
        rc = study_open_doc(doc, "bad.yaml", &s, &e);
        if (!rc) study_free(s);
    }
    cr_assert_neq(rc, 0, "should fail: %s", yaml);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    return rc;
}

Test(study, malformed_scenarios_name_file_line_and_key)
{
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nserving: {mode: stream}\n",
               "bad.yaml:3:17: key 'serving.mode': expected one of streams");
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nrun: {duraton_s: 5}\n",
               "bad.yaml:3:18: key 'run.duraton_s': unknown key 'duraton_s' (did you mean 'duration_s'?)");
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nrun: {duration_s: -5}\n", "key 'run.duration_s'");
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nmethod: {method: dense}\n", "duplicate key 'method'");
    open_fails("hardware: {box: h999}\nmethod: {method: dense}\n", "h999");
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nsweep: {run.seed: 3}\n", "key 'sweep.run.seed'");
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nworkload: {kind: trace}\n", "needs 'trace' or 'import_file'");
}

/* A sweep is the cross product of its axes, the last varying fastest; labels name the values. */
Test(study, sweep_points_and_labels)
{
    const char *yaml = "hardware: {box: h200-1}\nmethod: {method: dense}\n"
                       "sweep: {hardware.link: [pcie4, pcie5], method: [{method: dense}, {method: fathom, budget: 56}]}\n";
    cfg_doc_t *doc;
    err_t e;
    cr_assert_eq(cfg_parse_string("s.yaml", yaml, strlen(yaml), &doc, &e), 0);
    study_t *s;
    cr_assert_eq(study_open_doc(doc, "s.yaml", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(study_n_points(s), 4);
    cr_assert_str_eq(study_point_label(s, 0), "hardware.link=pcie4 method=dense");
    cr_assert_str_eq(study_point_label(s, 3), "hardware.link=pcie5 method=fathom,budget=56");
    study_free(s);
}

/* Opening a sweep of 100,000 points checks each axis value, building the method once per distinct
 * method (three here), not once per point; a bad value on the last axis still fails at open, naming
 * its point; a point runs with its own method built then. */
Test(study, sweep_opens_without_building_every_point)
{
    char yaml[4096];
    int n = snprintf(yaml, sizeof yaml, "hardware: {box: h200-1}\nmethod: {method: dense}\nrun: {duration_s: 1}\nsweep:\n"
                     "  method: [{method: dense}, {method: fathom, budget: 56}, {method: fathom, budget: 136}]\n  run.seed: [");
    for (int v = 1; v <= 100; v++) n += snprintf(yaml + n, sizeof yaml - (size_t)n, "%s%d", v > 1 ? "," : "", v);
    n += snprintf(yaml + n, sizeof yaml - (size_t)n, "]\n  run.warmup_s: [");
    for (int v = 0; v < 333; v++) n += snprintf(yaml + n, sizeof yaml - (size_t)n, "%s0", v ? "," : "");
    snprintf(yaml + n, sizeof yaml - (size_t)n, "]\n");
    cfg_doc_t *doc;
    err_t e;
    cr_assert_eq(cfg_parse_string("s.yaml", yaml, strlen(yaml), &doc, &e), 0, "%s", e.msg);
    study_t *s;
    cr_assert_eq(study_open_doc(doc, "s.yaml", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(study_n_points(s), 3 * 100 * 333);
    cr_assert_eq(study_methods_built(s), 3);
    study_free(s);
    open_fails("hardware: {box: h200-1}\nmethod: {method: dense}\nrun: {duration_s: 10}\n"
               "sweep: {run.seed: [1, 2], run.warmup_s: [0, 1, 10]}\n",
               "sweep point 2 (run.seed=1 run.warmup_s=10)");
}

/* Coarse mode: alone, a coarse step takes exactly the fine step's time (its construction); shared by
 * four sessions on the real profile it stays within 15% of the fine engine's latency here (the
 * difference BENCHMARKS.md states for the stress profile is larger). */
Test(study, coarse_matches_fine_alone_and_nearly_under_sharing)
{
    const char *coarse[] = {"serving.coarse=true", "serving.coarse_reuse=0"};
    study_result_t *f = run_yaml(ideal, NULL, 0), *c = run_yaml(ideal, coarse, 2);
    cr_assert_float_eq(c->step_mean_s.mean, f->step_mean_s.mean, 1e-6 * f->step_mean_s.mean);
    study_result_free(f);
    study_result_free(c);
    const char *four[] = {"workload.probe.sessions=4", "workload.probe.n_tokens=131072"};
    const char *four_c[] = {four[0], four[1], "serving.coarse=true", "method={method: fathom, budget: 56, k: 2048}"};
    const char *four_f[] = {four[0], four[1], "method={method: fathom, budget: 56, k: 2048}"};
    f = run_yaml(real, four_f, 3);
    c = run_yaml(real, four_c, 4);
    double d = fabs(c->step_mean_s.mean / f->step_mean_s.mean - 1);
    cr_assert_lt(d, 0.15, "fine %.4g s, coarse %.4g s (%.1f%%)", f->step_mean_s.mean, c->step_mean_s.mean, 100 * d);
    study_result_free(f);
    study_result_free(c);
}

/* Point 0 of scenarios/default.yaml in its short form (20 s, no stopping rule: the scenario runs
 * until steady) with the --set assignments sets[0..n). */
static study_result_t *run_default(const char *const *sets, size_t n)
{
    cfg_doc_t *doc;
    err_t e;
    cr_assert_eq(cfg_parse_file("scenarios/default.yaml", &doc, &e), 0, "%s", e.msg);
    cr_assert_eq(cfg_set(doc, "run.duration_s=20s", "--set", &e), 0, "%s", e.msg);
    cr_assert_eq(cfg_set(doc, "run.ci_target=0", "--set", &e), 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) cr_assert_eq(cfg_set(doc, sets[i], "--set", &e), 0, "%s", e.msg);
    study_t *s;
    cr_assert_eq(study_open_doc(doc, "default.yaml", &s, &e), 0, "%s", e.msg);
    study_result_t *r;
    cr_assert_eq(study_run(s, 0, NULL, &r, &e), 0, "%s", e.msg);
    study_free(s);
    return r;
}

/* Figures over replications: the Student-t interval as is (t(0.975, 1) = 12.706: the mean of 1 and 3
 * is 2 ± 12.706·1 = [-10.706, 14.706], not clamped at 0), replications without a sample left out,
 * and no sample at all giving no figure (NAN: "n/a", JSON null), never 0. */
Test(study, figures_over_replications)
{
    double two[] = {1, 3};
    study_stat_t st = study_stat_of(two, 2);
    cr_expect_float_eq(st.mean, 2, 1e-12);
    cr_expect_float_eq(st.lo, 2 - 12.7062047361747, 1e-9);
    cr_expect_float_eq(st.hi, 2 + 12.7062047361747, 1e-9);
    cr_expect_eq(st.n, 2);
    double some[] = {NAN, 4, NAN};
    st = study_stat_of(some, 3);
    cr_expect_float_eq(st.mean, 4, 0);
    cr_expect(isnan(st.lo) && isnan(st.hi), "one sample has no interval");
    cr_expect_eq(st.n, 1);
    double none[] = {NAN, NAN};
    st = study_stat_of(none, 2);
    cr_expect(isnan(st.mean) && st.n == 0);
}

/* A run in which no decode step finishes (a 1M-token step over PCIe Gen3 takes about half a second)
 * reports no step figure rather than 0 s. */
Test(study, no_finished_step_is_no_figure)
{
    const char *sets[] = {"hardware.link=pcie3", "sweep={}", "run.replications=1", "run.duration_s=0.2s"};
    study_result_t *r = run_default(sets, 4);
    cr_expect_eq(r->decode_tokens, 0);
    cr_expect(isnan(r->step_p50_s.mean) && r->step_p50_s.n == 0, "p50 %g", r->step_p50_s.mean);
    cr_expect(isnan(r->ttft_p99_s.mean));
    cr_expect(!r->slo_met);
    study_result_free(r);
}

/* The warm-up is excluded from every statistic: the default sessions join with their context
 * offloaded and get their first token within about 0.3 s, and no turn (~150 tokens) ends within
 * 2 s, so with 1 s of warm-up no TTFT is measured, while steps are. */
Test(study, warmup_excluded_from_latencies)
{
    const char *sets[] = {"sweep={}", "run.replications=1", "run.duration_s=2s", "run.warmup_s=1s"};
    for (int w = 0; w < 2; w++) {
        study_result_t *r = run_default(sets, w ? 4u : 3u);
        cr_expect(r->step_p50_s.n == 1, "steps measured (warm-up %d)", w);
        if (w) cr_expect(isnan(r->ttft_p50_s.mean), "TTFT %g s measured in the warm-up", r->ttft_p50_s.mean);
        else cr_expect(r->ttft_p50_s.mean > 0.05 && r->ttft_p50_s.mean < 1, "TTFT %g s", r->ttft_p50_s.mean);
        study_result_free(r);
    }
}

/* Sessions never admitted count in the admission-wait quantiles with their waits so far (40 users
 * of ~770K-token sessions on one H200's 1.1 TB of host DRAM: most wait the whole 20 s), never as 0. */
Test(study, sessions_never_admitted_count_in_the_wait)
{
    const char *sets[] = {"sweep={}", "run.replications=1", "workload.generator.population=40"};
    study_result_t *r = run_default(sets, 3);
    cr_expect(r->admit_never > 20, "%llu never admitted", (unsigned long long)r->admit_never);
    cr_expect(r->admit_wait_p99_s > 19.9, "p99 %g s", r->admit_wait_p99_s);
    study_result_free(r);
}
