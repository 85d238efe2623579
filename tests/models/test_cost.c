/* Cost forms against hand-computed values: scan families, the split-K split count and combine, attention
 * over winners still in L2, 2D copies bound by the host's row rate. */
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

Test(cost, scan_families_are_kbench_variants_without_digits)
{
    cr_expect_eq(cost_scan_family("pertoken136"), cost_scan_family("pertoken68"));
    cr_expect_eq(cost_scan_family("landmark16"), cost_scan_family("landmark"));
    cr_expect_str_eq(method_scan_family_name(cost_scan_family("fathom")), "fathom");
    cr_expect_str_eq(method_scan_family_name(cost_scan_family("hashattn")), "hashattn");
    cr_expect_eq(cost_scan_family("dense"), -1);
    cr_expect_eq(cost_scan_family("hash"), -1);
    cr_expect_eq(cost_scan_family("123"), -1);
    for (int m = 0; m < method_count(); m++)   /* every method with an index has its scan's family */
        if (!method_ops_at(m)->reads_all) cr_expect_geq(cost_scan_family(method_names()[m]), 0, "%s", method_names()[m]);
    /* the families in the order the cost parameters have always had */
    static const char *const order[] = {"pertoken", "sparq", "fathom", "hashattn", "landmark", "fathom_v1", "fathom_v2", "fathom_qh"};
    for (int f = 0; f < 8; f++) cr_expect_str_eq(method_scan_family_name(f), order[f]);
    /* a method's other forms: named in full, reached from the method's family */
    int fathom = cost_scan_family("fathom");
    cr_expect_str_eq(method_scan_family_name(cost_scan_family("fathom_v1")), "fathom_v1");
    cr_expect_eq(cost_scan_form(fathom, "v2"), cost_scan_family("fathom_v2"));
    cr_expect_eq(cost_scan_form(fathom, "qh"), cost_scan_family("fathom_qh"));
    cr_expect_eq(cost_scan_form(fathom, NULL), fathom);
    cr_expect_eq(cost_scan_form(fathom, "v3"), -1);
    cr_expect_eq(cost_scan_form(cost_scan_family("hashattn"), "qh"), -1);
    cr_expect_eq(cost_scan_form(cost_scan_family("fathom_v1"), "v2"), -1);   /* no form of a form */
}

/* H200 preset: 132 SMs, 16 blocks per SM over all heads, at least 64 rows per split. */
Test(cost, split_count_is_flash_decodings)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    cost_t c;
    err_t e;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    cr_expect_float_eq(cost_attn_splits(&c, 2048, 8), 32, 0);          /* 2048/64 */
    cr_expect_float_eq(cost_attn_splits(&c, 1048576, 8), 264, 0);      /* 16·132/8 */
    cr_expect_float_eq(cost_attn_splits(&c, 1024, 32), 16, 0);         /* min(66, 16) */
    cr_expect_float_eq(cost_attn_splits(&c, 65, 8), 2, 0);             /* ceil(65/64) */
    cr_expect_float_eq(cost_attn_splits(&c, 10, 8), 1, 0);
    th_machine_free(&t);
}

static bool depends_on(const plan_t *p, uint32_t op, int kind)
{
    for (uint32_t i = 0; i < p->ops[op].n_deps; i++)
        if (p->ops[p->deps[p->ops[op].dep_first + i]].kind == kind) return true;
    return false;
}

/* Fathom at 32K with a 1024-token window: per layer one combine after both partials, of 2048/64 = 32
 * partials over the winners and ceil(1025/64) = 17 over the window and the new token, reading them
 * from L2 (8 MiB of winners); dense at 32K streams 124 MiB per layer through the L2, so its combine of
 * 264 + 17 partials is cold. The O/MLP GEMM waits for the combine (Fathom's through the write-back of
 * its dirty L2 lines; dense leaves none). */
