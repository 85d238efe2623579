/* Byte counts of every method's plans against DESIGN.md's closed forms (no dense window). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "kernels/ref/kref.h"
#include "models/method.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "sim/plan.h"

typedef struct sums {
    double index, winner, kv, flush, hbm_attn, hbm_tail;
    double index_pieces, winner_pieces;
    int n_kind[OPKIND_COUNT];
} sums_t;

/* Builds one plan of `method` with settings `yaml` for ctx tokens on qwen3-8b / h200-1. */
static void plan_sums(const char *model, const char *yaml, uint64_t ctx, uint32_t new_tokens, plan_phase_t ph,
                      sums_t *s, double *budget)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, model);
    err_t e;
    plan_t plan;
    provider_t *p = th_plan(&t, yaml, ph, ctx, new_tokens, &plan);
    memset(s, 0, sizeof *s);
    for (uint32_t i = 0; i < plan.n_ops; i++) {
        const plan_op_t *o = &plan.ops[i];
        s->n_kind[o->kind]++;
        if (o->kind == OPKIND_INDEX_FETCH) { s->index += o->bytes_host; s->index_pieces += o->pieces; }
        if (o->kind == OPKIND_WINNER_FETCH) { s->winner += o->bytes_host; s->winner_pieces += o->pieces; }
        if (o->kind == OPKIND_H2D_COPY) s->kv += o->bytes_host;
        if (o->kind == OPKIND_FLUSH) s->flush += o->bytes_host;
        if (o->kind == OPKIND_ATTN_SPARSE || o->kind == OPKIND_ATTN_DENSE) s->hbm_attn += o->bytes_hbm;
        if (o->kind == OPKIND_ATTN_TAIL) s->hbm_tail += o->bytes_hbm;
    }
    sim_ps_t t_ps;
    cr_assert_eq(plan_standalone_ps(&plan, t.sim, 0, &t_ps, &e), 0, "%s", e.msg);
    cr_expect(t_ps > 0);
    if (budget) *budget = method_budget_bits(provider_method(p));
    plan_free(&plan);
    provider_free(p);
    th_machine_free(&t);
}

#define L 36.0
#define H 8.0
#define D 128.0

Test(bytes, dense_qwen3_8b_32k_reads_4_83_GB)
{
    sums_t s;
    plan_sums("qwen3-8b", "method: dense", 32768, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.kv, L * H * 2 * D * 2 * 32768, 1e-3);
    cr_expect(fabs(s.kv / 1e9 - 4.83) < 0.005, "%g GB", s.kv / 1e9);
    cr_expect_eq(s.index + s.winner + s.flush, 0);
    cr_expect_eq(s.n_kind[OPKIND_ATTN_DENSE], 36);
    cr_expect_eq(s.n_kind[OPKIND_LM_HEAD], 1);
    cr_expect_eq(s.n_kind[OPKIND_SAMPLE], 1);
    cr_expect_eq(s.n_kind[OPKIND_GEMM], 72);
}

Test(bytes, pertoken_136_scan_160_MB_and_5_13_GB_at_1M)
{
    sums_t s;
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 136\nk: 2048\nselect: kv_head", 32768, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 136.0 / 8 * 32768 * H * L, 1e-3);
    cr_expect(fabs(s.index / 1e6 - 160.4) < 0.1, "%g MB", s.index / 1e6);
    cr_expect_float_eq(s.winner, 2048 * 2 * D * 2 * H * L, 1e-3);
    cr_expect_float_eq(s.index_pieces, H * L, 1e-9, "one run per KV head");
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 136\nselect: kv_head", 1048576, 1, PLAN_DECODE, &s, NULL);
    cr_expect(fabs(s.index / 1e9 - 5.13) < 0.005, "%g GB", s.index / 1e9);
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 56\nselect: kv_head", 1048576, 1, PLAN_DECODE, &s, NULL);
    cr_expect(fabs(s.index / 1e9 - 2.11) < 0.005, "%g GB", s.index / 1e9);
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 68\nselect: kv_head", 1048576, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 68.0 / 8 * 1048576 * H * L, 1e-6);
}

Test(bytes, sparq_4bit_and_bf16)
{
    sums_t s;
    double n = 65536;
    plan_sums("qwen3-8b", "method: sparq\nbudget: 68\nchunk: 1024\nindex_layout: chunked\nselect: kv_head", (uint64_t)n, 1, PLAN_DECODE, &s, NULL);
    /* r = 16 runs of n/2 bytes + scales n/32 per KV head */
    cr_expect_float_eq(s.index, 16 * (n / 2 + n / 32) * H * L, 1e-6);
    cr_expect_float_eq(s.index_pieces, 16 * (n / 1024) * H * L, 1e-9);
    plan_sums("qwen3-8b", "method: sparq\nbudget: 136\nselect: kv_head", (uint64_t)n, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 136.0 / 8 * n * H * L, 1e-6);
    plan_sums("qwen3-8b", "method: sparq\nstore: bf16\nbudget: 256\nselect: kv_head", (uint64_t)n, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 16 * 2 * n * H * L, 1e-6, "16 runs of 2n bytes");
}

