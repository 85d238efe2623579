/* The scenario of a held-out case: kbench's names mapped to odsim's, and valid YAML. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "models/opkind.h"
#include "validation/probe.h"

static kbrow_t blank(void)
{
    kbrow_t r;
    memset(&r, 0, sizeof r);
    r.file = "validation/data/h200/step.csv";
    r.line = 12;
    r.suite = r.variant = r.allocator = r.policy = r.placement = r.layout = r.method = r.model = "";
    double *nums[] = {&r.n_tokens, &r.heads, &r.bits, &r.k, &r.batch, &r.piece_bytes, &r.region_bytes, &r.pieces,
                      &r.blocks, &r.streams, &r.procs, &r.bytes_moved, &r.reps, &r.concurrent_id};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) *nums[i] = NAN;
    return r;
}

/* A step suite row of `method` (kbench's name) at n tokens: 8 KV heads, k = 2048, its dense tail. */
static kbrow_t step_row(const char *method, double bits, double n, const char *placement, const char *policy)
{
    kbrow_t r = blank();
    r.suite = "step";
    r.method = r.variant = method;
    r.bits = bits;
    r.k = 2048;
    r.n_tokens = n;
    r.heads = 8;
    r.placement = placement;
    r.layout = "interleaved;tail=1024";
    r.policy = policy;
    return r;
}

static char *scenario_busy(const kbrow_t *r, bool busy_start)
{
    char *y = NULL;
    err_t e;
    cr_assert_eq(probe_scenario(r, "h200-1", "models/calib/h200.yaml", busy_start, "0.5 2 0.25", &y, &e), 0, "%s", e.msg);
    cfg_doc_t *d = NULL;
    cr_assert_eq(cfg_parse_string("probe.yaml", y, strlen(y), &d, &e), 0, "%s\n%s", e.msg, y);
    cfg_free(d);
    return y;
}

static char *scenario_of(const kbrow_t *r) { return scenario_busy(r, false); }

/* kbench plans Fathom over its own synthetic keys at 48 plane bits, labelled 56 with the scales
 * (its wf_plan rows name the plane bits themselves): the scenario asks the planner for the same. */
Test(probe, fathom_rows_plan_as_kbench_did)
{
    kbrow_t r = step_row("fathom", 56, 131072, "host", "fetch:sm");
    r.op_name = "layer_step";
    r.op = OPKIND_LAYER_STEP;
    r.model = "qwen3-8b";
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"fathom\", plane_bits: 48, key_variances: [0.5, 2, 0.25], k: 2048"), "%s", y);
    cr_assert(!strstr(y, "budget:"), "%s", y);
    free(y);
    r.op_name = "wf_plan";
    r.op = OPKIND_WF_PLAN;
    r.bits = 96;
    y = scenario_of(&r);
    cr_assert(strstr(y, "plane_bits: 96, key_variances: [0.5, 2, 0.25]"), "%s", y);
    free(y);
    /* a header without the keys' variances cannot predict a planned row */
    err_t e;
    cr_expect_eq(probe_scenario(&r, "h200-1", "models/calib/h200.yaml", false, NULL, &y, &e), ERR_INVAL);
    cr_expect(strstr(e.msg, "key_sigma2"), "%s", e.msg);
}

Test(probe, layer_step_of_a_kbench_method)
{
    kbrow_t r = step_row("pertoken136", 136, 1048576, "hbm_all", "fetch:ce");
    r.op_name = "layer_step";
    r.op = OPKIND_LAYER_STEP;
    r.model = "qwen3-8b";
    r.reps = 30;
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"pertoken\", budget: 136, k: 2048, layout: \"interleaved\", select: \"kv_head\", window: 1024, placement: \"hbm\", kv_placement: hbm, index_fetch: ce}"), "%s", y);
    cr_assert(strstr(y, "what: layer_step"), "%s", y);
    cr_assert(strstr(y, "n_tokens: 1048576"), "%s", y);
    cr_assert(strstr(y, "placement: \"hbm_all\""), "%s", y);
    cr_assert(strstr(y, "steps: 30"), "%s", y);
    cr_assert(strstr(y, "replications: 1"), "%s", y);
    /* kbench: one stream per session, timed by events in it */
    cr_assert(strstr(y, "serving: {session_streams: one, latency_from: device}\n"), "%s", y);
    free(y);
}

