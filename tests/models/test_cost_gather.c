/* Cost forms of the SM gather against hand-computed values: re-read rows warm and cold, the row-rate
 * knots by region, page-table entries in L2, winners kept or evicted, plane fetches at the sweep rates. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/cost.h"
#include "models/method_ops.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "validation/protocol.h"

#include "tests/models/cost_th.h"

/* A gather re-reading its rows: none cold up to gather_warm_rows, all from twice as many, log-linear
 * between; the translations of n rows over a region are min(n, its 4 KiB pages). */
Test(cost, reread_rows_turn_cold_past_the_warm_count)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_warm_rows", 1000);
    cost_t c;
    err_t e;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    cr_expect_float_eq(cost_gather_cold_share(&c, 1000), 0, 1e-12);
    cr_expect_float_eq(cost_gather_cold_share(&c, 2000), 1, 1e-12);
    cr_expect_float_eq(cost_gather_cold_share(&c, 1000 * sqrt(2.0)), 0.5, 1e-12);
    cr_expect_float_eq(cost_gather_translations(&c, 100, 1 << 20), 100, 0);       /* 256 pages */
    cr_expect_float_eq(cost_gather_translations(&c, 100000, 1 << 20), 256, 0);
    /* half cold at 4 GiB: 1/rate = 0.5/r(256 MiB) + 0.5/r(4 GiB) */
    double r0 = get(t.cal, "gather_rows_Mps_256MiB") * 1e6, r2 = get(t.cal, "gather_rows_Mps_4GiB") * 1e6;
    cr_expect_float_eq(cost_gather_rows_per_s(&c, 4294967296.0, 1000 * sqrt(2.0), COST_ROWS_ANY), 1 / (0.5 / r0 + 0.5 / r2), 1e-3);
    th_machine_free(&t);
}

/* The row rate between knots a doubling apart, log-linear: at 1.5 GiB between the 1 and 2 GiB knots
 * r1·(r2/r1)^log2(1.5); rows read head by head take their own table, and rows all new theirs. */
Test(cost, row_rate_knots_and_head_order)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_rows_Mps_1GiB", 100);
    set(t.cal, "gather_rows_Mps_2GiB", 50);
    set(t.cal, "gather_heads_rows_Mps_2GiB", 80);
    cost_t c;
    err_t e;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    double g = 1073741824.0;
    cr_expect_float_eq(cost_gather_rows_per_s(&c, 2 * g, INFINITY, COST_ROWS_ANY), 50e6, 1e-6);
    cr_expect_float_eq(cost_gather_rows_per_s(&c, 2 * g, INFINITY, COST_ROWS_HEADS), 80e6, 1e-6);
    cr_expect_float_eq(cost_gather_rows_per_s(&c, 1.5 * g, INFINITY, COST_ROWS_ANY), 100e6 * pow(0.5, log2(1.5)), 1e-3);
    /* rows all new: cold whatever the translations the GPU could keep */
    set(t.cal, "gather_heads_new_rows_Mps_2GiB", 60);
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    cr_expect_float_eq(cost_gather_rows_per_s(&c, 2 * g, 0, COST_ROWS_HEADS_NEW), 60e6, 1e-6);
    th_machine_free(&t);
}

/* The seconds per row (rows of row_bytes) the winner fetches of the one-request decode plan of
 * `yaml` at 1M put on the GPU's row rate, all alike (checked); *seen counts them. */
static double winner_s_per_row(tmachine_t *t, const cost_paths_t *paths, const char *yaml, bool alone, double row_bytes,
                               int *seen)
{
    plan_t plan;
    provider_t *p = th_provider(t, yaml);
    plan_init(&plan);
    plan_request_t req = {PLAN_DECODE, 1048576, 1, 0};
    build_as(t, p, (protocol_t){.gathers_reread = alone}, &req, &plan);
    double first = NAN;
    *seen = 0;
    for (uint32_t i = 0; i < plan.n_ops; i++) {
        const plan_op_t *op = &plan.ops[i];
        if (op->kind != OPKIND_WINNER_FETCH) continue;
        (*seen)++;
        double per_row = 0;   /* the rows use: seconds per byte = 1/(rows/s · row_bytes) */
        for (uint32_t u = 0; u < op->n_uses; u++)
            if (op->uses[u].res == paths->rows) per_row = op->uses[u].coef * row_bytes;
        if (isnan(first)) first = per_row;
        cr_expect_float_eq(per_row, first, 1e-9 * first);
    }
    plan_free(&plan);
    provider_free(p);
    return first;
}

