/* traces: importers — every committed file against the aggregates its SOURCES.md states, the
 * Mooncake session rule on hand-built cases, scaling, and bad input naming the line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "traces/import.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

static const char *data(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    const char *root = getenv("ODSIM_ROOT");
    snprintf(p[k], sizeof p[k], "%s/traces/data/%s", root ? root : ".", name);
    return p[k];
}

static trace_summary_t summarize(const trace_t *t)
{
    trace_stats_t *st;
    err_t e;
    cr_assert_eq(trace_stats_new(&st, &e), 0);
    for (size_t i = 0; i < t->n_sessions; i++) cr_assert_eq(trace_stats_add(st, &t->sessions[i], &e), 0);
    trace_summary_t s;
    cr_assert_eq(trace_stats_summary(st, &t->hdr, &s, &e), 0);
    trace_stats_free(st);
    return s;
}

static void import_ok(trace_format_t f, const char *file, const trace_import_opts_t *o, trace_t *t)
{
    err_t e;
    int rc = trace_import_file(f, data(file), o, t, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
}

static long rep(const trace_t *t, const char *key)
{
    const char *v = trace_header_get(&t->hdr, true, key);
    cr_assert_not_null(v, "no report key %s", key);
    return atol(v);
}

#define NEAR(x, want, tol) cr_assert((x) >= (want) - (tol) && (x) <= (want) + (tol), "%s = %.6g, want %.6g", #x, (double)(x), (double)(want))

/* ---- full committed files vs SOURCES.md ---- */

Test(import_data, mooncake_conversation)
{
    trace_t t;
    import_ok(TRACE_FMT_MOONCAKE, "mooncake_fast25_conversation_trace.jsonl", NULL, &t);
    trace_summary_t s = summarize(&t);
    cr_assert_eq(rep(&t, "rows"), 12031);
    cr_assert_eq(s.turns, 12031);
    cr_assert_eq(s.first_ns, 0);
    cr_assert_eq(s.last_ns, 3536999ll * 1000000);
    NEAR(s.input_tokens.mean, 12035, 0.5);
    cr_assert_eq(s.input_tokens.p50, 6909);
    cr_assert_eq(s.input_tokens.p99, 85401);
    cr_assert_eq(s.input_tokens.max, 126195);
    NEAR(s.decode_tokens.mean, 343, 0.5);
    cr_assert_eq(s.decode_tokens.p50, 350);
    cr_assert_eq(s.decode_tokens.max, 2000);
    /* session reconstruction with M = 2 (figures in the report) */
    cr_assert_eq(s.sessions, 8486);
    cr_assert_eq(rep(&t, "forks"), 136);
    cr_assert_eq(s.forked_sessions, 136);
    cr_assert_eq(rep(&t, "one_turn_sessions"), 6547);
    cr_assert_eq(rep(&t, "max_turns_per_session"), 43);
    cr_assert(t.hdr.open_loop && !t.hdr.closed_loop);
    trace_free(&t);
}

Test(import_data, mooncake_conversation_m1_glues)
{
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    o.min_shared_blocks = 1;
    trace_t t;
    import_ok(TRACE_FMT_MOONCAKE, "mooncake_fast25_conversation_trace.jsonl", &o, &t);
    cr_assert_eq(t.n_sessions, 7131);
    cr_assert_eq(rep(&t, "forks"), 6817); /* block 0 alone glues unrelated requests */
    cr_assert_str_eq(trace_header_get(&t.hdr, false, "min_shared_blocks"), "1");
    trace_free(&t);
}

Test(import_data, mooncake_synthetic)
{
    trace_t t;
    import_ok(TRACE_FMT_MOONCAKE, "mooncake_fast25_synthetic_trace.jsonl", NULL, &t);
    trace_summary_t s = summarize(&t);
    cr_assert_eq(s.turns, 3993);
    cr_assert_eq(s.last_ns - s.first_ns, 1022025ll * 1000000);
    NEAR(s.input_tokens.mean, 15325, 0.5);
    cr_assert_eq(s.input_tokens.p50, 11587);
    cr_assert_eq(s.input_tokens.p99, 66458);
    cr_assert_eq(s.input_tokens.max, 191378);
    NEAR(s.decode_tokens.mean, 149, 0.5);
    cr_assert_eq(s.decode_tokens.p50, 69);
    cr_assert_eq(s.decode_tokens.max, 893);
    cr_assert_eq(s.sessions, 3700);
    cr_assert_eq(rep(&t, "forks"), 118);
    cr_assert_eq(rep(&t, "one_turn_sessions"), 3441);
    trace_free(&t);
}