Test(probe, concurrent_sessions_and_landmark_pages)
{
    kbrow_t r = blank();
    r.suite = "concurrency";
    r.op_name = "session_step";
    r.op = OPKIND_SESSION_STEP;
    r.method = "landmark16";
    r.bits = 256;
    r.k = 2048;
    r.policy = "procs:4";
    r.procs = 4;
    r.streams = 1;
    r.reps = 5000;
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"landmark\", k: 2048, page: 16, select: \"kv_head\"}"), "%s", y);
    cr_assert(strstr(y, "serving: {session_streams: one, latency_from: device, mode: processes}"), "%s", y);
    cr_assert(strstr(y, "sessions: 4"), "%s", y);
    cr_assert(strstr(y, "steps: 1000"), "%s", y);   /* capped at the step suite's 1000 repetitions */
    cr_assert(strstr(y, "what: session_step"), "%s", y);
    free(y);
    r.policy = "streams:8";
    r.streams = 8;
    r.procs = 1;
    y = scenario_of(&r);
    cr_assert(strstr(y, "serving: {session_streams: one, latency_from: device, mode: streams}") && strstr(y, "sessions: 8"), "%s", y);
    free(y);
}

/* kbench's whole suite (issue 31): a decode step over every layer as sessions on streams, each
 * layer's data in host regions of its own: a session step of the row's method, context, sessions and
 * fetch path over the whole model (the probe shapes no single layer for session steps). */
static kbrow_t whole_row(const char *method, double bits, double n, const char *policy, double streams)
{
    kbrow_t r = step_row(method, bits, n, "host", policy);
    r.suite = "whole";
    r.op_name = "session_step";
    r.op = OPKIND_SESSION_STEP;
    r.streams = streams;
    r.procs = 1;
    r.pieces = 36;
    return r;
}

Test(probe, whole_model_steps_are_session_steps)
{
    kbrow_t r = whole_row("fathom", 56, 524288, "streams:1;fetch:sm", 1);
    r.reps = 30;
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"fathom\", plane_bits: 48, key_variances: [0.5, 2, 0.25], k: 2048, layout: "
                        "\"interleaved\", select: \"kv_head\", window: 1024, placement: \"host\", index_layout: chunked, "
                        "index_fetch: sm}"), "%s", y);
    cr_assert(strstr(y, "serving: {session_streams: one, latency_from: device, mode: streams}"), "%s", y);
    cr_assert(strstr(y, "what: session_step") && strstr(y, "n_tokens: 524288") && strstr(y, "sessions: 1") && strstr(y, "steps: 30"),
              "%s", y);
    cr_assert_null(strstr(y, "launch_hidden"), "%s", y);   /* its steps start on an idle stream */
    free(y);
    r = whole_row("pertoken136", 136, 131072, "streams:4;fetch:ce", 4);
    r.concurrent_id = 2;
    y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"pertoken\", budget: 136, k: 2048, layout: \"interleaved\", select: \"kv_head\", "
                        "window: 1024, placement: \"host\", index_fetch: ce}"), "%s", y);
    cr_assert(strstr(y, "mode: streams}") && strstr(y, "sessions: 4"), "%s", y);
    free(y);
}

/* kbench's prefill suite (issue 31): one chunk of `batch` tokens after an offloaded context over the
 * whole model, exact (dense) or sparse (its k column the 8 x k rows a chunk selects), alone or beside
 * a decode on another stream: a prefill_chunk probe whose one chunk is the row's. */
Test(probe, prefill_chunks_are_prefill_chunk_probes)
{
    kbrow_t r = whole_row("dense", NAN, 131072, "alone;fetch:ce", 1);
    r.suite = "prefill";
    r.op_name = "prefill_chunk";
    r.op = OPKIND_PREFILL_CHUNK;
    r.variant = "exact";
    r.layout = "interleaved";
    r.k = NAN;
    r.batch = 4096;
    r.chunk_tokens = 4096;
    r.reps = 3;
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"dense\", prefill: \"exact\", layout: \"interleaved\", index_fetch: ce}"), "%s", y);
    cr_assert(strstr(y, "serving: {session_streams: one, latency_from: device, prefill_chunk: 4096}"), "%s", y);
    cr_assert(strstr(y, "what: prefill_chunk") && strstr(y, "n_tokens: 131072") && strstr(y, "batch: 4096") &&
                  strstr(y, "sessions: 1"), "%s", y);
    free(y);
    r.method = "pertoken136";
    r.variant = "sparse";
    r.bits = 136;
    r.k = 16384;
    r.batch = r.chunk_tokens = 16384;
    r.policy = "streams:2;fetch:ce;winners:sm;beside:decode";
    r.streams = 2;
    r.concurrent_id = 0;
    y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"pertoken\", budget: 136, prefill: \"sparse\", k: 2048, layout: \"interleaved\", "
                        "select: \"kv_head\", placement: \"host\", index_fetch: ce}"), "%s", y);
    cr_assert(strstr(y, "prefill_chunk: 16384, mode: streams}") && strstr(y, "sessions: 2") && strstr(y, "batch: 16384"), "%s", y);
    free(y);
}