/* A gather alone that re-reads its rows finds their page-table entries in L2 while its bytes fit
 * there (the _pt tables); in a step, or past the L2's size, it reads them from memory, and after
 * another gather over host memory it takes the _after tables; rows all new take their own table
 * wherever they run. */
Test(cost, page_table_entries_stay_in_l2_only_alone_and_small)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    cost_t c;
    err_t e;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    double l2 = get(t.cal, "l2_bytes");
    cr_expect_eq(cost_gather_table(&c, COST_SM_HEADS, l2, COST_GATHER_ALONE), COST_ROWS_HEADS_PT);
    cr_expect_eq(cost_gather_table(&c, COST_SM_HEADS, 1.01 * l2, COST_GATHER_ALONE), COST_ROWS_HEADS);
    cr_expect_eq(cost_gather_table(&c, COST_SM_HEADS, 1 << 20, COST_GATHER_STEP), COST_ROWS_HEADS);
    cr_expect_eq(cost_gather_table(&c, COST_SM_HEADS, 1 << 20, COST_GATHER_AFTER), COST_ROWS_HEADS_AFTER);
    cr_expect_eq(cost_gather_table(&c, COST_SM_GATHER, 1 << 20, COST_GATHER_ALONE), COST_ROWS_ANY_PT);
    cr_expect_eq(cost_gather_table(&c, COST_SM_PREFIX, 1 << 20, COST_GATHER_ALONE), COST_ROWS_ANY_PT);
    cr_expect_eq(cost_gather_table(&c, COST_SM_GATHER, 1 << 20, COST_GATHER_STEP), COST_ROWS_ANY);
    cr_expect_eq(cost_gather_table(&c, COST_SM_PREFIX, 1 << 20, COST_GATHER_AFTER), COST_ROWS_ANY_AFTER);
    cr_expect_eq(cost_gather_table(&c, COST_SM_HEADS_NEW, 1 << 20, COST_GATHER_AFTER), COST_ROWS_HEADS_NEW);
    th_machine_free(&t);
}

/* Fathom at 1M with k = 4096, winners gathered by the SMs: 8·4096 = 32768 rows of 512 B (16 MiB) per
 * layer over 4 GiB, all cold past 2·10000 warm rows. Alone they go at the head-by-head rate with
 * their page-table entries in L2 (gather_heads_pt_rows_Mps_4GiB); in a step at the one without; in
 * a step whose index the SMs gather from the host as well, at the rate after another gather
 * (gather_heads_after_rows_Mps_4GiB), that fetch's translations (far more than 10000) having evicted
 * theirs; with the index copied by the copy engine, at the step's. Where the GPU keeps 1e9, every
 * layer's rows keep their translations from one step to the next, and come in a new order: the
 * _shuffle rate (gather_heads_shuffle_rows_Mps_4GiB). */