Test(cost, combine_merges_both_partials_after_them)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "attn_combine_latency_us", 4);
    set(t.cal, "attn_combine_split_ns", 360);
    set(t.cal, "attn_combine_l2_latency_us", 3);
    set(t.cal, "attn_combine_l2_split_ns", 200);
    static const struct { const char *yaml; double expect_ps; } cases[2] = {
        {"method: fathom\nbudget: 56\nk: 2048\nwindow: 1024\nselect: kv_head", (3 + 49 * 0.2) * 1e6},
        {"method: dense\nwindow: 1024", (4 + 281 * 0.36) * 1e6},
    };
    for (int c = 0; c < 2; c++) {
        plan_t plan;
        provider_t *p = build(&t, cases[c].yaml, 32768, &plan);
        int combines = 0;
        for (uint32_t i = 0; i < plan.n_ops; i++) {
            const plan_op_t *o = &plan.ops[i];
            if (o->kind == OPKIND_ATTN_COMBINE) {
                combines++;
                cr_expect(fabs((double)o->cost.latency_ps - cases[c].expect_ps) <= 1, "%s: %g ps, expected %g",
                          cases[c].yaml, (double)o->cost.latency_ps, cases[c].expect_ps);
                cr_expect(depends_on(&plan, i, OPKIND_ATTN_TAIL), "%s", cases[c].yaml);
                cr_expect(depends_on(&plan, i, c ? OPKIND_ATTN_DENSE : OPKIND_ATTN_SPARSE), "%s", cases[c].yaml);
            }
            /* Fathom's O/MLP waits on the write-back of the L2's dirty lines, which waits on the combine */
            if (o->kind == OPKIND_L2_WRITEBACK && depends_on(&plan, i, OPKIND_ATTN_COMBINE)) combines += 100;
            if (o->kind == OPKIND_GEMM && depends_on(&plan, i, OPKIND_ATTN_COMBINE)) combines += 100;
        }
        cr_expect_eq(combines, 36 * 101, "%s: %d", cases[c].yaml, combines);
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* Winners that fit in the L2 are read at attn_sparse_l2's rate, a row once per query head attending
 * it (qwen3-8b: 32 query heads over 8 KV heads), and leave HBM alone; past the L2 the cold attention
 * reads HBM. */
Test(cost, attention_over_winners_in_l2)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "attn_sparse_l2_latency_us", 9);
    set(t.cal, "attn_sparse_l2_mem_eff", 1.25);
    double hbm_Bps = get(t.cal, "hbm_GBps") * 1e9;
    sim_res_t hbm = sim_res_find(t.sim, "gpu0.hbm");
    for (int k = 0; k < 2; k++) {
        /* 2048 rows × 8 heads × 512 B = 8 MiB; 65536 rows: 256 MiB, past the 60 MiB L2 */
        plan_t plan;
        provider_t *p = build(&t, k ? "method: pertoken\nbudget: 136\nk: 65536\nselect: kv_head" : "method: pertoken\nbudget: 136\nk: 2048\nselect: kv_head",
                              1048576, &plan);
        for (uint32_t i = 0; i < plan.n_ops; i++) {
            const plan_op_t *o = &plan.ops[i];
            if (o->kind != OPKIND_ATTN_SPARSE) continue;
            bool on_hbm = false;
            for (uint32_t u = 0; u < o->n_uses; u++) on_hbm |= o->uses[u].res == hbm;
            cr_expect_eq(on_hbm, k == 1, "k case %d", k);
            if (k == 0) {
                sim_ps_t alone;
                err_t e;
                cr_assert_eq(plan_op_alone_ps(o, t.sim, &alone, &e), 0, "%s", e.msg);
                double expect = 9e-6 + 2048.0 * 32 * 512 / (1.25 * hbm_Bps);
                cr_expect(fabs((double)alone * 1e-12 - expect) < 1e-11, "%g vs %g", (double)alone * 1e-12, expect);
            }
        }
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* Per-query-head winners (HashAttention) are attended per query head: 32 heads of k = 2048 rows, one
 * query each, 32 MiB read (of 8 MiB of rows at union 1, 2048 per KV head; at union 4, 8192, 32 MiB), from
 * L2 at the per-query-head kernel's own pair (7 us + 32 MiB at 2.0·HBM), where Fathom's GQA attention
 * (8 heads of 2048 rows, each read by 4 query heads: the same 32 MiB of query bytes) takes the GQA
 * pair (9 us at 1.25·HBM); a plan that used one pair for both fails one of the three. Past the L2
 * (k = 65536 per query head at union 4: 1 GiB) the per-query-head attention reads HBM at its own cold
 * pair (5 us + 1 GiB at 0.5·HBM). Their 32 heads split into min(ceil(16·132/32), 2048/64) = 32
 * partials each, merged on their own (3 + 32·0.2 us, from L2); the window's ceil(1025/64) = 17
 * partials are merged after them (3 + 17·0.2 us). */
Test(cost, per_query_head_attention_and_its_two_combines)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "attn_sparse_l2_latency_us", 9);
    set(t.cal, "attn_sparse_l2_mem_eff", 1.25);
    set(t.cal, "attn_sparse_qh_l2_latency_us", 7);
    set(t.cal, "attn_sparse_qh_l2_mem_eff", 2.0);
    set(t.cal, "attn_sparse_qh_latency_us", 5);
    set(t.cal, "attn_sparse_qh_mem_eff", 0.5);
    set(t.cal, "attn_combine_l2_latency_us", 3);
    set(t.cal, "attn_combine_l2_split_ns", 200);
    double hbm_Bps = get(t.cal, "hbm_GBps") * 1e9;
    static const struct { const char *yaml; double lat_s, eff, bytes; } cases[4] = {
        {"method: hashattn\nk: 2048\nunion: 1\nwindow: 1024\nselect: query_head", 7e-6, 2.0, 2048.0 * 32 * 512},
        {"method: hashattn\nk: 2048\nunion: 4\nwindow: 1024\nselect: query_head", 7e-6, 2.0, 2048.0 * 32 * 512},
        {"method: fathom\nbudget: 56\nk: 2048\nwindow: 1024\nselect: kv_head", 9e-6, 1.25, 2048.0 * 32 * 512},
        {"method: hashattn\nk: 65536\nunion: 4\nwindow: 1024\nselect: query_head", 5e-6, 0.5, 65536.0 * 32 * 512}};
    for (int c = 0; c < 4; c++) {
        plan_t plan;
        provider_t *p = build(&t, cases[c].yaml, c == 3 ? 1048576 : 131072, &plan);
        double combine_ps[2] = {0, 0};
        int combines = 0, attns = 0;
        for (uint32_t i = 0; i < plan.n_ops && plan.ops[i].layer == 0; i++) {
            const plan_op_t *o = &plan.ops[i];
            if (o->kind == OPKIND_ATTN_SPARSE) {
                sim_ps_t alone;
                err_t e;
                cr_assert_eq(plan_op_alone_ps(o, t.sim, &alone, &e), 0, "%s", e.msg);
                double expect = cases[c].lat_s + cases[c].bytes / (cases[c].eff * hbm_Bps);
                cr_expect(fabs((double)alone * 1e-12 - expect) < 1e-11, "%s: %g vs %g", cases[c].yaml,
                          (double)alone * 1e-12, expect);
                attns++;
            }
            if (o->kind == OPKIND_ATTN_COMBINE && combines < 2) combine_ps[combines++] = (double)o->cost.latency_ps;
        }
        cr_expect_eq(attns, 1, "%s", cases[c].yaml);
        if (c < 2) {
            cr_expect_eq(combines, 2, "%s", cases[c].yaml);
            cr_expect(fabs(combine_ps[0] - (3 + 32 * 0.2) * 1e6) <= 1, "%s: %g", cases[c].yaml, combine_ps[0]);
            cr_expect(fabs(combine_ps[1] - (3 + 17 * 0.2) * 1e6) <= 1, "%s: %g", cases[c].yaml, combine_ps[1]);
        } else if (c == 2) {
            cr_expect_eq(combines, 1);
            cr_expect(fabs(combine_ps[0] - (3 + 49 * 0.2) * 1e6) <= 1, "%g", combine_ps[0]);
        }
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* A decode's scan, attention over its winners and top-k run with the layer's GEMMs queued behind
 * them: after_layer_scan_us (1.5), after_layer_attn_us (0.7) and after_layer_topk_us (2.0) on their
 * fixed times; the top-k's
 * scores (8 rows of 128K: 4 MiB) were just written by the scan and fit in the L2, so it also saves
 * topk_scores_l2_us (5.0): 3 us less in all. A plan of kernels timed alone, after an L2 flush as the
 * kernels suite times them, has none of it. */
Test(cost, a_decodes_kernels_as_they_run_in_it)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "after_layer_scan_us", 1.5);
    set(t.cal, "after_layer_attn_us", 0.7);
    set(t.cal, "after_layer_topk_us", 2.0);
    set(t.cal, "topk_scores_l2_us", 5.0);
    double lat[2][3] = {{0}};   /* [alone][scan, attention, top-k] of layer 0 */
    for (int alone = 0; alone < 2; alone++) {
        provider_t *p = th_provider(&t, "method: pertoken\nbudget: 136\nk: 2048\nselect: kv_head");
        plan_t plan;
        plan_init(&plan);
        plan_request_t req = {PLAN_DECODE, 131072, 1, 0};
        build_as(&t, p, (protocol_t){.kernels_alone = alone}, &req, &plan);
        for (uint32_t i = 0; i < plan.n_ops && plan.ops[i].layer == 0; i++) {
            int k = plan.ops[i].kind == OPKIND_SCAN ? 0 : plan.ops[i].kind == OPKIND_ATTN_SPARSE ? 1
                  : plan.ops[i].kind == OPKIND_TOPK ? 2 : -1;
            plan_cost_t pc;   /* no cost_fn on these: their models are the plan's own */
            if (k >= 0 && !plan_op_cost(&plan.ops[i], 1, &pc)) lat[alone][k] = (double)pc.latency_ps;
        }
        plan_free(&plan);
        provider_free(p);
    }
    cr_expect(lat[1][0] > 0 && lat[1][1] > 0 && lat[1][2] > 0, "%g %g %g", lat[1][0], lat[1][1], lat[1][2]);
    cr_expect(fabs(lat[0][0] - lat[1][0] - 1.5e6) <= 1, "scan: %g", lat[0][0] - lat[1][0]);
    cr_expect(fabs(lat[0][1] - lat[1][1] - 0.7e6) <= 1, "attention: %g", lat[0][1] - lat[1][1]);
    cr_expect(fabs(lat[0][2] - lat[1][2] + 3e6) <= 1, "top-k: %g", lat[0][2] - lat[1][2]);
    th_machine_free(&t);
}