Test(probe, dense_with_kv_in_hbm_keeps_it_there)
{
    kbrow_t r = blank();
    r.suite = "step";
    r.op_name = "layer_step";
    r.op = OPKIND_LAYER_STEP;
    r.method = "dense";
    r.n_tokens = 131072;
    r.placement = "hbm_all";
    r.policy = "fetch:none";
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: {method: \"dense\", kv_placement: hbm}"), "%s", y);
    free(y);
}

/* kbench's HashAttention step fetches each query head's winners (no deduplication): union G. */
Test(probe, hashattn_fetches_every_query_heads_winners)
{
    kbrow_t r = blank();
    r.suite = "step";
    r.op_name = "layer_step";
    r.op = OPKIND_LAYER_STEP;
    r.method = r.variant = "hashattn";
    r.k = 2048;
    r.qheads = 4;
    r.n_tokens = 131072;
    r.placement = "host";
    r.layout = "interleaved;tail=1024";
    r.policy = "fetch:ce";
    r.model = "qwen3-8b";
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "method: \"hashattn\"") && strstr(y, "union: 4") && strstr(y, "window: 1024"), "%s", y);
    free(y);
}

/* kbench's dense step reads host K/V in place: its attention stage is a zero-copy stream, and its
 * tail stage (whose combine then finds the partials in L2) says so too; a sparse step's is not. */
Test(probe, dense_host_step_stages_are_zero_copy)
{
    kbrow_t r = blank();
    r.suite = "step";
    r.method = "dense";
    r.n_tokens = 131072;
    r.placement = "host";
    r.layout = "interleaved;tail=1024";
    r.policy = "in_step;fetch:none";
    static const int ops[3] = {OPKIND_ATTN_DENSE, OPKIND_ATTN_TAIL, OPKIND_GEMM};
    for (int i = 0; i < 3; i++) {
        r.op = ops[i];
        r.op_name = opkind_name(ops[i]);
        char *y = scenario_of(&r);
        cr_expect_eq(strstr(y, "zero_copy: true") != NULL, i < 2, "%s", y);
        free(y);
    }
    r.method = r.variant = "fathom";
    r.op = OPKIND_ATTN_TAIL;
    r.op_name = "attn_tail";
    char *y = scenario_of(&r);
    cr_expect(!strstr(y, "zero_copy"), "%s", y);
    free(y);
}

/* A step's first stage (Fathom's planner) is launched inside its window unless the file says its
 * repetitions start with the GPU busy; then it is hidden as every later stage's is, and so is the
 * whole step's first launch. */
Test(probe, a_busy_start_hides_the_first_stages_launch)
{
    kbrow_t r = step_row("fathom", 56, 32768, "host", "in_step;fetch:sm");
    static const struct { int op; const char *name; bool idle_hidden; } ops[] = {
        {OPKIND_WF_PLAN, "wf_plan", false}, {OPKIND_SCAN, "scan", true}, {OPKIND_LAYER_STEP, "layer_step", false}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        r.op = ops[i].op;
        r.op_name = ops[i].name;
        for (int busy = 0; busy < 2; busy++) {
            char *y = scenario_busy(&r, busy);
            bool hidden = strstr(y, "launch_hidden: true") != NULL;
            cr_expect_eq(hidden, busy || ops[i].idle_hidden, "%s, busy start %d:\n%s", ops[i].name, busy, y);
            free(y);
        }
    }
}

/* kbench's rows ran its own settings, whatever odsim's defaults: k = 2048 where a row gives none,
 * each method's kernels' selection (HashAttention per query head, the others per KV head), and
 * Fathom's and SparQ's planes chunked and fetched by the SM unless the row names the copy engine. */
Test(probe, rows_keep_kbench_settings_under_any_defaults)
{
    kbrow_t r = step_row("sparq", 68, 32768, "host", "fetch:none");
    r.k = NAN;
    r.op_name = "scan";
    r.op = OPKIND_SCAN;
    char *y = scenario_of(&r);
    cr_assert(strstr(y, "k: 2048") && strstr(y, "select: \"kv_head\"") && strstr(y, "index_layout: chunked, index_fetch: sm"),
              "%s", y);
    free(y);
    r = step_row("fathom", 56, 32768, "host", "in_step;fetch:ce2d");
    r.op_name = "index_fetch";
    r.op = OPKIND_INDEX_FETCH;
    y = scenario_of(&r);
    cr_assert(strstr(y, "index_layout: chunked, index_fetch: ce}"), "%s", y);
    free(y);
    r = step_row("hashattn", 0, 32768, "host", "fetch:none");
    r.op_name = "scan";
    r.op = OPKIND_SCAN;
    y = scenario_of(&r);
    cr_assert(strstr(y, "select: \"query_head\"") && !strstr(y, "index_layout"), "%s", y);
    free(y);
}