Test(cost, winner_fetch_alone_reads_the_page_table_rate)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_heads_rows_Mps_4GiB", 40);
    set(t.cal, "gather_heads_pt_rows_Mps_4GiB", 70);
    set(t.cal, "gather_heads_after_rows_Mps_4GiB", 30);
    set(t.cal, "gather_heads_shuffle_rows_Mps_4GiB", 50);
    cost_t c;
    cost_paths_t paths;
    static const struct { const char *yaml; bool alone; double warm, Mps; } cases[7] = {
        {"method: fathom\nk: 4096\nplacement: hbm\nfetch: sm\nselect: kv_head", true, 1e4, 70},
        {"method: fathom\nk: 4096\nplacement: hbm\nfetch: sm\nselect: kv_head", false, 1e4, 40},
        {"method: fathom\nk: 4096\nplacement: host\nindex_layout: chunked\nindex_fetch: sm\nfetch: sm\nselect: kv_head", false, 1e4, 30},
        {"method: fathom\nk: 4096\nplacement: host\nindex_layout: chunked\nindex_fetch: sm\nfetch: sm\nselect: kv_head", false, 1e9, 50},
        {"method: fathom\nk: 4096\nplacement: host\nindex_fetch: ce\nfetch: sm\nselect: kv_head", false, 1e4, 40},
        {"method: fathom\nk: 4096\nplacement: host\nindex_layout: chunked\nindex_fetch: sm\nfetch: sm\nselect: kv_head", true, 1e4, 70},
        {"method: fathom\nk: 4096\nplacement: hbm\nfetch: sm\nselect: kv_head", false, 1e9, 50}};
    for (int i = 0; i < 7; i++) {
        set(t.cal, "gather_warm_rows", cases[i].warm);
        cost_ready(&t, &c, &paths);
        int seen;
        double s = winner_s_per_row(&t, &paths, cases[i].yaml, cases[i].alone, 512, &seen);
        cr_expect_float_eq(s, 1 / (cases[i].Mps * 1e6), 1e-6 / 40e6, "case %d: %g s/row", i, s);
        cr_expect_eq(seen, 36);
    }
    th_machine_free(&t);
}

/* A step's winner fetch head by head finds its rows' translations while the step's SM gathers,
 * every layer's, touch no more than the GPU keeps: 32768 rows per layer, gather_warm_rows 1e5. One
 * layer (kbench's step): none cold, every row at the _shuffle rate (the same rows in a new order),
 * 50M/s. 36 layers: 36·32768 past twice 1e5, all cold at the step's table, 40M/s. Two layers:
 * 65536 translations, cold share log2(65536/1e5) < 0: none. Four: 131072, log2(1.31072) = 0.39 of
 * the rows cold: 1/rate = 0.61/50M + 0.39/40M. */
Test(cost, a_step_keeps_its_winners_while_its_gathers_fit)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_warm_rows", 1e5);
    set(t.cal, "gather_heads_rows_Mps_4GiB", 40);
    set(t.cal, "gather_heads_shuffle_rows_Mps_4GiB", 50);
    cost_t c;
    cost_paths_t paths;
    const struct { int layers; double cold; } cases[] = {{1, 0}, {2, 0}, {4, log2(131072 / 1e5)}, {36, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t.m.layers = cases[i].layers;
        cost_ready(&t, &c, &paths);
        int seen;
        double s = winner_s_per_row(&t, &paths, "method: fathom\nk: 4096\nplacement: hbm\nfetch: sm\nselect: kv_head", false, 512, &seen);
        double e = cases[i].cold, want = (1 - e) / 50e6 + e / 40e6;
        cr_expect_float_eq(s, want, 1e-4 * want, "%d layers: %g s/row, want %g", cases[i].layers, s, want);
        cr_expect_eq(seen, cases[i].layers);
    }
    th_machine_free(&t);
}

/* A gather right after another over host memory: the share of its rows whose translations that
 * gather evicted, cost_gather_cold_share of the translations it touched (none up to gather_warm_rows,
 * all from twice that, log2 between), goes at the _after table, the rest at the step's:
 * 1/rate = (1 - e)/40M + e/30M per row at 4 GiB. A copy-engine form is as in a step. */