Test(bytes, fathom_56_reads_2_09_GB_at_1M)
{
    sums_t s;
    double budget = 0, n = 1048576;
    plan_sums("qwen3-8b", "method: fathom\nbudget: 56\nselect: kv_head", (uint64_t)n, 1, PLAN_DECODE, &s, &budget);
    cr_expect(budget <= 56 && budget > 54, "mean reads %g bits", budget);
    cr_expect_float_eq(s.index, budget / 8 * n * H * L, 1e-6);
    /* 47 plane bits and the scales of ~33 channels (plans shared by 4 query heads): 55.3 bits */
    cr_expect(fabs(s.index / 1e9 - 2.09) < 0.01, "%g GB", s.index / 1e9);
    cr_expect_eq(s.n_kind[OPKIND_WF_PLAN], 36);
    /* kbench's plans: 48 plane bits over its synthetic keys touch ~35.05 channels (281 of 8 heads
     * measured), whose scales bring 35.05/4 bits: 56.76 read */
    char yaml[8192];
    int at = snprintf(yaml, sizeof yaml, "method: fathom\nplane_bits: 48\nkey_variances: [");
    for (int j = 0; j < KREF_D; j++)
        at += snprintf(yaml + at, sizeof yaml - (size_t)at, "%s%.9g", j ? ", " : "", (double)kref_key_sigma(j) * kref_key_sigma(j));
    snprintf(yaml + at, sizeof yaml - (size_t)at, "]");
    plan_sums("qwen3-8b", yaml, (uint64_t)n, 1, PLAN_DECODE, &s, &budget);
    cr_expect(fabs(budget - 56.76) < 0.15, "mean reads %g bits", budget);
    cr_expect_float_eq(s.index, budget / 8 * n * H * L, 1e-6);
}

Test(bytes, hashattn_and_landmark)
{
    sums_t s;
    double n = 65536, G = 4;
    plan_sums("qwen3-8b", "method: hashattn\nk: 1024\nunion: 2", (uint64_t)n, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 4 * n * G * H * L, 1e-6, "4n bytes per query head");
    cr_expect_float_eq(s.winner, 2 * 1024 * 2 * D * 2 * H * L, 1e-6, "u k rows");
    cr_expect_float_eq(s.index_pieces, G * H * L, 1e-9);
    plan_sums("qwen3-8b", "method: landmark\npage: 16\nk: 1024\nselect: kv_head", (uint64_t)n, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, n / 16 * 2 * D * 2 * H * L, 1e-6);
    cr_expect_float_eq(s.winner, 1024 * 2 * D * 2 * H * L, 1e-6);
    cr_expect_float_eq(s.winner_pieces, 1024 / 16 * H * L, 1e-9, "k/P pages, one piece each");
    plan_sums("qwen3-8b", "method: landmark\npage: 8\nk: 1024\nlayout: split\nselect: kv_head", (uint64_t)n, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, n / 8 * 2 * D * 2 * H * L, 1e-6);
    cr_expect_float_eq(s.winner_pieces, 2 * 1024 / 8 * H * L, 1e-9);
}

Test(bytes, layouts_change_pieces_not_bytes)
{
    sums_t a, b, c;
    plan_sums("qwen3-8b", "method: pertoken\nlayout: split\nselect: kv_head", 65536, 1, PLAN_DECODE, &a, NULL);
    plan_sums("qwen3-8b", "method: pertoken\nlayout: interleaved\nselect: kv_head", 65536, 1, PLAN_DECODE, &b, NULL);
    plan_sums("qwen3-8b", "method: pertoken\nlayout: token", 65536, 1, PLAN_DECODE, &c, NULL);
    cr_expect_float_eq(a.winner, b.winner, 1e-9);
    cr_expect_float_eq(a.winner, c.winner, 1e-9);
    cr_expect_float_eq(a.winner_pieces, 2 * b.winner_pieces, 1e-9);
    cr_expect_float_eq(c.winner_pieces, b.winner_pieces / H, 1e-9);
}