/* Rows a page or more apart cost ce2d_page_row_ns each, rows of a dense 2D copy ce2d_row_ns. */
Test(cost, strided_2d_rows_cost_their_own)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "ce2d_row_ns", 0.5);
    set(t.cal, "ce2d_page_row_ns", 9);
    cost_t c;
    cost_paths_t paths;
    err_t e;
    cost_ready(&t, &c, &paths);
    double bytes = 16.0 * 1048576, rows = 65536, lat = get(t.cal, "ce_latency_us") * 1e-6, link = get(t.cal, "h2d_GBps") * 1e9;
    static const struct { cost_xfer_t form; double row_s; } cases[2] = {{COST_CE, 0.5e-9}, {COST_CE_STRIDED, 9e-9}};
    for (int i = 0; i < 2; i++) {
        plan_op_t op;
        sim_ps_t alone;
        memset(&op, 0, sizeof op);
        cost_transfer(&c, &paths, cases[i].form, true, bytes, rows, 0, COST_GATHER_ALONE, &op);
        cr_assert_eq(plan_op_alone_ps(&op, t.sim, &alone, &e), 0, "%s", e.msg);
        double expect = lat + rows * cases[i].row_s + bytes / link;
        cr_expect(fabs((double)alone * 1e-12 - expect) < 1e-9, "form %d: %g vs %g", i, (double)alone * 1e-12, expect);
    }
    th_machine_free(&t);
}

