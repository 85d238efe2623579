/* The host index layout (contiguous or chunked planes): the index fetch's pieces and bytes against
 * their closed forms, a flush's device-to-host bytes and pieces, index_fetch auto, the reservation in
 * the footprint. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "models/footprint.h"
#include "models/method.h"
#include "models/opkind.h"
#include "models/provider.h"
#include "sim/plan.h"

#define L 36.0
#define H 8.0
#define D 128.0

typedef struct fetch {
    double index, index_pieces, flush, flush_pieces;
    int flush_ops;
    double index_alone_us;   /* layer 0's index fetch alone */
    double flush_rows_op;    /* pieces of layer 0's last flush op */
    double flush_rows_bytes;
} fetch_t;

/* One decode (or prefill) plan of `yaml` on qwen3-8b / h200-1; *fs: Fathom's statistics (may be NULL). */
static void plan_fetch(const char *yaml, uint64_t ctx, uint32_t nt, plan_phase_t ph, fetch_t *f, fathom_stats_t *fs)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    err_t e;
    plan_t plan;
    provider_t *p = th_plan(&t, yaml, ph, ctx, nt, &plan);
    memset(f, 0, sizeof *f);
    bool first = true;
    for (uint32_t i = 0; i < plan.n_ops; i++) {
        const plan_op_t *o = &plan.ops[i];
        if (o->kind == OPKIND_INDEX_FETCH) {
            f->index += o->bytes_host;
            f->index_pieces += o->pieces;
            if (first) {
                sim_ps_t ps;
                cr_assert_eq(plan_op_alone_ps(o, t.sim, &ps, &e), 0, "%s", e.msg);
                f->index_alone_us = (double)ps / 1e6;
                first = false;
            }
        }
        if (o->kind == OPKIND_FLUSH) {
            f->flush += o->bytes_host;
            f->flush_pieces += o->pieces;
            f->flush_ops++;
            if (o->layer == 0) f->flush_rows_op = o->pieces, f->flush_rows_bytes = o->bytes_host;
        }
    }
    if (fs) *fs = *method_fathom(provider_method(p));
    plan_free(&plan);
    provider_free(p);
    th_machine_free(&t);
}

Test(layout, contiguous_fathom_reads_a_run_per_plane_and_scale)
{
    fetch_t c, k;
    fathom_stats_t fs;
    double n = 1048576;
    plan_fetch("method: fathom", (uint64_t)n, 1, PLAN_DECODE, &c, &fs);
    double planes = 0, active = 0, touched = 0;
    for (int b = 1; b <= 4; b++) planes += b * fs.mean_channels_at[b], active += fs.mean_channels_at[b];
    touched = active;
    /* (an op counts whole pieces: a layer's mean is truncated) */
    cr_expect_float_eq(c.index_pieces, L * floor(H * (planes + active)), 1e-9, "a run per plane read and per channel's scales");
    cr_expect_float_eq(c.index, L * H * (planes * n / 8 + active * n / 32), 1e-6);
    /* about 80 pieces of ~90 KB per KV head, where chunked reads 33 channels x 1024 chunks of ~213 B */
    cr_expect(c.index_pieces / (L * H) < 100, "%g pieces per KV head", c.index_pieces / (L * H));
    plan_fetch("method: fathom\nindex_layout: chunked", (uint64_t)n, 1, PLAN_DECODE, &k, NULL);
    cr_expect_float_eq(k.index, c.index, 1e-9, "the layout moves the same bytes");
    cr_expect_float_eq(k.index_pieces, L * floor(H * touched * (n / 1024)), 1e-9);
}

Test(layout, contiguous_sparq_pieces_and_bytes)
{
    fetch_t f;
    double n = 65536;
    plan_fetch("method: sparq\nbudget: 136\nindex_fetch: sm", (uint64_t)n, 1, PLAN_DECODE, &f, NULL);
    cr_expect_float_eq(f.index_pieces, L * H * 32 * 5, 1e-9, "r = 32 channels: 4 planes and the scales each");
    cr_expect_float_eq(f.index, L * H * 32 * (4 * n / 8 + n / 32), 1e-9);
    plan_fetch("method: sparq\nbudget: 136\nplacement: planes:2\nindex_fetch: sm", (uint64_t)n, 1, PLAN_DECODE, &f, NULL);
    cr_expect_float_eq(f.index_pieces, L * H * 32 * 2, 1e-9, "planes 3 and 4 on the host, scales in HBM");
    cr_expect_float_eq(f.index, L * H * 32 * 2 * n / 8, 1e-9);
    plan_fetch("method: sparq\nstore: bf16\nbudget: 256\nindex_fetch: sm", (uint64_t)n, 1, PLAN_DECODE, &f, NULL);
    cr_expect_float_eq(f.index_pieces, L * H * 16, 1e-9, "a bf16 channel is one run");
    cr_expect_float_eq(f.index, L * H * 16 * 2 * n, 1e-9);
    plan_fetch("method: sparq\nbudget: 68\nindex_layout: chunked\nindex_fetch: sm", (uint64_t)n, 1, PLAN_DECODE, &f, NULL);
    cr_expect_float_eq(f.index_pieces, L * H * 16 * n / 1024, 1e-9);
    /* a sparse prefill chunk reads every channel's 4 planes and scales */
    plan_fetch("method: fathom\nprefill: sparse", (uint64_t)n, 1024, PLAN_PREFILL, &f, NULL);
    cr_expect_float_eq(f.index_pieces, L * H * D * 5, 1e-9);
    cr_expect_float_eq(f.index, L * H * 544.0 / 8 * n, 1e-9);
}