Test(bytes, fp8_k_from_planes_and_placement)
{
    sums_t s, h, p;
    plan_sums("qwen3-8b", "method: pertoken\nkv_dtype: fp8\nk: 1000\nselect: kv_head", 65536, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.winner, 1000 * 2 * D * 1 * H * L, 1e-9);
    plan_sums("qwen3-8b", "method: pertoken\nk_from_planes: true\nk: 1000\nselect: kv_head", 65536, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.winner, 1000 * (D / 2 + D / 32 + 2 * D) * H * L, 1e-9);
    plan_sums("qwen3-8b", "method: pertoken\nplacement: hbm\nselect: kv_head", 65536, 1, PLAN_DECODE, &h, NULL);
    cr_expect_eq(h.index, 0);
    cr_expect_eq(h.n_kind[OPKIND_INDEX_FETCH], 0);
    plan_sums("qwen3-8b", "method: pertoken\nplacement: layers:6\nselect: kv_head", 65536, 1, PLAN_DECODE, &h, NULL);
    cr_expect_float_eq(h.index, 17.0 * 65536 * H * 30, 1e-9);
    plan_sums("qwen3-8b", "method: pertoken\nplacement: \"layers:0-3,10,35\"\nselect: kv_head", 65536, 1, PLAN_DECODE, &h, NULL);
    cr_expect_float_eq(h.index, 17.0 * 65536 * H * 30, 1e-9);
    plan_sums("qwen3-8b", "method: sparq\nbudget: 136\nplacement: planes:2\nselect: kv_head", 65536, 1, PLAN_DECODE, &p, NULL);
    cr_expect_float_eq(p.index, 32 * 2 * 65536 / 8.0 * H * L, 1e-9, "planes 3 and 4 of 32 channels");
}

Test(bytes, flush_of_a_completed_chunk)
{
    sums_t s;
    /* context 1023 + 1 new token completes the first 1024-token chunk */
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 136\nchunk: 1024\nselect: kv_head", 1023, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.flush, 1024 * (2 * D * 2 + 17) * H * L, 1e-9);
    cr_expect_eq(s.n_kind[OPKIND_QUANTIZE], 36);
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 136\nchunk: 1024\nselect: kv_head", 1024, 1, PLAN_DECODE, &s, NULL);
    cr_expect_eq(s.flush, 0);
}

Test(bytes, window_is_attended_densely_in_hbm)
{
    sums_t s;
    plan_sums("qwen3-8b", "method: dense\nwindow: 4096", 32768, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.kv, (32768 - 4096) * 2 * D * 2 * H * L, 1e-9);
    cr_expect_eq(s.n_kind[OPKIND_ATTN_TAIL], 36);
    cr_expect_float_eq(s.hbm_tail, (4096 + 1) * 2 * D * 2 * H * L, 1e-9);
}

/* The open chunk (context mod T tokens, not flushed yet) stays in HBM and is attended densely: at
 * 33000 tokens with T = 1024, 32768 are offloaded and 232 (+ the new one) attended from the tail;
 * a window of 1000 tokens holds them, and then its own. */
Test(bytes, open_chunk_is_attended_densely_in_hbm)
{
    sums_t s;
    plan_sums("qwen3-8b", "method: dense\nchunk: 1024", 33000, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.kv, 32768 * 2 * D * 2 * H * L, 1e-9);
    cr_expect_float_eq(s.hbm_tail, (232 + 1) * 2 * D * 2 * H * L, 1e-9);
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 136\nchunk: 1024\nwindow: 1000", 33000, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 17.0 * (33000 - 1000) * H * L, 1e-9, "the window holds the open chunk");
    cr_expect_float_eq(s.hbm_tail, (1000 + 1) * 2 * D * 2 * H * L, 1e-9);
    plan_sums("qwen3-8b", "method: pertoken\nbudget: 136\nchunk: 1024\nwindow: 100", 33000, 1, PLAN_DECODE, &s, NULL);
    cr_expect_float_eq(s.index, 17.0 * 32768 * H * L, 1e-9, "the open chunk outgrows a small window");
}

Test(bytes, prefill_exact_and_sparse)
{
    sums_t s;
    plan_sums("qwen3-8b", "method: pertoken\nprefill: exact\nchunk: 1024\nselect: kv_head", 65536, 4096, PLAN_PREFILL, &s, NULL);
    cr_expect_float_eq(s.kv, 65536 * 2 * D * 2 * H * L, 1e-9, "exact prefill reads all offloaded K/V");
    cr_expect_float_eq(s.flush, 4096 * (2 * D * 2 + 17) * H * L, 1e-9, "four chunks flushed");
    plan_sums("qwen3-8b", "method: fathom\nprefill: sparse\nk: 1024\nprefill_union: 8\nselect: kv_head", 65536, 4096, PLAN_PREFILL, &s,
              NULL);
    cr_expect_float_eq(s.index, 544.0 / 8 * 65536 * H * L, 1e-9, "the whole planes index once per chunk");
    cr_expect_float_eq(s.winner, 8 * 1024 * 2 * D * 2 * H * L, 1e-9);
}

