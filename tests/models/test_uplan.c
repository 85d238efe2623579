/* User plans (models/uplan.h): a hand-written whole plan evaluated into a replay session, written as
 * the flat format and read back by the format's one parser (kernels/replay_fmt.c, kbench's reader)
 * into the same op list; sizes grown with the context; edits' dependencies after a drop; load errors
 * naming file:line:col. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/replay_fmt.h"
#include "models/opkind.h"
#include "models/uplan.h"

static const char plan_text[] =
    "odsim_plan: 1\n"
    "name: hand\n"
    "context: 1Ki\n"
    "layers: 3\n"
    "region: 1Mi\n"
    "step:\n"
    "  - {id: warm, path: spin, stream: 2, us: 7}\n"
    "layer:\n"
    "  - {id: fetch, kind: winner_fetch, path: h2dbatch, stream: 1, after: [prev.attn, step.warm], pieces: 8, piece_bytes: 4096, span: 64Ki, scale: context}\n"
    "  - {id: attn, kind: attn_sparse, path: hbm, after: [fetch], bytes: 1M}\n"
    "  - {id: mm, path: gemm, m: 1, n: 4096, k: 4096}\n"
    "end:\n"
    "  - {path: sync}\n"
    "  - {id: cpu, path: host, us: 50}\n"
    "  - {id: last, path: compute, after: [prev.mm], flops: 2e9}\n";

static uplan_t *parse(const char *text)
{
    uplan_t *u = NULL;
    err_t e;
    cr_assert_eq(uplan_parse("hand.yaml", text, strlen(text), &u, &e), 0, "%s", e.msg);
    return u;
}

static rf_workload_t w, back;

Test(uplan, whole_plan_round_trips_through_the_flat_format)
{
    uplan_t *u = parse(plan_text);
    err_t e;
    replay_label_t labels[RF_MAX_OPS];
    memset(&w, 0, sizeof w);
    snprintf(w.name, sizeof w.name, "hand");
    w.mode = RF_MODE_STREAMS, w.window_ms = 500, w.min_steps = 10, w.warmup_steps = 3, w.seed = 1, w.n_sessions = 1;
    cr_assert_eq(uplan_session(u, 1024, uplan_layers(u, 36), &w.sessions[0], labels, &e), 0, "%s", e.msg);
    const rf_session_t *s = &w.sessions[0];
    /* step 1 + 3 layers x 3 + end 3 */
    cr_assert_eq(s->n_ops, 13);
    cr_expect_eq(s->region_bytes, 1u << 20);
    cr_expect_eq(s->ops[0].kind, RF_OP_SPIN);
    cr_expect_eq(s->ops[0].stream, 2);
    /* layer 0's fetch waits for the step op only (no previous layer); layer 1's for layer 0's attn */
    cr_assert_eq(s->ops[1].n_after, 1);
    cr_expect_eq(s->ops[1].after[0], 0);
    cr_assert_eq(s->ops[4].n_after, 2);
    cr_expect_eq(s->ops[4].after[0], 2);
    cr_expect_eq(s->ops[4].after[1], 0);
    cr_expect_eq(s->ops[5].after[0], 4);
    cr_expect_eq(labels[4].kind, OPKIND_WINNER_FETCH);
    cr_expect_eq(labels[4].layer, 1);
    cr_expect_eq(labels[0].layer, PLAN_NO_LAYER);
    cr_expect_eq(s->ops[10].kind, RF_OP_SYNC);
    cr_expect_eq(s->ops[11].kind, RF_OP_HOST);
    cr_expect_eq(s->ops[11].us, 50);
    /* the end's prev.mm is the last layer's */
    cr_assert_eq(s->ops[12].n_after, 1);
    cr_expect_eq(s->ops[12].after[0], 9);
    cr_expect_eq(s->ops[12].flops, 2000000000ull);
    /* written and read back by the format's parser: the same workload */
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_eq(rf_write(f, &w), 0);
    fclose(f);
    char err[512];
    cr_assert_eq(rf_parse(buf, n, "hand.replay", &back, err, sizeof err), 0, "%s", err);
    cr_expect(rf_equal(&w, &back));
    free(buf);
    uplan_free(u);
}

Test(uplan, scale_context_grows_sizes_rounded_up)
{
    uplan_t *u = parse(plan_text);
    err_t e;
    static rf_session_t s;
    cr_assert_eq(uplan_session(u, 3000, 3, &s, NULL, &e), 0, "%s", e.msg);
    /* 8 pieces at 1024 tokens: ceil(8 * 3000 / 1024) = 24; span 65536 * 3000 / 1024 = 192000 */
    cr_expect_eq(s.ops[1].pieces, 24);
    cr_expect_eq(s.ops[1].span_bytes, 192000);
    cr_expect_eq(s.ops[2].bytes, 1000000);           /* fixed */
    cr_expect_eq(s.region_bytes, 3072000);           /* 1 MiB x 3000/1024, in 4 KiB pages */
    /* beyond the format's 2^20 pieces: an error naming the op's line */
    cr_assert_neq(uplan_session(u, 1u << 30, 3, &s, NULL, &e), 0);
    cr_expect(strstr(e.msg, "hand.yaml:9:") != NULL, "%s", e.msg);
    uplan_free(u);
}