Test(import_data, azure_code)
{
    trace_t t;
    import_ok(TRACE_FMT_AZURE, "azure_llm_2023_code.csv", NULL, &t);
    trace_summary_t s = summarize(&t);
    cr_assert_eq(s.sessions, 8819);
    cr_assert_eq(s.turns, 8819);
    cr_assert_eq(s.one_turn_sessions, 8819);
    /* 18:17:03.9799600 to 19:14:19.9280160 */
    cr_assert_eq(s.last_ns - s.first_ns, 3435948056000ll);
    NEAR((double)(s.last_ns - s.first_ns) / 1e9, 3436, 0.5);
    NEAR(s.input_tokens.mean, 2048, 0.5);
    cr_assert_eq(s.input_tokens.p50, 1469);
    cr_assert_eq(s.input_tokens.max, 7437);
    NEAR(s.decode_tokens.mean, 28, 0.5);
    cr_assert_eq(s.decode_tokens.max, 1899);
    cr_assert_str_eq(trace_header_get(&t.hdr, true, "first_timestamp"), "2023-11-16 18:17:03.9799600");
    cr_assert(t.hdr.open_loop && !t.hdr.closed_loop);
    trace_free(&t);
}

Test(import_data, azure_conv)
{
    trace_t t;
    import_ok(TRACE_FMT_AZURE, "azure_llm_2023_conv.csv", NULL, &t);
    trace_summary_t s = summarize(&t);
    cr_assert_eq(s.sessions, 19366);
    NEAR((double)(s.last_ns - s.first_ns) / 1e9, 3502, 0.5);
    NEAR(s.input_tokens.mean, 1155, 0.5);
    cr_assert_eq(s.input_tokens.p50, 1020);
    cr_assert_eq(s.input_tokens.max, 14050);
    NEAR(s.decode_tokens.mean, 211, 0.5);
    cr_assert_eq(s.decode_tokens.max, 1000);
    trace_free(&t);
}

Test(import_data, tracelab_example)
{
    trace_t t;
    import_ok(TRACE_FMT_TRACELAB, "tracelab_example_agent_sessions_sanitized.jsonl", NULL, &t);
    cr_assert_eq(rep(&t, "rows"), 19);
    cr_assert_eq(t.n_sessions, 2);
    cr_assert(t.hdr.open_loop && t.hdr.closed_loop);
    /* sessions in arrival order: Codex (2026-03-21) before Claude (2026-06-01) */
    const trace_session_t *cx = &t.sessions[0], *cl = &t.sessions[1];
    cr_assert(strncmp(cx->key, "codex:", 6) == 0);
    cr_assert(strncmp(cl->key, "claude:", 7) == 0);
    cr_assert_eq(cx->n_turns, 9);
    cr_assert_eq(cl->n_turns, 10);
    cr_assert_eq(cl->turns[0].input_tokens, 32272);
    cr_assert_eq(cl->turns[9].input_tokens, 48305);
    cr_assert_eq(cx->turns[0].input_tokens, 9324);
    cr_assert_eq(cx->turns[8].input_tokens, 12097);
    for (size_t i = 0; i < cl->n_turns; i++) {
        cr_assert(cl->turns[i].input_tokens >= 32000 && cl->turns[i].input_tokens <= 48500);
        cr_assert_eq(cl->turns[i].think_ns == TRACE_NONE, i == 0);
    }
    /* claude round 0: prefix 27217 + 5055 new, 931 out, user message */
    cr_assert_eq(cl->turns[0].prefill_tokens, 5055);
    cr_assert_eq(cl->turns[0].shared_prefix_tokens, 27217);
    cr_assert_eq(cl->turns[0].decode_tokens, 931);
    cr_assert_eq(cl->turns[0].kind, TRACE_TURN_USER);
    /* claude round 1 is ready at its last tool result 05:40:50.938; round 0 ended 05:40:31.647 */
    cr_assert_eq(cl->turns[1].think_ns, 19291000000ll);
    cr_assert_eq(cl->turns[1].kind, TRACE_TURN_TOOL);
    cr_assert_eq(cl->turns[1].arrival_ns - cl->turns[0].arrival_ns, 30787000000ll);
    /* claude round 5: a user message at 05:42:43.333 after round 4's text at 05:42:23.420 */
    cr_assert_eq(cl->turns[5].think_ns, 19913000000ll);
    cr_assert_eq(cl->turns[5].kind, TRACE_TURN_USER);
    /* codex spans 10:05:59.328 to 10:06:59.214 (last turn ready) */
    cr_assert_eq(cx->turns[8].arrival_ns - cx->turns[0].arrival_ns, 59886000000ll);
    cr_assert_eq(cx->arrival_ns, 0);
    trace_free(&t);
}

