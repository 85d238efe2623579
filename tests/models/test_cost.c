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

static void set(calib_t *cal, const char *name, double v)
{
    err_t e;
    calib_param_t p = {name, v, 0, 1, 0, "", "assumed: test"};
    cr_assert_eq(calib_set(cal, &p, &e), 0, "%s", e.msg);
}

static double get(calib_t *cal, const char *name)
{
    double v;
    err_t e;
    cr_assert_eq(calib_get(cal, name, &v, &e), 0, "%s", e.msg);
    return v;
}

/* c and paths from t's profile, for GPU 0 reading host DRAM. */
static void cost_ready(tmachine_t *t, cost_t *c, cost_paths_t *paths)
{
    err_t e;
    cr_assert_eq(cost_init(c, t->cal, &e), 0, "%s", e.msg);
    cr_assert_eq(cost_paths_resolve(c, &t->hw, t->sim, 0, HWINST_DRAM, paths, &e), 0, "%s", e.msg);
}

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

/* The plan of req for the method of p's as kbench times it (validation/protocol.h): the layers alone,
 * its kernels and gathers as `how` says. Its GEMMs' cost models die with the wrapper: read op.cost. */
static void build_as(tmachine_t *t, provider_t *p, protocol_t how, const plan_request_t *req, plan_t *plan)
{
    err_t e;
    protocol_prov_t *pp;
    how.layers_only = true;
    cr_assert_eq(protocol_new(provider_method(p), &t->hw, t->cal, &how, &pp, &e), 0, "%s", e.msg);
    cr_assert_eq(protocol_build(pp, t->sim, 0, req, plan, &e), 0, "%s", e.msg);
    protocol_free(pp);
}

/* One layer of a plan of `yaml` at ctx tokens; returns the provider (caller frees plan and provider). */
static provider_t *build(tmachine_t *t, const char *yaml, uint64_t ctx, plan_t *plan)
{
    err_t e;
    provider_t *p = th_provider(t, yaml);
    plan_init(plan);
    plan_request_t req = {PLAN_DECODE, ctx, 1, 0};
    build_as(t, p, (protocol_t){0}, &req, plan);
    cr_assert_eq(plan_validate(plan, &e), 0, "%s", e.msg);
    return p;
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