/* a -> b -> c on one stream, with a second successor d of b: dropping b leaves c and d waiting for a. */
Test(uplan, drop_passes_dependencies_on_and_set_time_fixes_the_op)
{
    uplan_t *u = parse("odsim_plan: 1\nname: e\ncontext: 1\nedit:\n"
                       "  - {match: {kind: scan}, drop: true}\n"
                       "  - {match: {kind: topk}, us: 40}\n");
    plan_t in, out;
    plan_init(&in);
    plan_init(&out);
    err_t e;
    int kinds[] = {OPKIND_WF_PLAN, OPKIND_SCAN, OPKIND_TOPK, OPKIND_ATTN_SPARSE};
    for (int i = 0; i < 4; i++) {
        plan_op_t o;
        memset(&o, 0, sizeof o);
        o.kind = (uint16_t)kinds[i];
        o.layer = 0;
        o.cost.latency_ps = 1000000;
        uint32_t dep = i == 3 ? 1 : (uint32_t)i - 1;
        cr_assert_eq(plan_add(&in, &o, &dep, i ? 1 : 0, NULL, &e), 0, "%s", e.msg);
    }
    uint32_t matched[2];
    cr_assert_eq(uplan_apply_edits(u, &in, 1, NULL, NULL, &out, matched, &e), 0, "%s", e.msg);
    cr_expect_eq(matched[0], 1);
    cr_expect_eq(matched[1], 1);
    cr_assert_eq(out.n_ops, 3);
    cr_expect_eq(out.ops[1].kind, OPKIND_TOPK);
    cr_assert_eq(out.ops[1].n_deps, 1);
    cr_expect_eq(out.deps[out.ops[1].dep_first], 0);
    cr_assert_eq(out.ops[2].n_deps, 1);
    cr_expect_eq(out.deps[out.ops[2].dep_first], 0);
    cr_expect_eq(out.ops[1].cost.latency_ps, 40000000);
    cr_expect_eq(out.ops[1].n_uses, 0);
    plan_free(&in);
    plan_free(&out);
    uplan_free(u);
}

static void expect_error(const char *text, const char *where, const char *what)
{
    uplan_t *u = NULL;
    err_t e;
    cr_assert_neq(uplan_parse("bad.yaml", text, strlen(text), &u, &e), 0, "accepted: %s", text);
    cr_expect(strstr(e.msg, where) && strstr(e.msg, what), "'%s' lacks '%s' or '%s'", e.msg, where, what);
    cr_expect_null(u);
}

Test(uplan, bad_files_name_line_and_key)
{
    const char *head = "odsim_plan: 1\nname: b\ncontext: 1Ki\n";
    char t[512];
    snprintf(t, sizeof t, "%sstep:\n  - {path: spin, us: 1, colour: red}\n", head);
    expect_error(t, "bad.yaml:5:", "unknown key 'colour'");
    snprintf(t, sizeof t, "%sstep:\n  - {path: teleport}\n", head);
    expect_error(t, "bad.yaml:5:", "step[0].path");
    snprintf(t, sizeof t, "%sstep:\n  - {id: a, path: spin, us: 1, after: [b]}\n  - {id: b, path: spin, us: 1}\n", head);
    expect_error(t, "bad.yaml:5:", "forward or self");
    snprintf(t, sizeof t, "%sstep:\n  - {id: a, path: spin, us: 1, after: [a]}\n", head);
    expect_error(t, "bad.yaml:5:", "forward or self");
    snprintf(t, sizeof t, "%sstep:\n  - {path: gather, pieces: 4, piece_bytes: 100, span: 1Mi}\n", head);
    expect_error(t, "bad.yaml:5:", "power of two");
    snprintf(t, sizeof t, "%sstep:\n  - {path: hbm, bytes: 65Gi}\n", head);
    expect_error(t, "bad.yaml:5:", "outside");
    snprintf(t, sizeof t, "%sstep:\n  - {path: spin, bytes: 4}\n", head);
    expect_error(t, "bad.yaml:5:", "takes no 'bytes'");
    snprintf(t, sizeof t, "%sedit:\n  - {match: {kind: topk}, us: 1, drop: true}\n", head);
    expect_error(t, "bad.yaml:5:", "one of");
}