Test(import_data, written_file_reads_back)
{
    trace_t t, b;
    err_t e;
    import_ok(TRACE_FMT_TRACELAB, "tracelab_example_agent_sessions_sanitized.jsonl", NULL, &t);
    char p[] = "/tmp/odsim_imp_XXXXXX";
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(trace_write_file(p, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_read_file(p, &b, &e), 0, "%s", e.msg);
    cr_assert_eq(b.n_sessions, 2);
    cr_assert_str_eq(b.hdr.source, "tracelab");
    cr_assert_str_eq(b.hdr.source_file, "tracelab_example_agent_sessions_sanitized.jsonl");
    cr_assert_eq(b.sessions[1].turns[3].think_ns, t.sessions[1].turns[3].think_ns);
    unlink(p);
    trace_free(&t);
    trace_free(&b);
}

/* ---- scaling ---- */

Test(import_data, scale_to_a_million_keeps_structure)
{
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    o.scale_to_tokens = 1000000;
    trace_t a, t;
    import_ok(TRACE_FMT_MOONCAKE, "mooncake_fast25_synthetic_trace.jsonl", NULL, &a);
    import_ok(TRACE_FMT_MOONCAKE, "mooncake_fast25_synthetic_trace.jsonl", &o, &t);
    cr_assert_eq(trace_max_input(&t), 1000000);
    cr_assert_eq(t.hdr.unscaled_max_input_tokens, 191378);
    cr_assert(t.hdr.scale_factor >= 1000000.0 / 191378 && t.hdr.scale_factor < 1000000.0 / 191378 * 1.01);
    cr_assert_not_null(t.hdr.notes);
    cr_assert(strstr(t.hdr.notes, "stretched"));
    cr_assert_eq(t.n_sessions, a.n_sessions);
    for (size_t i = 0; i < t.n_sessions; i++) {
        cr_assert_eq(t.sessions[i].n_turns, a.sessions[i].n_turns);
        cr_assert_eq(t.sessions[i].arrival_ns, a.sessions[i].arrival_ns);
        for (size_t k = 0; k < t.sessions[i].n_turns; k++) {
            const trace_turn_t *x = &t.sessions[i].turns[k], *y = &a.sessions[i].turns[k];
            cr_assert_eq(x->arrival_ns, y->arrival_ns);
            cr_assert_eq(x->decode_tokens, y->decode_tokens);
            cr_assert(x->input_tokens <= (uint64_t)(t.hdr.scale_factor * (double)y->input_tokens));
            cr_assert(x->input_tokens <= 1000000);
            cr_assert(x->input_tokens >= y->input_tokens);
            if (k > 0 && y->input_tokens - y->prefill_tokens ==
                             a.sessions[i].turns[k - 1].input_tokens + a.sessions[i].turns[k - 1].decode_tokens)
                /* an exact continuation stays exact */
                cr_assert_eq(x->input_tokens - x->prefill_tokens,
                             t.sessions[i].turns[k - 1].input_tokens + t.sessions[i].turns[k - 1].decode_tokens);
        }
    }
    trace_free(&a);
    trace_free(&t);
}

Test(import_data, scale_factor_and_bad_scales)
{
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    o.scale = 8;
    trace_t t;
    err_t e;
    import_ok(TRACE_FMT_AZURE, "azure_llm_2023_code.csv", &o, &t);
    cr_assert_eq(trace_max_input(&t), 8 * 7437);
    cr_assert_eq(t.hdr.scale_factor, 8);
    cr_assert_str_eq(trace_header_get(&t.hdr, false, "scale"), "8");
    trace_free(&t);
    o.scale = 0.5;
    cr_assert_eq(trace_import_file(TRACE_FMT_AZURE, data("azure_llm_2023_code.csv"), &o, &t, &e), ERR_INVAL);
    trace_free(&t);
    o.scale = 1;
    o.scale_to_tokens = 100; /* below the largest context: would shrink */
    cr_assert_eq(trace_import_file(TRACE_FMT_AZURE, data("azure_llm_2023_code.csv"), &o, &t, &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "only stretches"), "%s", e.msg);
    trace_free(&t);
    o.scale_to_tokens = 0;
    o.scale = 1e9; /* 7437 * 1e9 tokens is absurd */
    cr_assert_eq(trace_import_file(TRACE_FMT_AZURE, data("azure_llm_2023_code.csv"), &o, &t, &e), ERR_RANGE);
    trace_free(&t);
}

/* ---- the Mooncake rule on hand-built cases ---- */

static void mc(const char *text, int m, trace_t *t)
{
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    o.min_shared_blocks = m;
    err_t e;
    int rc = trace_import_mem(TRACE_FMT_MOONCAKE, "case.jsonl", text, strlen(text), &o, t, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
}

/* P: 3 blocks (1100 tokens) + 100 out. R extends P's first 2 blocks: continuation. */
Test(mooncake_rule, continuation_fork_and_one_turn)
{
    const char *text =
        "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 100, \"hash_ids\": [0, 1, 2]}\n"
        "{\"timestamp\": 5, \"input_length\": 1700, \"output_length\": 10, \"hash_ids\": [0, 1, 3, 4]}\n"
        /* a second child of row 0: fork */
        "{\"timestamp\": 6, \"input_length\": 1300, \"output_length\": 10, \"hash_ids\": [0, 1, 5]}\n"
        /* extends row 1 (all but its last block: 0 1 3) */
        "{\"timestamp\": 9, \"input_length\": 2000, \"output_length\": 10, \"hash_ids\": [0, 1, 3, 6]}\n"
        /* unrelated: shares only block 0 -> new session, shared prefix 512 */
        "{\"timestamp\": 9, \"input_length\": 1200, \"output_length\": 10, \"hash_ids\": [0, 7, 8]}\n";
    trace_t t;
    mc(text, 2, &t);
    cr_assert_eq(t.n_sessions, 3);
    cr_assert_eq(t.sessions[0].n_turns, 3);
    cr_assert_eq(t.sessions[0].turns[1].input_tokens, 1700);
    cr_assert_eq(t.sessions[0].turns[1].prefill_tokens, 1700 - 1200); /* reuses P.in + P.out */
    cr_assert_eq(t.sessions[0].turns[2].prefill_tokens, 2000 - 1710);
    cr_assert_eq(t.sessions[1].forked_from, 0);
    cr_assert_eq(t.sessions[1].fork_tokens, 1024);
    cr_assert_eq(t.sessions[1].turns[0].shared_prefix_tokens, 1024);
    cr_assert_eq(t.sessions[1].turns[0].prefill_tokens, 1300 - 1024);
    cr_assert_eq(t.sessions[2].forked_from, TRACE_NONE);
    cr_assert_eq(t.sessions[2].turns[0].shared_prefix_tokens, 512);
    cr_assert_eq(t.sessions[2].turns[0].shared_prefix_id, 0);
    cr_assert_eq(rep(&t, "forks"), 1);
    cr_assert_eq(rep(&t, "one_turn_sessions"), 2);
    cr_assert_eq(rep(&t, "continuations"), 2);
    trace_free(&t);
    /* with M = 3 the 2-block match no longer counts: every row is its own session */
    mc(text, 3, &t);
    cr_assert_eq(t.n_sessions, 4); /* row 3 still extends row 1 by 3 blocks */
    cr_assert_eq(t.sessions[1].n_turns, 2);
    trace_free(&t);
}

Test(mooncake_rule, needs_room_for_parent_output_and_earlier_arrival)
{
    trace_t t;
    /* R.in < P.in + P.out: not a continuation */
    mc("{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 700, \"hash_ids\": [10, 11, 12]}\n"
       "{\"timestamp\": 5, \"input_length\": 1700, \"output_length\": 1, \"hash_ids\": [10, 11, 13, 14]}\n",
       2, &t);
    cr_assert_eq(t.n_sessions, 2);
    cr_assert_eq(t.sessions[1].turns[0].shared_prefix_tokens, 1024);
    trace_free(&t);
    /* same millisecond: not earlier */
    mc("{\"timestamp\": 5, \"input_length\": 1100, \"output_length\": 1, \"hash_ids\": [10, 11, 12]}\n"
       "{\"timestamp\": 5, \"input_length\": 1700, \"output_length\": 1, \"hash_ids\": [10, 11, 13, 14]}\n",
       2, &t);
    cr_assert_eq(t.n_sessions, 2);
    trace_free(&t);
}

Test(mooncake_rule, longest_match_wins)
{
    trace_t t;
    mc("{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 1, \"hash_ids\": [0, 1, 2]}\n"
       "{\"timestamp\": 1, \"input_length\": 1600, \"output_length\": 1, \"hash_ids\": [0, 1, 9, 8]}\n"
       "{\"timestamp\": 2, \"input_length\": 2100, \"output_length\": 1, \"hash_ids\": [0, 1, 9, 4, 5]}\n",
       2, &t);
    /* row 2 matches row 0 by 2 blocks and row 1 by 3 (0 1 9): row 1 is the parent */
    cr_assert_eq(t.n_sessions, 1);
    cr_assert_eq(t.sessions[0].n_turns, 3);
    trace_free(&t);
    /* a later, non-extending row cannot be a parent: block 2 differs */
    mc("{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 1, \"hash_ids\": [0, 1, 2]}\n"
       "{\"timestamp\": 1, \"input_length\": 1600, \"output_length\": 1, \"hash_ids\": [0, 2, 9, 8]}\n",
       1, &t);
    cr_assert_eq(t.n_sessions, 2);
    trace_free(&t);
}

/* ---- bad input ---- */

static void bad(trace_format_t f, const char *text, int code, const char *want)
{
    trace_t t;
    err_t e;
    int rc = trace_import_mem(f, "bad.in", text, strlen(text), NULL, &t, &e);
    cr_assert_eq(rc, code, "got %d: %s", rc, e.msg);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    trace_free(&t);
}

#define MC_OK "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n"

Test(import_bad, mooncake)
{
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"timestamp\": 1, \"input_length\"\n", ERR_PARSE, "bad.in:2: not JSON");
    bad(TRACE_FMT_MOONCAKE, MC_OK "hello\n", ERR_PARSE, "bad.in:2: not JSON");
    bad(TRACE_FMT_MOONCAKE, MC_OK "[1, 2]\n", ERR_PARSE, "bad.in:2: a JSON object was expected");
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"timestamp\": 1, \"input_length\": -5, \"output_length\": 1, \"hash_ids\": []}\n",
        ERR_PARSE, "bad.in:2: field 'input_length': negative token count -5");
    bad(TRACE_FMT_MOONCAKE,
        MC_OK "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 99999999999999, \"hash_ids\": [0]}\n", ERR_PARSE,
        "bad.in:2: field 'output_length': absurd token count");
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"timestamp\": 1, \"input_length\": 10.5, \"output_length\": 1, \"hash_ids\": [0]}\n",
        ERR_PARSE, "bad.in:2: field 'input_length': not an integer");
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"timestamp\": 1, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [0]}\n",
        ERR_PARSE, "bad.in:2: field 'hash_ids': 1 blocks, but input_length 1000 needs 2");
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [-1]}\n",
        ERR_PARSE, "bad.in:2: field 'hash_ids': item 0");
    bad(TRACE_FMT_MOONCAKE, "{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n" MC_OK,
        ERR_PARSE, "bad.in:2: timestamp 0.000000 ms earlier");
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n",
        ERR_PARSE, "bad.in:2: field 'timestamp'");
    bad(TRACE_FMT_MOONCAKE, MC_OK "{\"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n", ERR_PARSE,
        "bad.in:2: missing field 'timestamp'");
    bad(TRACE_FMT_MOONCAKE,
        MC_OK "{\"timestamp\": 1, \"timestamp\": 2, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n",
        ERR_PARSE, "bad.in:2: not JSON");
}