/* Fathom's chunked index over the copy engine at 64K: one 2D copy per KV head and active channel, chained (one
 * setup, then ce2d_copy per further copy: not the 1D chain's gap), a row per chunk. */
Test(cost, channel_copies_chain_their_setups)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "ce_b2b_gap_us", 5);
    set(t.cal, "ce2d_copy_us", 3);
    set(t.cal, "ce2d_page_row_ns", 9);
    plan_t plan;
    provider_t *p = build(&t, "method: fathom\nbudget: 56\nplacement: host\nindex_fetch: ce\nindex_layout: chunked\nchunk: 1024\nselect: kv_head", 65536, &plan);
    double copies = method_fathom(provider_method(p))->mean_active * 8;
    int fetches = 0;
    for (uint32_t i = 0; i < plan.n_ops; i++) {
        const plan_op_t *o = &plan.ops[i];
        if (o->kind != OPKIND_INDEX_FETCH) continue;
        fetches++;
        double lat = get(t.cal, "ce_latency_us") * 1e-6 + (copies - 1) * 3e-6;
        cr_expect(fabs((double)o->cost.latency_ps * 1e-12 - lat) < 1e-11, "%g vs %g", (double)o->cost.latency_ps * 1e-12, lat);
        cr_expect(o->host_sync);
        sim_ps_t alone;
        err_t e;
        cr_assert_eq(plan_op_alone_ps(o, t.sim, &alone, &e), 0, "%s", e.msg);
        double expect = lat + copies * 64 * 9e-9 + o->bytes_host / (get(t.cal, "h2d_GBps") * 1e9);
        cr_expect(fabs((double)alone * 1e-12 - expect) < 1e-9, "%g vs %g", (double)alone * 1e-12, expect);
    }
    cr_expect_eq(fetches, 36);
    plan_free(&plan);
    provider_free(p);
    th_machine_free(&t);
}

/* A method's scan takes its family's fixed time, not the scan kind's; Fathom's other kernels and its
 * per-query-head scan theirs, over a just-fetched index too (they have no L2 parameters of their own).
 * Fathom's own scan with its index in HBM (over one just fetched it takes the L2 pair: below). */