Test(cost, winners_after_a_gather_pay_for_what_it_evicted)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_warm_rows", 10000);
    set(t.cal, "gather_heads_rows_Mps_4GiB", 40);
    set(t.cal, "gather_heads_after_rows_Mps_4GiB", 30);
    cost_t c;
    cost_paths_t paths;
    cost_ready(&t, &c, &paths);
    double region = 4294967296.0, rows = 16384;
    static const struct { double evicting, share; } cases[] = {
        {1, 0}, {5000, 0}, {10000, 0}, {10000 * M_SQRT2, 0.5}, {20000, 1}, {1e7, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plan_op_t op;
        memset(&op, 0, sizeof op);
        cost_transfer_after(&c, &paths, COST_SM_HEADS, rows * 512, rows, region, cases[i].evicting, INFINITY, &op);
        double per_row = NAN;
        for (uint32_t u = 0; u < op.n_uses; u++)
            if (op.uses[u].res == paths.rows) per_row = op.uses[u].coef * 512;
        double e = cases[i].share, want = (1 - e) / 40e6 + e / 30e6;
        cr_expect_float_eq(per_row, want, 1e-9 * want, "evicting %g: %g s/row, want %g", cases[i].evicting, per_row, want);
    }
    plan_op_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    cost_transfer_after(&c, &paths, COST_CE_BATCH, rows * 512, rows, region, 1e7, INFINITY, &a);
    cost_transfer(&c, &paths, COST_CE_BATCH, true, rows * 512, rows, region, COST_GATHER_STEP, &b);
    cr_expect_eq(memcmp(&a, &b, sizeof a), 0, "a copy-engine fetch after a gather differs from one in a step");
    th_machine_free(&t);
}

/* A plan whose first op was launched before the timed window opened (kbench's step repetitions on a
 * busy GPU): that op's launch costs nothing, every later op's still does. */
Test(cost, a_hidden_first_launch_is_only_the_first)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    t.m.layers = 1;
    for (int hidden = 0; hidden < 2; hidden++) {
        provider_t *p = th_provider(&t, "method: fathom\nplacement: host\nindex_fetch: sm\nselect: kv_head");
        plan_t plan;
        plan_init(&plan);
        plan_request_t req = {PLAN_DECODE, 131072, 1, 0};
        build_as(&t, p, (protocol_t){.first_launch_hidden = hidden}, &req, &plan);
        cr_assert_gt(plan.n_ops, 2);
        cr_expect_eq(plan.ops[0].launch_ps == 0, hidden, "first op's launch %lld ps, hidden %d",
                     (long long)plan.ops[0].launch_ps, hidden);
        for (uint32_t i = 1; i < plan.n_ops; i++)   /* the L2's write-back runs inside the GEMM */
            if (plan.ops[i].exec == PLAN_EXEC_GPU && plan.ops[i].kind != OPKIND_L2_WRITEBACK)
                cr_expect_gt(plan.ops[i].launch_ps, 0, "op %u", i);
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* Fathom at 1M with k = 2048 and winners gathered by the SMs: 8·2048 = 16384 rows per layer. Timed
 * alone (the same rows in the same order again) they stay warm under 20000 warm rows; in a step, cold
 * (the region's row rate), one layer or 36. */
Test(cost, gathers_are_warm_only_alone)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_warm_rows", 20000);
    cost_t c;
    cost_paths_t paths;
    cost_ready(&t, &c, &paths);
    const char *yaml = "method: fathom\nk: 2048\nplacement: hbm\nfetch: sm\nselect: kv_head";
    double region = 1048576.0 * 8 * 512, warm = 1 / get(t.cal, "gather_rows_Mps_256MiB") * 1e-6;
    double cold = 1 / cost_gather_rows_per_s(&c, region, 1e9, COST_ROWS_HEADS);   /* winners come head by head */
    for (int alone = 0; alone < 2; alone++)
        for (int layers = 1; layers <= 36; layers += 35) {
            t.m.layers = layers;
            int seen;
            double s = winner_s_per_row(&t, &paths, yaml, alone, 512, &seen);
            cr_expect_float_eq(s, alone ? warm : cold, 1e-3 * cold, "layers %d alone %d: %g s/row", layers, alone, s);
            cr_expect_eq(seen, layers);
        }
    th_machine_free(&t);
}

/* Winners all new each step (winners: new) read the head-by-head table of rows read for the first
 * time, cold even timed alone: Fathom at 1M spreads its K/V over 4 GiB (1M · 8 heads · 512 B). */
Test(cost, new_winners_take_their_own_table)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gather_heads_rows_Mps_4GiB", 50);
    set(t.cal, "gather_heads_new_rows_Mps_4GiB", 25);
    cost_paths_t paths;
    cost_t c;
    cost_ready(&t, &c, &paths);
    static const char *yaml[2] = {"method: fathom\nplacement: hbm\nfetch: sm\nselect: kv_head",
                                  "method: fathom\nplacement: hbm\nfetch: sm\nwinners: new\nselect: kv_head"};
    static const double rows_ps[2] = {50e6, 25e6};
    t.m.layers = 1;
    for (int i = 0; i < 2; i++) {
        int seen;
        cr_expect_float_eq(winner_s_per_row(&t, &paths, yaml[i], false, 512, &seen), 1 / rows_ps[i], 1e-6 / rows_ps[i],
                           "%s", yaml[i]);
        cr_expect_eq(seen, 1);
    }
    th_machine_free(&t);
}