Test(bytes, invalid_combinations_are_errors)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    const char *bad[] = {"method: pertoken\nlayout: token\nselect: kv_head",
                         "method: pertoken\nlayout: page\nselect: kv_head",
                         "method: pertoken\nplacement: planes:2\nselect: kv_head",
                         "method: sparq\nbudget: 100\nselect: kv_head",
                         "method: hashattn\nbudget: 64",
                         "method: pertoken\nchunk: 100\nselect: kv_head",
                         "method: pertoken\nselect: query_head\nunion: 9",
                         "method: dense\nbudget: 8",
                         "method: pertoken\nplacement: \"layers:3-1\"",
                         "method: pertoken\nplacement: \"layers:0-36\"",
                         "method: sparq\nplane_scan: token_per_thread\nselect: kv_head",
                         "method: fathom\nplane_scan: two_per_thread\nselect: query_head",
                         "method: fathom\nplane_scan: v4\nselect: kv_head",
                         "method: fathom\nscan_kernel: v1\nselect: kv_head",
                         "method: fathom\nbudget: 56\nplane_bits: 48\nselect: kv_head",
                         "method: fathom\nplane_bits: 513\nselect: kv_head",
                         "method: sparq\nplane_bits: 64\nselect: kv_head",
                         "method: pertoken\nkey_variances: [1, 2]\nselect: kv_head",
                         "method: fathom\nkey_variances: [1, 2]\nselect: kv_head",
                         "method: fathom\nkey_variances: 3\nselect: kv_head",
                         "method: fathom\nkeys: kbench\nselect: kv_head",
                         "method: pertoken\nindex_layout: chunked\nselect: kv_head",
                         "method: dense\nindex_layout: chunked",
                         "method: fathom\nindex_layout: rows\nselect: kv_head"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err_t e;
        cfg_doc_t *d;
        cr_assert_eq(cfg_parse_string("m.yaml", bad[i], strlen(bad[i]), &d, &e), 0);
        method_cfg_t cfg;
        method_t *mt = NULL;
        int rc = method_cfg_bind(cfg_root(d), &cfg, &e);
        if (!rc) rc = method_new(&cfg, &t.m, &mt, &e);
        cr_expect_neq(rc, 0, "accepted: %s", bad[i]);
        method_free(mt);
        cfg_free(d);
    }
    th_machine_free(&t);
}

/* K/V kept whole in HBM: nothing crosses the link for K/V; attention reads the same rows in HBM. */
Test(bytes, kv_in_hbm_reads_in_place)
{
    const char *yaml[] = {"{method: pertoken, budget: 136, k: 2048}", "{method: pertoken, budget: 136, k: 2048, kv_placement: hbm}",
                          "{method: dense}", "{method: dense, kv_placement: hbm}"};
    sums_t s[4];
    double budget;
    for (int i = 0; i < 4; i++) plan_sums("qwen3-8b", yaml[i], 32768, 1, PLAN_DECODE, &s[i], &budget);
    cr_assert_gt(s[0].winner, 0);
    cr_assert_eq(s[1].winner, 0);
    cr_assert_float_eq(s[1].hbm_attn, s[0].hbm_attn, 1e-3);
    cr_assert_float_eq(s[2].kv, 4.83e9, 0.01e9, "dense reads %g B of K/V over the link", s[2].kv);
    cr_assert_eq(s[3].kv, 0);
    cr_assert_float_eq(s[3].hbm_attn, s[2].hbm_attn, 1e-3);
}

/* A prefill of a few tokens is a decode step: a session joining with 768K tokens already offloaded
 * and one new token reads no K/V whole (its TTFT holds no full K/V read), but its index and u·k
 * winners as a decode does; a chunk of 4096 tokens is a prefill. */
Test(bytes, a_few_token_prefill_is_a_decode_step)
{
    sums_t p, d;
    plan_sums("qwen3-8b", "method: fathom\nprefill: exact", 786432, 1, PLAN_PREFILL, &p, NULL);
    plan_sums("qwen3-8b", "method: fathom\nprefill: exact", 786432, 1, PLAN_DECODE, &d, NULL);
    cr_expect_eq(p.kv, 0, "no K/V read whole: %g B", p.kv);
    cr_expect_float_eq(p.index, d.index, 1e-9);
    cr_expect_float_eq(p.winner, d.winner, 1e-9);
    cr_expect_eq(p.n_kind[OPKIND_WF_PLAN], 36);
    plan_sums("qwen3-8b", "method: fathom\nprefill: exact", 786432, 16, PLAN_PREFILL, &p, NULL);
    cr_expect_eq(p.kv, 0);
    plan_sums("qwen3-8b", "method: fathom\nprefill: exact", 786432, 17, PLAN_PREFILL, &p, NULL);
    cr_expect_float_eq(p.kv, 786432 * 2 * D * 2 * H * L, 1e-9, "past a few tokens, exact prefill reads all K/V");
}