Test(cost, scan_takes_its_familys_parameters)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "scan_latency_us", 1);
    set(t.cal, "scan_landmark_latency_us", 7);
    set(t.cal, "scan_hashattn_latency_us", 5);
    set(t.cal, "scan_fathom_latency_us", 6);
    set(t.cal, "scan_fathom_v1_latency_us", 11);
    set(t.cal, "scan_fathom_qh_latency_us", 13);
    static const struct { const char *yaml; double lat_us; } cases[5] = {
        {"method: landmark\npage: 16\nselect: kv_head", 7}, {"method: hashattn", 5}, {"method: fathom\nplacement: hbm\nselect: kv_head", 6},
        {"method: fathom\nplane_scan: token_per_thread\nselect: kv_head", 11}, {"method: fathom\nselect: query_head", 13}};
    for (int c = 0; c < 5; c++) {
        plan_t plan;
        provider_t *p = build(&t, cases[c].yaml, 65536, &plan);
        int scans = 0;
        for (uint32_t i = 0; i < plan.n_ops; i++)
            if (plan.ops[i].kind == OPKIND_SCAN) {
                scans++;
                cr_expect_eq(plan.ops[i].cost.latency_ps, (sim_ps_t)(cases[c].lat_us * 1e6), "%s", cases[c].yaml);
            }
        cr_expect_eq(scans, 36);
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* A scan over fewer bytes than its family's fill takes as long as one over the fill, its HBM bytes
 * its own: Fathom's with lat 6 us, eff 0.25 and a fill of 4 MB at the H200's 4800 GB/s takes
 * 6 + 4e6/1.2e12 s = 9.33 us over 1 MB, and 6 + 8e6/1.2e12 s = 12.67 us over 8 MB (past the fill);
 * with no fill the 1 MB one takes 6.83 us. */
Test(cost, scan_short_of_its_fill_takes_the_fills_time)
{
    for (int with = 0; with < 2; with++) {
        tmachine_t t;
        th_machine(&t, "h200-1", NULL, "qwen3-8b");
        set(t.cal, "hbm_GBps", 4800);
        set(t.cal, "scan_fathom_latency_us", 6);
        set(t.cal, "scan_fathom_mem_eff", 0.25);
        set(t.cal, "scan_fathom_fill_bytes", with ? 4e6 : 0);
        cost_t c;
        cost_paths_t paths;
        cost_ready(&t, &c, &paths);
        for (int big = 0; big < 2; big++) {
            plan_op_t op = {0};
            cost_scan(&c, &paths, cost_scan_family("fathom"), false, big ? 8e6 : 1e6, 0, 56, LLM_BF16, &op);
            sim_ps_t alone;
            err_t e;
            cr_assert_eq(plan_op_alone_ps(&op, t.sim, &alone, &e), 0, "%s", e.msg);
            double want = 6e-6 + (big ? 8e6 : with ? 4e6 : 1e6) / 1.2e12;
            cr_expect(fabs((double)alone * 1e-12 - want) < 1e-11, "fill %d, big %d: %g vs %g", with, big,
                      (double)alone * 1e-12, want);
            cr_expect_float_eq(op.cost.work, big ? 8e6 : 1e6, 1e-9, "its bytes are its own");
        }
        th_machine_free(&t);
    }
}

/* A per-token scan's fixed time grows with its bits: lat 4 us, 5 ns a bit, eff 0.5 at 4800 GB/s,
 * 1 MB: 4 + 136·0.005 + 1e6/2.4e12 s = 4.68 + 0.4167 us at 136 bits, 4.34 + 0.4167 at 68; over an
 * index in the L2 (lat 3.5, eff 0.6: 1e6/2.88e12 s) the same 0.68 us on top; Fathom's family has no
 * such term, whatever bits it is given. */
Test(cost, pertoken_scan_pays_its_bits)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "hbm_GBps", 4800);
    set(t.cal, "scan_pertoken_latency_us", 4);
    set(t.cal, "scan_pertoken_mem_eff", 0.5);
    set(t.cal, "scan_pertoken_fill_bytes", 0);
    set(t.cal, "scan_pertoken_bit_ns", 5);
    err_t e;
    calib_param_t l2lat = {"scan_pertoken_l2_latency_us", 3.5, 0, 1, 0, "us", "fitted: test"};
    calib_param_t l2eff = {"scan_pertoken_l2_mem_eff", 0.6, 0, 1, 0, "", "fitted: test"};
    cr_assert_eq(calib_set(t.cal, &l2lat, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_set(t.cal, &l2eff, &e), 0, "%s", e.msg);
    set(t.cal, "scan_fathom_latency_us", 6);
    set(t.cal, "scan_fathom_mem_eff", 0.25);
    set(t.cal, "scan_fathom_fill_bytes", 0);
    cost_t c;
    cost_paths_t paths;
    cost_ready(&t, &c, &paths);
    static const struct { const char *fam; bool l2; double bits, want_us; } cases[] = {
        {"pertoken", false, 136, 4.68 + 1e6 / 2.4e6}, {"pertoken", false, 68, 4.34 + 1e6 / 2.4e6},
        {"pertoken", true, 136, 4.18 + 1e6 / 2.88e6}, {"fathom", false, 136, 6 + 1e6 / 1.2e6}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        plan_op_t op = {0};
        cost_scan(&c, &paths, cost_scan_family(cases[i].fam), cases[i].l2, 1e6, 0, cases[i].bits, LLM_BF16, &op);
        sim_ps_t alone;
        cr_assert_eq(plan_op_alone_ps(&op, t.sim, &alone, &e), 0, "%s", e.msg);
        cr_expect(fabs((double)alone * 1e-6 - cases[i].want_us) < 1e-5, "case %zu: %g vs %g us", i,
                  (double)alone * 1e-6, cases[i].want_us);
    }
    th_machine_free(&t);
}