/* Dense attention's fixed time grows with its split-K grid: 8 heads of min(16·132/8, n/64) splits,
 * each SM's share of the blocks in turn at attn_dense_block_us: at 4K 512 blocks (3.88 per SM),
 * from 16.9K on 2112 (16 per SM). */
Test(cost, dense_attention_pays_per_block)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "attn_dense_latency_us", 5);
    set(t.cal, "attn_dense_block_us", 2);
    static const struct { uint64_t ctx; double blocks; } cases[2] = {{4096, 512}, {65536, 2112}};
    for (int i = 0; i < 2; i++) {
        plan_t plan;
        provider_t *p = build(&t, "method: dense\nkv_placement: hbm", cases[i].ctx, &plan);
        int seen = 0;
        for (uint32_t j = 0; j < plan.n_ops; j++)
            if (plan.ops[j].kind == OPKIND_ATTN_DENSE) {
                seen++;
                double want = 5 + cases[i].blocks / 132 * 2;
                cr_expect_float_eq((double)plan.ops[j].cost.latency_ps / SIM_PS_PER_US, want, 1e-3, "ctx %llu: %g us",
                                   (unsigned long long)cases[i].ctx, (double)plan.ops[j].cost.latency_ps / SIM_PS_PER_US);
            }
        cr_expect_eq(seen, 36);
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* The SM index fetch (Fathom's plane prefixes): the gather's ceilings times prefix_gather_eff, its own
 * fixed time. */
Test(cost, sm_index_fetch_is_the_prefix_kernel)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "prefix_gather_eff", 0.5);
    set(t.cal, "prefix_gather_latency_us", 11);
    cost_t c;
    cost_paths_t paths;
    cost_ready(&t, &c, &paths);
    plan_op_t g, pf;
    memset(&g, 0, sizeof g);
    memset(&pf, 0, sizeof pf);
    cost_transfer(&c, &paths, COST_SM_GATHER, true, 1 << 24, 4096, 1 << 26, COST_GATHER_ALONE, &g);
    cost_transfer(&c, &paths, COST_SM_PREFIX, true, 1 << 24, 4096, 1 << 26, COST_GATHER_ALONE, &pf);
    cr_expect_float_eq(pf.cost.cap_rate, 0.5 * g.cost.cap_rate, 1e-6 * g.cost.cap_rate);
    cr_expect_eq(pf.cost.latency_ps, 11 * SIM_PS_PER_US);
    /* a plane scan reading the prefixes from host memory: the same form at zc_scan_eff of its rate */
    set(t.cal, "zc_scan_eff", 0.8);
    cost_ready(&t, &c, &paths);
    plan_op_t zc;
    memset(&zc, 0, sizeof zc);
    cost_transfer(&c, &paths, COST_SM_ZC_SCAN, true, 1 << 24, 4096, 1 << 26, COST_GATHER_ALONE, &zc);
    cr_expect_float_eq(zc.cost.cap_rate, 0.8 * pf.cost.cap_rate, 1e-6 * g.cost.cap_rate);
    cr_expect_eq(zc.cost.latency_ps, 11 * SIM_PS_PER_US);
    plan_t plan;
    provider_t *p = build(&t, "method: fathom\nplacement: host\nindex_fetch: sm\nselect: kv_head", 65536, &plan);
    int fetches = 0;
    for (uint32_t i = 0; i < plan.n_ops; i++)
        if (plan.ops[i].kind == OPKIND_INDEX_FETCH) {
            fetches++;
            cr_expect_eq(plan.ops[i].cost.latency_ps, 11 * SIM_PS_PER_US);
        }
    cr_expect_eq(fetches, 36);
    plan_free(&plan);
    provider_free(p);
    th_machine_free(&t);
}

