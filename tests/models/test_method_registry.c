/* A method added from outside models/: registered through the registry alone, it is bound by name,
 * resolved, planned and run by the engine like a built-in one. */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"
#include "models/cost.h"
#include "models/method_ops.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "sim/exec.h"

/* toy: 64 bits per token per KV head, read as one run, then k rows; its scan a family of its own */
static int toy_resolve(const method_cfg_t *cfg, const llm_t *m, double kv_bytes, method_index_t *ix, err_t *e)
{
    return method_fixed_budget(cfg, "toy", 64, "", ix, e);
}

static double toy_pieces(const method_index_t *ix, const method_cfg_t *cfg, const llm_t *m, double n_off, int t,
                         bool prefill)
{
    return 1;
}

static const method_ops_t toy = {
    .name = "toy",
    .scan_family = "toy",
    .budget_fixed = true,
    .select = SELECT_KV_HEAD,
    .layout = LAYOUT_INTERLEAVED,
    .index_fetch = FETCH_CE,
    .resolve = toy_resolve,
    .index_pieces = toy_pieces,
};

static void register_toy(void)
{
    err_t e;
    cr_assert_eq(method_register(&toy, &e), 0, "%s", e.msg);
}

Test(method_registry, a_registered_method_is_known_by_name)
{
    int builtin = method_count();
    register_toy();
    cr_expect_eq(method_count(), builtin + 1);
    cr_expect_eq(method_find("toy"), builtin);
    cr_expect_eq(method_ops_at(builtin), &toy);
    cr_expect_str_eq(method_names()[builtin], "toy");
    cr_expect_null(method_names()[builtin + 1]);
    int family = cost_scan_family("toy");
    cr_expect_str_eq(method_scan_family_name(family), "toy");
    cr_expect_eq(cost_scan_family("fathom_qh"), 7, "the built-in families keep their places");
    err_t e;
    cr_expect_eq(method_register(&toy, &e), ERR_INVAL, "a name is registered once");
    method_ops_t nameless = toy;
    nameless.name = "";
    cr_expect_eq(method_register(&nameless, &e), ERR_INVAL);
}

/* Closed forms at 64K tokens of qwen3-8b (8 KV heads, head dim 128, 36 layers, bf16 K/V). */
Test(method_registry, a_registered_method_has_the_generic_closed_forms)
{
    register_toy();
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    err_t e;
    cfg_doc_t *d;
    const char *yaml = "method: toy\nk: 1024\nselect: kv_head";
    cr_assert_eq(cfg_parse_string("m.yaml", yaml, strlen(yaml), &d, &e), 0);
    method_cfg_t cfg;
    cr_assert_eq(method_cfg_bind(cfg_root(d), &cfg, &e), 0, "%s", e.msg);
    cfg_free(d);
    cr_expect_eq(cfg.method, method_find("toy"));
    method_t *mt;
    cr_assert_eq(method_new(&cfg, &t.m, &mt, &e), 0, "%s", e.msg);
    cr_expect_str_eq(method_name(mt), "toy");
    cr_expect_eq(method_budget_bits(mt), 64);
    cr_expect_null(method_fathom(mt));
    method_layer_t ly;
    method_layer(mt, 0, 65536, 1, false, &ly);
    double H = t.m.kv_heads, d_h = t.m.head_dim;
    cr_expect_eq(ly.index_host_bytes, 64.0 * 65536 * H / 8);
    cr_expect_eq(ly.index_pieces, H);
    cr_expect_eq(ly.winner_rows, 1024 * H);
    cr_expect_eq(ly.winner_host_bytes, 1024 * H * 2 * d_h * 2);
    cfg.budget_bits = 32;   /* the method fixes its budget */
    method_t *bad;
    cr_expect_eq(method_new(&cfg, &t.m, &bad, &e), ERR_INVAL);
    cr_expect(strstr(e.msg, "toy reads 64 index bits") != NULL, "%s", e.msg);
    method_free(mt);
    th_machine_free(&t);
}

Test(method_registry, a_registered_method_is_planned_and_run)
{
    register_toy();
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    err_t e;
    provider_t *p = th_provider(&t, "method: toy\nk: 1024\nselect: kv_head");
    plan_t plan;
    plan_init(&plan);
    plan_request_t req = {PLAN_DECODE, 65536, 1, 0};
    cr_assert_eq(provider_build(p, t.sim, 0, &req, &plan, &e), 0, "%s", e.msg);
    int scans = 0, fetches = 0;
    for (uint32_t i = 0; i < plan.n_ops; i++) {
        scans += plan.ops[i].kind == OPKIND_SCAN;
        if (plan.ops[i].kind == OPKIND_INDEX_FETCH) {
            fetches++;
            cr_expect_eq(plan.ops[i].bytes_host, 64.0 * 65536 * t.m.kv_heads / 8);
        }
    }
    cr_expect_eq(scans, t.m.layers);
    cr_expect_eq(fetches, t.m.layers);
    plan_free(&plan);
    provider_free(p);

    /* the engine runs four decode steps of a session of it */
    cfg_doc_t *d;
    const char *yaml = "method: toy\nk: 1024\nselect: kv_head";
    cr_assert_eq(cfg_parse_string("m.yaml", yaml, strlen(yaml), &d, &e), 0);
    plan_provider_t pp;
    cr_assert_eq(provider_create(cfg_root(d), &t.m, &t.hw, t.cal, &pp, &e), 0, "%s", e.msg);
    cfg_free(d);
    sim_pool_t hbm = sim_pool_find(t.sim, "gpu0.hbm_mem");
    exec_config_t xc = {.mode = EXEC_STREAMS, .n_gpus = 1, .prefill_chunk = 4096, .hbm_pool = &hbm,
                        .host_pool = sim_pool_find(t.sim, "host.dram_mem")};
    exec_t *x;
    cr_assert_eq(exec_new(t.sim, &xc, &x, &e), 0, "%s", e.msg);
    exec_turn_t turn = {.think_s = 0, .arrival_s = -1, .prefill_tokens = 0, .decode_tokens = 4};
    exec_session_spec_t spec = {.id = 0, .gpu = 0, .context_tokens = 65536, .final_tokens = 65540, .turns = &turn,
                                .n_turns = 1, .provider = pp};
    cr_assert_eq(exec_add_session(x, &spec, &e), 0, "%s", e.msg);
    cr_assert_eq(sim_run(t.sim, SIM_TIME_NEVER, &e), 0, "%s", e.msg);
    const exec_stats_t *st = exec_stats(x);
    cr_expect_eq(st->decode_tokens, 4);
    cr_expect(st->actual_ps_sum >= st->standalone_ps_sum * 0.999, "actual %g standalone %g", st->actual_ps_sum,
              st->standalone_ps_sum);
    exec_free(x);
    th_machine_free(&t);
}