/* Warps holding a winner, against counting: one winner among 64 scores sits in one of the 2 warps;
 * 64 of 64 fill both; 2 of 64 fall in the same warp with probability 31/63, so 2 − 31/63 warps. */
Test(cost, topk_winner_warps_small_cases)
{
    cr_expect_float_eq(cost_topk_winner_warps(64, 1), 1, 1e-12);
    cr_expect_float_eq(cost_topk_winner_warps(64, 64), 2, 1e-12);
    cr_expect_float_eq(cost_topk_winner_warps(64, 100), 2, 1e-12);
    cr_expect_float_eq(cost_topk_winner_warps(64, 2), 2 - 31.0 / 63, 1e-12);
    cr_expect_float_eq(cost_topk_winner_warps(0, 5), 0, 0);
}

/* An op's latency_extra_ps adds to its cost's fixed time, cost_fn's included, and never takes it
 * below 0: 5 us + 2 is 7, 1 us - 2 is 0. */
Test(cost, an_ops_extra_latency_adds_to_its_cost)
{
    static const struct { double lat_us, extra_us, want_us; } cases[3] = {{5, 2, 7}, {1, -2, 0}, {5, 0, 5}};
    for (int i = 0; i < 3; i++) {
        plan_op_t op = {.kind = OPKIND_SCAN, .cost = {.latency_ps = cost_ps(cases[i].lat_us * 1e-6)},
                        .latency_extra_ps = (sim_ps_t)(cases[i].extra_us * 1e6)};
        plan_cost_t pc;
        cr_assert_eq(plan_op_cost(&op, 1, &pc), 0);
        cr_expect_float_eq((double)pc.latency_ps * 1e-6, cases[i].want_us, 1e-9, "case %d: %g us", i,
                           (double)pc.latency_ps * 1e-6);
    }
}

/* Radix top-k on 132 SMs: a block per 4096 scores of a row, at most 4·132 = 528 over all rows. It
 * takes topk_latency_us, each score of a block topk_elem_ns and each row topk_row_us (the _l2 ones
 * when the rows' scores fit in the 60 MiB L2), each warp holding a winner topk_winner_ns and each of
 * one row's topk_winner_row_ns (a row's winners queue on its counter, the rows side by side): 8 rows
 * of 4M scores (128 MiB) take 66 blocks each, ceil(4194304/66) = 63551 scores per block; 8 rows of
 * 1M (32 MiB, in L2) 15888; 8 rows of 32K (in L2) 8 blocks of 4096, whose walk (18.4 us) outlasts
 * the scores' HBM passes. */
Test(cost, topk_blocks_and_time)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "topk_latency_us", 50);
    set(t.cal, "topk_latency_l2_us", 30);
    set(t.cal, "topk_elem_ns", 7.5);
    set(t.cal, "topk_elem_l2_ns", 4.5);
    set(t.cal, "topk_row_us", 0.4);
    set(t.cal, "topk_row_l2_us", 0.1);
    set(t.cal, "topk_winner_ns", 2);
    set(t.cal, "topk_winner_row_ns", 5);
    cost_t c;
    cost_paths_t paths;
    err_t e;
    cost_ready(&t, &c, &paths);
    cr_expect_float_eq(cost_topk_blocks_per_row(&c, 8, 32768), 8, 0);
    cr_expect_float_eq(cost_topk_blocks_per_row(&c, 8, 4194304), 66, 0);
    cr_expect_float_eq(cost_topk_blocks_per_row(&c, 128, 262144), 4, 0);
    cr_expect_float_eq(cost_topk_blocks_per_row(&c, 1000, 1 << 20), 1, 0);
    double w4m = cost_topk_winner_warps(4194304, 2048), w1m = cost_topk_winner_warps(1048576, 2048);
    static const struct { double rows, n, k; } cases[3] = {{8, 32768, 1}, {8, 4194304, 2048}, {8, 1048576, 2048}};
    double expect_s[3] = {
        30e-6 + 4096 * 4.5e-9 + 8 * 0.1e-6 + 8 * 2e-9 + 5e-9,
        50e-6 + 63551 * 7.5e-9 + 8 * 0.4e-6 + w4m * (8 * 2e-9 + 5e-9),
        30e-6 + 15888 * 4.5e-9 + 8 * 0.1e-6 + w1m * (8 * 2e-9 + 5e-9),
    };
    for (int i = 0; i < 3; i++) {
        plan_op_t op;
        memset(&op, 0, sizeof op);
        cost_topk(&c, &paths, cases[i].rows, cases[i].n, cases[i].k, &op);
        sim_ps_t alone;
        cr_assert_eq(plan_op_alone_ps(&op, t.sim, &alone, &e), 0, "%s", e.msg);
        cr_expect(fabs((double)alone * 1e-12 - expect_s[i]) < 1e-9, "case %d: %g vs %g", i, (double)alone * 1e-12,
                  expect_s[i]);
    }
    th_machine_free(&t);
}