/* A plane index's fetch row (cost_plane_row_s). Sweep rates set to 400 and 100 Mrows/s at 768 MiB
 * (128 B and 512 B rows) and 100 and 50 at the next knot, 832 MiB. At 768 MiB a 128 B row takes
 * 1/400 us = 2.5 ns, a 512 B one 10 ns, a 320 B one half way, 6.25 ns; past 512 B 10 ns, below 128 B
 * 2.5. At sqrt(768 · 832) MiB, half way on a log scale, the 128 B rate is sqrt(400 · 100) = 200
 * Mrows/s: 5 ns. At the last knot (4 GiB) set to 20 Mrows/s for 128 B rows, 50 ns; past it slower
 * as rows in any order slow: with those at 40 Mrows/s at 4 GiB and 20 at 16 GiB, 100 ns at 16 GiB.
 * In a plan the prefix fetch's rows bind at that rate, wherever it runs: prefix_gather_eff (0.5 here)
 * scales its byte ceilings only. */
Test(cost, plane_fetch_rows_at_the_sweep_rates)
{
    static const struct {
        const char *name;
        double value;
    } given[] = {{"gather_plane128_rows_Mps_768MiB", 400}, {"gather_plane512_rows_Mps_768MiB", 100},
                 {"gather_plane128_rows_Mps_832MiB", 100}, {"gather_plane512_rows_Mps_832MiB", 50},
                 {"gather_plane128_rows_Mps_4096MiB", 20}, {"gather_rows_Mps_4GiB", 40},
                 {"gather_rows_Mps_16GiB", 20},            {"prefix_gather_eff", 0.5}};
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) set(t.cal, given[i].name, given[i].value);
    cost_t c;
    cost_paths_t paths;
    cost_ready(&t, &c, &paths);
    const double MiB = 1048576.0;
    cr_expect_float_eq(cost_plane_row_s(&c, 768 * MiB, 128), 2.5e-9, 1e-15);
    cr_expect_float_eq(cost_plane_row_s(&c, 768 * MiB, 512), 10e-9, 1e-15);
    cr_expect_float_eq(cost_plane_row_s(&c, 768 * MiB, 320), 6.25e-9, 1e-15);
    cr_expect_float_eq(cost_plane_row_s(&c, 768 * MiB, 4096), 10e-9, 1e-15);
    cr_expect_float_eq(cost_plane_row_s(&c, 768 * MiB, 64), 2.5e-9, 1e-15);
    cr_expect_float_eq(cost_plane_row_s(&c, sqrt(768.0 * 832.0) * MiB, 128), 5e-9, 1e-14);
    cr_expect_float_eq(cost_plane_row_s(&c, 4096 * MiB, 128), 50e-9, 1e-14);
    cr_expect_float_eq(cost_plane_row_s(&c, 16384 * MiB, 128), 100e-9, 1e-14);
    /* a Fathom-like fetch of 320 B rows over 768 MiB, in a step: rows at 320 B / 6.25 ns */
    plan_op_t pf;
    memset(&pf, 0, sizeof pf);
    double rows = 65536;
    cost_transfer_step(&c, &paths, COST_SM_PREFIX, rows * 320, rows, 768 * MiB, INFINITY, &pf);
    double rows_use = NAN;
    for (int i = 0; i < pf.n_uses; i++)
        if (pf.uses[i].res == paths.rows) rows_use = pf.uses[i].coef;
    cr_expect_float_eq(rows_use, 6.25e-9 / 320, 1e-18);
    th_machine_free(&t);
}