/* Rows without a hash block: one-turn sessions of their own (the importer once offset a NULL array,
 * which clang's UBSan reports: tests/fuzz/seeds/fuzz_trace_mooncake/no_hash_ids.jsonl under make fuzz). */
Test(import_ok, mooncake_rows_without_hash_ids)
{
    const char *text = "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}\n"
                       "{\"timestamp\": 5, \"input_length\": 0, \"output_length\": 2, \"hash_ids\": []}\n";
    trace_t t;
    err_t e;
    cr_assert_eq(trace_import_mem(TRACE_FMT_MOONCAKE, "x.jsonl", text, strlen(text), NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.n_sessions, 2);
    cr_assert_eq(t.sessions[1].arrival_ns, 5000000);
    cr_assert_eq(t.sessions[1].n_turns, 1);
    cr_assert_eq(t.sessions[1].turns[0].decode_tokens, 2);
    trace_free(&t);
}

#define AZ_H "TIMESTAMP,ContextTokens,GeneratedTokens\n"

Test(import_bad, azure)
{
    static const struct { const char *text, *want; } cases[] = {
        {AZ_H "2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0,-3,1\n",
         "bad.in:3: column ContextTokens: negative token count '-3'"},
        {AZ_H "2023-11-16 18:17:03.9799600,48x8,10\n",
         "bad.in:2: column ContextTokens: bad field '48x8'"},
        {AZ_H "2023-11-16 18:17:03.9799600,4808,99999999999\n",
         "bad.in:2: column GeneratedTokens: absurd token count"},
        {AZ_H "2023-13-16 18:17:03.9799600,4808,10\n",
         "bad.in:2: column TIMESTAMP: bad field '2023-13-16"},
        {AZ_H "2023-02-29 18:17:03,4808,10\n",
         "bad.in:2: column TIMESTAMP: bad field"},
        {AZ_H "2023-11-16 18:17:03.9799600,4808\n",
         "bad.in:2: 2 fields, the header has 3"},
        {AZ_H "2023-11-16 18:17:03.9,4808,1\n2023-11-16 18:17:02.9,4808,1\n",
         "bad.in:3: TIMESTAMP earlier"},
        {AZ_H "2023-11-16 18:17:03.9,,1\n",
         "bad.in:2: column ContextTokens: empty field"},
        {"TIMESTAMP,Context,GeneratedTokens\n",
         "bad.in:1: header: no column ContextTokens"},
        /* dates int64 ns cannot hold, and spans int64 differences cannot, once wrapped silently */
        {AZ_H "1677-01-01 00:00:00,4808,10\n",
         "bad.in:2: column TIMESTAMP: '1677-01-01 00:00:00' is outside the years 1678-2261"},
        {AZ_H "2023-11-16 18:17:03,4808,10\n2262-12-31 00:00:00,4808,10\n",
         "bad.in:3: column TIMESTAMP: '2262-12-31 00:00:00' is outside the years"},
        {AZ_H "1700-01-01 00:00:00,4808,10\n2250-01-01 00:00:00,4808,10\n",
         "bad.in:3: TIMESTAMP more than 100 years after the first row"},
        {"", "empty file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad(TRACE_FMT_AZURE, cases[i].text, ERR_PARSE, cases[i].want);
}

Test(import_ok, azure_columns_any_order_and_crlf)
{
    const char *text = "GeneratedTokens,TIMESTAMP,ContextTokens\r\n5,2023-11-16 18:17:03.5,100\r\n7,2023-11-16 18:17:04,200";
    trace_t t;
    err_t e;
    cr_assert_eq(trace_import_mem(TRACE_FMT_AZURE, "x.csv", text, strlen(text), NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.n_sessions, 2);
    cr_assert_eq(t.sessions[1].arrival_ns, 500000000);
    cr_assert_eq(t.sessions[1].turns[0].input_tokens, 200);
    cr_assert_eq(t.sessions[1].turns[0].decode_tokens, 7);
    trace_free(&t);
}

#define TL_EV "\"timing_events\": [{\"event_type\": \"user_message\", \"timestamp\": \"2026-06-01T05:40:20.151Z\"}]"

Test(import_bad, tracelab)
{
    bad(TRACE_FMT_TRACELAB, "not json\n", ERR_PARSE, "bad.in:1: not JSON");
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 3, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, " TL_EV "}\n",
        ERR_PARSE, "bad.in:1: prefix_tokens 3 + newly_append_tokens 6 != input_tokens_total 10");
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": -1, " TL_EV "}\n",
        ERR_PARSE, "bad.in:1: field 'output_tokens': negative token count -1");
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, \"timing_events\": [{\"event_type\": \"text\", "
        "\"timestamp\": \"yesterday\"}]}\n",
        ERR_PARSE, "bad.in:1: timing_events[0]: bad timestamp 'yesterday'");
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, \"timing_events\": [{\"event_type\": \"text\", "
        "\"timestamp\": \"3000-01-01T00:00:00Z\"}]}\n",
        ERR_PARSE, "bad.in:1: timing_events[0]: timestamp '3000-01-01T00:00:00Z' is outside the years 1678-2261");
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, \"timing_events\": [{\"event_type\": \"user_message\", "
        "\"timestamp\": \"1700-01-01T00:00:00Z\"}]}\n"
        "{\"session_id\": \"b\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, \"timing_events\": [{\"event_type\": \"user_message\", "
        "\"timestamp\": \"2250-01-01T00:00:00Z\"}]}\n",
        ERR_PARSE, "bad.in:2: timestamps span more than 100 years");
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, " TL_EV "}\n"
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, " TL_EV "}\n",
        ERR_PARSE, "round 0 also on line");
    /* round 1 reuses more than the session held after round 0 (10 + 1) */
    bad(TRACE_FMT_TRACELAB,
        "{\"session_id\": \"a\", \"round_index\": 0, \"input_tokens_total\": 10, \"prefix_tokens\": 4, "
        "\"newly_append_tokens\": 6, \"output_tokens\": 1, " TL_EV "}\n"
        "{\"session_id\": \"a\", \"round_index\": 1, \"input_tokens_total\": 30, \"prefix_tokens\": 20, "
        "\"newly_append_tokens\": 10, \"output_tokens\": 1, " TL_EV "}\n",
        ERR_PARSE, "bad.in:1: session 0 turn 1: reuses 20 tokens but the session held 11");
    bad(TRACE_FMT_TRACELAB, "", ERR_PARSE, "no rows");
}

Test(import_bad, unknown_format_and_options)
{
    trace_format_t f;
    err_t e;
    cr_assert_eq(trace_format_parse("sharegpt", &f, &e), ERR_NOTFOUND);
    cr_assert(strstr(e.msg, "mooncake, azure, tracelab"));
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    o.min_shared_blocks = 0;
    trace_t t;
    cr_assert_eq(trace_import_mem(TRACE_FMT_MOONCAKE, "x", MC_OK, strlen(MC_OK), &o, &t, &e), ERR_INVAL);
    trace_free(&t);
    cr_assert_eq(trace_import_file(TRACE_FMT_AZURE, "/nonexistent/file.csv", NULL, &t, &e), ERR_IO);
    cr_assert(strstr(e.msg, "/nonexistent/file.csv"), "%s", e.msg);
    trace_free(&t);
}