/* Each layer's QKV GEMM is one kernel; its O projection and MLP (up, down) op is three, each with its
 * fixed time. */
Test(cost, gemm_ops_pay_a_fixed_time_per_kernel)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "gemm_latency_us", 7);
    plan_t plan;
    provider_t *p = build(&t, "method: dense", 32768, &plan);
    int seen[2] = {0, 0};
    for (uint32_t i = 0; i < plan.n_ops; i++) {
        const plan_op_t *o = &plan.ops[i];
        if (o->kind != OPKIND_GEMM) continue;
        bool omlp = depends_on(&plan, i, OPKIND_ATTN_COMBINE);
        seen[omlp]++;
        cr_expect_eq(o->cost.latency_ps, (sim_ps_t)((omlp ? 3 : 1) * 7e6), "op %u", i);
    }
    cr_expect_eq(seen[0], 36);
    cr_expect_eq(seen[1], 36);
    plan_free(&plan);
    provider_free(p);
    th_machine_free(&t);
}

/* The L2's dirty lines (cost_l2_pass), H200: L = 60 MiB of traffic kept, at most C = 0.5·60 = 30 MiB
 * dirty. Written 8 MiB: 8 dirty. Then 15 MiB read: 8·(1 − 15/60) = 6. Then 60 more read: none. 40
 * written at once: min(40, 30) = 30. 30 written while 90 read (T = 120): 30·60/120 = 15. 20 written
 * after 10 dirty with nothing read: 10·(1 − 20/60) + 20 = 26.67. */
Test(cost, dirty_l2_lines_kept_and_evicted)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "l2_dirty_frac", 0.5);
    cost_t c;
    err_t e;
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    const double M = 1048576;
    cr_assert_float_eq(c.l2_bytes, 60 * M, 1);
    cost_l2_t l2 = {0};
    cost_l2_pass(&c, &l2, 0, 8 * M);
    cr_expect_float_eq(l2.dirty_bytes, 8 * M, 1);
    cost_l2_pass(&c, &l2, 15 * M, 0);
    cr_expect_float_eq(l2.dirty_bytes, 6 * M, 1);
    cost_l2_pass(&c, &l2, 60 * M, 0);
    cr_expect_float_eq(l2.dirty_bytes, 0, 1);
    cost_l2_pass(&c, &l2, 0, 40 * M);
    cr_expect_float_eq(l2.dirty_bytes, 30 * M, 1);
    l2.dirty_bytes = 0;
    cost_l2_pass(&c, &l2, 90 * M, 30 * M);
    cr_expect_float_eq(l2.dirty_bytes, 15 * M, 1);
    l2.dirty_bytes = 10 * M;
    cost_l2_pass(&c, &l2, 0, 20 * M);
    cr_expect_float_eq(l2.dirty_bytes, (10 * (1 - 20.0 / 60) + 20) * M, 1);
    set(t.cal, "l2_dirty_frac", 0);   /* none kept dirty: nothing to write back */
    cr_assert_eq(cost_init(&c, t.cal, &e), 0, "%s", e.msg);
    l2.dirty_bytes = 0;
    cost_l2_pass(&c, &l2, 0, 8 * M);
    cr_expect_float_eq(l2.dirty_bytes, 0, 0);
    th_machine_free(&t);
}