Test(layout, a_flush_writes_each_plane_as_a_2d_row)
{
    fetch_t c, k;
    /* context 1023 + 1 token completes a 1024-token chunk: K/V 512 B and 68 B of index per token */
    plan_fetch("method: fathom", 1023, 1, PLAN_DECODE, &c, NULL);
    cr_expect_float_eq(c.flush, L * H * 1024 * (512 + 68), 1e-9);
    cr_expect_eq(c.flush_ops, 2 * 36, "K/V and index apart in every layer");
    cr_expect_float_eq(c.flush_rows_bytes, H * 1024 * 68, 1e-9, "T/8 bytes per plane, T/32 per scale run");
    cr_expect_float_eq(c.flush_rows_op, H * (4 * D + D), 1e-9, "a row per plane and per channel's scales");
    cr_expect_float_eq(c.flush_pieces, L * (H + H * 5 * D), 1e-9);
    plan_fetch("method: fathom\nindex_layout: chunked", 1023, 1, PLAN_DECODE, &k, NULL);
    cr_expect_float_eq(k.flush, c.flush, 1e-9);
    cr_expect_eq(k.flush_ops, 36);
    cr_expect_float_eq(k.flush_pieces, L * 2 * H, 1e-9, "chunked: a K/V and an index piece per KV head");
    /* planes:1 keeps the first plane and the scales in HBM: 3 planes per channel go to the host */
    plan_fetch("method: fathom\nplacement: planes:1", 1023, 1, PLAN_DECODE, &c, NULL);
    cr_expect_float_eq(c.flush_rows_op, H * 3 * D, 1e-9);
    cr_expect_float_eq(c.flush_rows_bytes, H * 1024 * 3 * D / 8, 1e-9);
}

Test(layout, auto_takes_the_faster_path)
{
    const char *paths[] = {"sm", "ce"};
    for (int lay = 0; lay < 2; lay++)
        for (int n = 0; n < 3; n++) {
            uint64_t ctx = (uint64_t)32768 << (3 * n);   /* 32K, 256K, 2M */
            char yaml[128];
            fetch_t a, f[2];
            snprintf(yaml, sizeof yaml, "method: fathom\nindex_layout: %s", lay ? "chunked" : "contiguous");
            plan_fetch(yaml, ctx, 1, PLAN_DECODE, &a, NULL);
            for (int i = 0; i < 2; i++) {
                snprintf(yaml, sizeof yaml, "method: fathom\nindex_layout: %s\nindex_fetch: %s", lay ? "chunked" : "contiguous",
                         paths[i]);
                plan_fetch(yaml, ctx, 1, PLAN_DECODE, &f[i], NULL);
            }
            double best = fmin(f[0].index_alone_us, f[1].index_alone_us);
            cr_expect_float_eq(a.index_alone_us, best, 1e-6, "layout %d, %llu tokens: auto %g us, sm %g, ce %g", lay,
                               (unsigned long long)ctx, a.index_alone_us, f[0].index_alone_us, f[1].index_alone_us);
        }
}

Test(layout, the_footprint_counts_the_reservation)
{
    tmachine_t t;
    th_machine(&t, "h200-1", NULL, "qwen3-8b");
    footprint_t a, b, c;
    provider_t *p = th_provider(&t, "method: fathom");
    provider_t *r = th_provider(&t, "method: fathom\nmax_context: 2097152");
    provider_t *q = th_provider(&t, "method: pertoken\nmax_context: 2097152");
    footprint_session(provider_method(p), 1048576, &a);
    footprint_session(provider_method(r), 1048576, &b);
    footprint_session(provider_method(q), 1048576, &c);
    cr_expect_float_eq(a.host_index_bytes, 544.0 / 8 * 1048576 * H * L, 1e-6);
    cr_expect_float_eq(b.host_index_bytes, 544.0 / 8 * 2097152 * H * L, 1e-6, "runs reserved for 2M tokens");
    cr_expect_float_eq(b.host_kv_bytes, a.host_kv_bytes, 1e-9);
    cr_expect_float_eq(c.host_index_bytes, 136.0 / 8 * 1048576 * H * L, 1e-6, "a token-major index reserves nothing");
    provider_free(p);
    provider_free(r);
    provider_free(q);
    th_machine_free(&t);
}
