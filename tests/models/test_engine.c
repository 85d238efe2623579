/* Providers under the engine's executor: one session alone takes its standalone time; batched
 * sessions read the weights once. */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"
#include "models/provider.h"
#include "sim/exec.h"

static plan_provider_t mkprov(tmachine_t *t, const char *yaml)
{
    err_t e;
    cfg_doc_t *d;
    cr_assert_eq(cfg_parse_string("m.yaml", yaml, strlen(yaml), &d, &e), 0);
    plan_provider_t p;
    cr_assert_eq(provider_create(cfg_root(d), &t->m, &t->hw, t->cal, &p, &e), 0, "%s", e.msg);
    cfg_free(d);
    return p;
}

static const exec_stats_t *run(tmachine_t *t, exec_mode_t mode, int sessions, const char *yaml, exec_t **x)
{
    err_t e;
    sim_pool_t hbm = sim_pool_find(t->sim, "gpu0.hbm_mem");
    exec_config_t cfg = {.mode = mode, .n_gpus = 1, .prefill_chunk = 4096, .hbm_pool = &hbm,
                         .host_pool = sim_pool_find(t->sim, "host.dram_mem")};
    cr_assert_eq(exec_new(t->sim, &cfg, x, &e), 0, "%s", e.msg);
    exec_turn_t turn = {.think_s = 0, .arrival_s = -1, .prefill_tokens = 0, .decode_tokens = 4};
    for (int s = 0; s < sessions; s++) {
        exec_session_spec_t spec = {.id = (uint64_t)s, .gpu = 0, .context_tokens = 65536, .final_tokens = 65540,
                                    .turns = &turn, .n_turns = 1, .provider = mkprov(t, yaml)};
        cr_assert_eq(exec_add_session(*x, &spec, &e), 0, "%s", e.msg);
    }
    cr_assert_eq(sim_run(t->sim, SIM_TIME_NEVER, &e), 0, "%s", e.msg);
    return exec_stats(*x);
}

Test(engine, one_session_alone_takes_its_standalone_time)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    exec_t *x;
    const exec_stats_t *st = run(&t, EXEC_STREAMS, 1, "method: pertoken\nbudget: 136", &x);
    cr_expect_eq(st->decode_tokens, 4);
    cr_expect(st->actual_ps_sum >= st->standalone_ps_sum * 0.999, "actual %g standalone %g", st->actual_ps_sum,
              st->standalone_ps_sum);
    cr_expect(st->actual_ps_sum <= st->standalone_ps_sum * 1.5, "actual %g standalone %g", st->actual_ps_sum,
              st->standalone_ps_sum);
    exec_free(x);
    th_machine_free(&t);
}

Test(engine, lockstep_batch_merges_weight_reads)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    exec_t *x;
    const exec_stats_t *st = run(&t, EXEC_LOCKSTEP, 4, "method: pertoken\nbudget: 136", &x);
    cr_expect_eq(st->decode_tokens, 16);
    double w_batched = sim_res_work(t.sim, sim_res_find(t.sim, "gpu0.hbm"));
    exec_free(x);
    th_machine_free(&t);
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    st = run(&t, EXEC_STREAMS, 4, "method: pertoken\nbudget: 136", &x);
    cr_expect_eq(st->decode_tokens, 16);
    double w_apart = sim_res_work(t.sim, sim_res_find(t.sim, "gpu0.hbm"));
    /* weights (~16.4 GB in bf16) dominate HBM traffic: read once per batched step, not per session */
    cr_expect(w_batched < 0.4 * w_apart, "HBM work batched %g, apart %g", w_batched, w_apart);
    exec_free(x);
    th_machine_free(&t);
}