/* Per layer the write-back of what the attention left dirty, before the O/MLP GEMM, over HBM at
 * l2_writeback_eff·hbm with no latency or launch. Pertoken (136 bits, index in HBM) at 32K, k = 2048,
 * no window, C = 30 MiB: the scan reads 8·32768·17 B = 4.25 MiB and writes 8·32768·4 B = 1 MiB of
 * scores (T < L: 1 MiB dirty); top-k reads them from the L2; the winner fetch writes 2048·8·512 B =
 * 8 MiB: 1·(1 − 8/60) + 8 = 8.867 MiB, read back from the L2 by the attention. Dense over host K/V
 * at 32K streams 128 MiB through the L2: none dirty, no write-back. */
Test(cost, layer_writes_back_its_dirty_l2_lines)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "l2_dirty_frac", 0.5);
    set(t.cal, "l2_writeback_eff", 0.75);
    double hbm_Bps = get(t.cal, "hbm_GBps") * 1e9, M = 1048576;
    for (int dense = 0; dense < 2; dense++) {
        plan_t plan;
        provider_t *p = build(&t, dense ? "method: dense" : "method: pertoken\nbudget: 136\nk: 2048\nplacement: hbm\nselect: kv_head", 32768, &plan);
        int seen = 0;
        for (uint32_t i = 0; i < plan.n_ops; i++) {
            const plan_op_t *o = &plan.ops[i];
            if (o->kind == OPKIND_GEMM && depends_on(&plan, i, OPKIND_L2_WRITEBACK)) seen += 100;
            if (o->kind != OPKIND_L2_WRITEBACK) continue;
            seen++;
            double expect = (1 * (1 - 8.0 / 60) + 8) * M;
            cr_expect(fabs(o->cost.work - expect) < 1, "%g B, expected %g", o->cost.work, expect);
            sim_ps_t alone;
            err_t e;
            cr_assert_eq(plan_op_alone_ps(o, t.sim, &alone, &e), 0, "%s", e.msg);
            cr_expect(fabs((double)alone * 1e-12 - expect / (0.75 * hbm_Bps)) < 1e-11, "%g s", (double)alone * 1e-12);
            cr_expect_eq(o->launch_ps, 0);
            cr_expect(depends_on(&plan, i, OPKIND_ATTN_COMBINE));
        }
        cr_expect_eq(seen, dense ? 0 : 36 * 101, "%s: %d", dense ? "dense" : "pertoken", seen);
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}

/* A scan over the index its layer has just fetched, whole in the L2 with its scores, goes at its
 * family's L2 fixed time (scan_<family>_l2_latency_us, here fitted for Fathom); one over an index
 * kept in HBM, one past the L2 (Fathom at 1M: 59 MB of index and 32 MB of scores against 60 MiB)
 * and one prefetched a layer ahead (per-token with prefetch 1, the default: the layer's GEMMs came
 * between) at the HBM one. An L2 pair the profile holds only as assumed (per-token's here, as a
 * profile from runs without such rows) gives way to the family's HBM pair. */
Test(cost, scan_over_a_just_fetched_index_reads_the_l2)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    set(t.cal, "scan_fathom_latency_us", 7);
    err_t e;
    calib_param_t fitted = {"scan_fathom_l2_latency_us", 5, 0, 1, 0, "us", "fitted: test"};
    cr_assert_eq(calib_set(t.cal, &fitted, &e), 0, "%s", e.msg);
    set(t.cal, "scan_pertoken_latency_us", 4);
    set(t.cal, "scan_pertoken_l2_latency_us", 3);
    static const struct {
        const char *yaml;
        uint64_t ctx;
        double lat_us;
    } cases[] = {{"method: fathom\nplacement: host\nselect: kv_head", 32768, 5},
                 {"method: fathom\nplacement: host\nindex_fetch: ce\nselect: kv_head", 32768, 5},
                 {"method: fathom\nplacement: hbm\nselect: kv_head", 32768, 7},
                 {"method: fathom\nplacement: host\nselect: kv_head", 1048576, 7},
                 {"method: pertoken\nplacement: host\nselect: kv_head", 32768, 4},
                 {"method: pertoken\nplacement: host\nprefetch: 0\nselect: kv_head", 32768, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plan_t plan;
        provider_t *p = build(&t, cases[i].yaml, cases[i].ctx, &plan);
        int scans = 0;
        for (uint32_t k = 0; k < plan.n_ops; k++)
            if (plan.ops[k].kind == OPKIND_SCAN) {
                scans++;
                cr_expect_eq(plan.ops[k].cost.latency_ps, cases[i].lat_us * SIM_PS_PER_US, "%s at %llu: %g us", cases[i].yaml,
                             (unsigned long long)cases[i].ctx, (double)plan.ops[k].cost.latency_ps / SIM_PS_PER_US);
            }
        cr_expect_eq(scans, 36, "%s", cases[i].yaml);
        plan_free(&plan);
        provider_free(p);
    }
    th_machine_free(&t);
}
