/* traces: the agent-session generator (determinism, parameters, limits) and trace statistics. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"
#include "traces/tracegen.h"

static char dir[64];
static void mk(void)
{
    snprintf(dir, sizeof dir, "/tmp/odsim_gen_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void rm(void)
{
    char c[128];
    snprintf(c, sizeof c, "rm -rf '%s'", dir);
    cr_assert_eq(system(c), 0);
}
TestSuite(tracegen, .init = mk, .fini = rm);

static const char *at(const char *n)
{
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, n);
    return p[k];
}

static cfg_doc_t *yaml(const char *text)
{
    cfg_doc_t *d;
    err_t e;
    cr_assert_eq(cfg_parse_string("gen.yaml", text, strlen(text), &d, &e), 0, "%s", e.msg);
    return d;
}

static int same_files(const char *a, const char *b)
{
    char c[400];
    snprintf(c, sizeof c, "cmp -s '%s' '%s'", a, b);
    return system(c) == 0;
}

#define SMALL "sessions: 40\nturns_median: 20\n"

Test(tracegen, same_seed_byte_identical_other_seed_differs)
{
    cfg_doc_t *d = yaml(SMALL);
    err_t e;
    uint64_t s1 = 7, s2 = 8;
    cr_assert_eq(tracegen_write_file(cfg_root(d), &s1, at("a.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(tracegen_write_file(cfg_root(d), &s1, at("b.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(tracegen_write_file(cfg_root(d), &s2, at("c.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    cr_assert(same_files(at("a.pb"), at("b.pb")));
    cr_assert(!same_files(at("a.pb"), at("c.pb")));
    cfg_free(d);
    /* the seed in the YAML is used when none is passed, and recorded in the header */
    d = yaml(SMALL "seed: 7\n");
    cr_assert_eq(tracegen_write_file(cfg_root(d), NULL, at("d.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    trace_t t;
    cr_assert_eq(trace_read_file(at("d.pb"), &t, &e), 0, "%s", e.msg);
    cr_assert(t.hdr.has_seed && t.hdr.seed == 7);
    cr_assert_str_eq(t.hdr.source, "generator");
    cr_assert(strstr(t.hdr.generator_config, "seed: 7\n"));
    cr_assert(strstr(t.hdr.generator_config, "sessions: 40\n"));
    cr_assert(t.hdr.closed_loop && !t.hdr.open_loop);
    trace_free(&t);
    cfg_free(d);
    /* seeds 0 and 4357 stay distinct (mt19937 maps 0 to 4357) */
    uint64_t z = 0, m = 4357;
    cr_assert_eq(tracegen_write_file(NULL, &z, at("z.pb"), NULL, NULL, &e), 0);
    cr_assert_eq(tracegen_write_file(NULL, &m, at("m.pb"), NULL, NULL, &e), 0);
    cr_assert(!same_files(at("z.pb"), at("m.pb")));
}

Test(tracegen, defaults_file_equals_builtin_defaults)
{
    const char *root = getenv("ODSIM_ROOT");
    char p[512];
    snprintf(p, sizeof p, "%s/traces/gen_default.yaml", root ? root : ".");
    cfg_doc_t *d;
    err_t e;
    cr_assert_eq(cfg_parse_file(p, &d, &e), 0, "%s", e.msg);
    uint64_t s = 3;
    cr_assert_eq(tracegen_write_file(cfg_root(d), &s, at("f.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(tracegen_write_file(NULL, &s, at("g.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    cr_assert(same_files(at("f.pb"), at("g.pb")));
    cfg_free(d);
}

Test(tracegen, in_memory_api_matches_the_file)
{
    cfg_doc_t *d = yaml(SMALL);
    err_t e;
    uint64_t seed = 11;
    uint64_t ns = 0, nt = 0;
    cr_assert_eq(tracegen_write_file(cfg_root(d), &seed, at("h.pb"), &ns, &nt, &e), 0, "%s", e.msg);
    cr_assert_eq(ns, 40);
    trace_t t;
    cr_assert_eq(trace_read_file(at("h.pb"), &t, &e), 0, "%s", e.msg);
    tracegen_t *g;
    cr_assert_eq(tracegen_new(cfg_root(d), &seed, &g, &e), 0, "%s", e.msg);
    trace_session_t s;
    trace_session_init(&s);
    size_t n = 0;
    int rc;
    while ((rc = tracegen_next_session(g, &s, &e)) == 1) {
        cr_assert_lt(n, t.n_sessions);
        cr_assert_eq(s.n_turns, t.sessions[n].n_turns);
        cr_assert_eq(memcmp(s.turns, t.sessions[n].turns, s.n_turns * sizeof *s.turns), 0);
        cr_assert_eq(s.arrival_ns, t.sessions[n].arrival_ns);
        n++;
    }
    cr_assert_eq(rc, 0);
    cr_assert_eq(n, 40);
    size_t turns = 0;
    for (size_t i = 0; i < t.n_sessions; i++) turns += t.sessions[i].n_turns;
    cr_assert_eq(nt, turns);
    trace_session_free(&s);
    tracegen_free(g);
    trace_free(&t);
    cfg_free(d);
}

Test(tracegen, contexts_reach_a_million_and_respect_the_cap)
{
    cfg_doc_t *d = yaml("sessions: 200\nmax_context_tokens: 1200000\n");
    err_t e;
    tracegen_t *g;
    cr_assert_eq(tracegen_new(cfg_root(d), NULL, &g, &e), 0, "%s", e.msg);
    trace_session_t s;
    trace_session_init(&s);
    trace_check_state_t st;
    memset(&st, 0, sizeof st);
    uint64_t peak = 0;
    while (tracegen_next_session(g, &s, &e) == 1) {
        cr_assert_eq(trace_session_check(tracegen_header(g), &s, &st, &e), 0, "%s", e.msg);
        for (size_t i = 0; i < s.n_turns; i++) {
            const trace_turn_t *t = &s.turns[i];
            cr_assert_leq(t->input_tokens + t->decode_tokens, 1200000);
            cr_assert_geq(t->prefill_tokens, 1);
            cr_assert_geq(t->decode_tokens, 1);
            if (i > 0) {
                cr_assert_eq(t->input_tokens - t->prefill_tokens, s.turns[i - 1].input_tokens + s.turns[i - 1].decode_tokens);
                cr_assert_neq(t->think_ns, TRACE_NONE);
                cr_assert(t->kind == TRACE_TURN_TOOL || t->kind == TRACE_TURN_USER);
            }
            if (t->input_tokens + t->decode_tokens > peak) peak = t->input_tokens + t->decode_tokens;
        }
    }
    cr_assert_geq(peak, 1000000, "no session reached 1M tokens (peak %llu)", (unsigned long long)peak);
    trace_session_free(&s);
    tracegen_free(g);
    cfg_free(d);
}

Test(tracegen, closed_population_and_shared_prefix)
{
    cfg_doc_t *d = yaml("sessions: 10\narrival: closed\npopulation: 3\nshared_prefix_tokens: 4Ki\nturns_median: 3\n");
    err_t e;
    cr_assert_eq(tracegen_write_file(cfg_root(d), NULL, at("p.pb"), NULL, NULL, &e), 0, "%s", e.msg);
    trace_t t;
    cr_assert_eq(trace_read_file(at("p.pb"), &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.hdr.session_arrivals, TRACE_ARRIVALS_CLOSED);
    cr_assert_eq(t.hdr.population, 3);
    for (size_t i = 0; i < t.n_sessions; i++) {
        cr_assert_eq(t.sessions[i].user, (int64_t)(i % 3));
        cr_assert_eq(t.sessions[i].arrival_ns, TRACE_NONE);
        cr_assert_geq(t.sessions[i].start_think_ns, 0);
        const trace_turn_t *t0 = &t.sessions[i].turns[0];
        uint64_t sh = t0->input_tokens < 4096 ? t0->input_tokens : 4096;
        cr_assert_eq(t0->shared_prefix_tokens, sh);
        cr_assert_eq(t0->shared_prefix_id, 1);
        cr_assert_eq(t0->input_tokens - t0->prefill_tokens, sh < t0->input_tokens ? sh : t0->input_tokens - 1);
    }
    trace_summary_t s;
    cr_assert_eq(trace_stats_file(at("p.pb"), 0, 0, &s, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(s.peak_concurrency, 3);
    cr_assert(s.concurrency_is_population);
    trace_free(&t);
    cfg_free(d);
}

Test(tracegen, bad_parameters_are_named)
{
    err_t e;
    tracegen_t *g;
    cfg_doc_t *d = yaml("sessions: 5\nturns_medain: 3\n");
    cr_assert_neq(tracegen_new(cfg_root(d), NULL, &g, &e), 0);
    cr_assert(strstr(e.msg, "gen.yaml:2:") && strstr(e.msg, "did you mean 'turns_median'"), "%s", e.msg);
    cfg_free(d);
    d = yaml("user_turn_prob: 1.5\n");
    cr_assert_neq(tracegen_new(cfg_root(d), NULL, &g, &e), 0);
    cr_assert(strstr(e.msg, "gen.yaml:1:"), "%s", e.msg);
    cfg_free(d);
    d = yaml("arrival: bursty\n");
    cr_assert_neq(tracegen_new(cfg_root(d), NULL, &g, &e), 0);
    cr_assert(strstr(e.msg, "poisson"), "%s", e.msg);
    cfg_free(d);
    d = yaml("initial_context_median: 3M\nmax_context_tokens: 1M\n");
    cr_assert_eq(tracegen_new(cfg_root(d), NULL, &g, &e), ERR_INVAL);
    cfg_free(d);
    uint64_t big = 1ull << 40;
    cr_assert_eq(tracegen_new(NULL, &big, &g, &e), ERR_RANGE);
    d = yaml("sessions: 0\n");
    cr_assert_eq(tracegen_write_file(cfg_root(d), NULL, at("u.pb"), NULL, NULL, &e), ERR_INVAL);
    cr_assert_eq(access(at("u.pb"), F_OK), -1);
    cfg_free(d);
}

Test(tracegen, params_table_documents_every_key)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *fp = open_memstream(&buf, &n);
    tracegen_params_describe(fp);
    fclose(fp);
    const char *keys[] = {"seed", "sessions", "arrival", "rate_per_s", "population", "initial_context_median",
                          "tool_output_median", "decode_median", "tool_time_median_s", "turns_median", "max_context_tokens"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) cr_assert(strstr(buf, keys[i]), "%s missing", keys[i]);
    cr_assert(strstr(buf, "default 2Mi"));
    free(buf);
}

/* ---- statistics ---- */

Test(trace_stats, percentiles_span_and_concurrency)
{
    trace_stats_t *st;
    err_t e;
    cr_assert_eq(trace_stats_new(&st, &e), 0);
    /* three one-turn sessions at 0, 1 s, 10 s and one two-turn session 0.5 .. 5 s */
    for (int i = 0; i < 4; i++) {
        trace_session_t s;
        trace_session_init(&s);
        s.id = (uint64_t)i;
        int64_t arr[] = {0, 500000000, 1000000000, 10000000000};
        s.arrival_ns = arr[i];
        trace_turn_t t = trace_turn_blank();
        t.arrival_ns = arr[i];
        t.input_tokens = t.prefill_tokens = 100 * (uint64_t)(i + 1);
        t.decode_tokens = 10;
        cr_assert_eq(trace_session_add_turn(&s, &t, &e), 0);
        if (i == 1) {
            t.arrival_ns = 5000000000;
            t.think_ns = 2000000000;
            t.input_tokens = 1000;
            t.prefill_tokens = 790;
            cr_assert_eq(trace_session_add_turn(&s, &t, &e), 0);
        }
        cr_assert_eq(trace_stats_add(st, &s, &e), 0);
        trace_session_free(&s);
    }
    trace_summary_t o;
    cr_assert_eq(trace_stats_summary(st, NULL, &o, &e), 0);
    cr_assert_eq(o.sessions, 4);
    cr_assert_eq(o.turns, 5);
    cr_assert_eq(o.one_turn_sessions, 3);
    cr_assert_eq(o.last_ns - o.first_ns, 10000000000);
    cr_assert_eq(o.input_tokens.p50, 300); /* 100 200 300 400 1000 */
    cr_assert_eq(o.input_tokens.max, 1000);
    cr_assert_eq(o.input_tokens.mean, 400);
    cr_assert_eq(o.think_s.n, 1);
    cr_assert_eq(o.think_s.p50, 2);
    cr_assert_eq(o.session_context.max, 1010);
    /* session 1 lives 0.5 .. 5 s; session 2 arrives at 1 s while it is alive */
    cr_assert_eq(o.peak_concurrency, 2);
    trace_stats_free(st);
}
