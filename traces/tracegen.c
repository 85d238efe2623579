#include "traces/tracegen.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace_io.h"

enum { ARR_POISSON = 0, ARR_CLOSED = 1 };

typedef struct tg_params {
    int64_t seed;
    int64_t sessions;
    int arrival;
    double rate_per_s;
    int64_t population;
    double session_gap_s;
    int64_t initial_context_median;
    double initial_context_sigma;
    int64_t shared_prefix_tokens;
    double turns_median;
    double turns_sigma;
    int64_t turns_max;
    int64_t tool_output_median;
    double tool_output_sigma;
    int64_t tool_output_max;
    double user_turn_prob;
    int64_t user_message_median;
    double user_message_sigma;
    int64_t decode_median;
    double decode_sigma;
    int64_t decode_max;
    double tool_time_median_s;
    double tool_time_sigma;
    double user_think_median_s;
    double user_think_sigma;
    int64_t max_context_tokens;
} tg_params_t;

static const char *const arrival_choices[] = {"poisson", "closed", NULL};

#define P(k, t, f, d, lo, hi, doc) {k, t, offsetof(tg_params_t, f), d, lo, hi, NULL, doc}
static const cfg_param_t tg_table[] = {
    P("seed", CFG_T_INT, seed, "1", 0, 4294967294.0, "RNG seed (gsl mt19937); --seed overrides it"),
    P("sessions", CFG_T_INT, sessions, "1000", 0, 1e9,
      "sessions to draw (0: unbounded, in-memory use only); a closed run needs population x workload.sessions_per_user"),
    {"arrival", CFG_T_ENUM, offsetof(tg_params_t, arrival), "poisson", 1, 0, arrival_choices,
     "session arrivals: a Poisson process (open) or a closed population of users"},
    P("rate_per_s", CFG_T_DOUBLE, rate_per_s, "0.05", 1e-9, 1e6, "poisson: session arrival rate, sessions/s"),
    P("population", CFG_T_INT, population, "16", 1, 1e7, "closed: number of users, each running one session at a time"),
    P("session_gap_s", CFG_T_SECONDS, session_gap_s, "60s", 0, 1e9,
      "closed: mean (exponential) gap between a user's sessions, s"),
    P("initial_context_median", CFG_T_INT, initial_context_median, "16384", 1, 1e9,
      "turn 0 context (system prompt, tools, task), tokens: lognormal median"),
    P("initial_context_sigma", CFG_T_DOUBLE, initial_context_sigma, "0.8", 0, 10, "turn 0 context: lognormal sigma"),
    P("shared_prefix_tokens", CFG_T_INT, shared_prefix_tokens, "0", 0, 1e9,
      "leading tokens of every turn-0 context shared by all sessions (reused, not prefilled), tokens"),
    P("turns_median", CFG_T_DOUBLE, turns_median, "40", 1, 1e7, "turns per session: lognormal median"),
    P("turns_sigma", CFG_T_DOUBLE, turns_sigma, "1.0", 0, 10, "turns per session: lognormal sigma"),
    P("turns_max", CFG_T_INT, turns_max, "10000", 1, 4e6, "turns per session: upper bound"),
    P("tool_output_median", CFG_T_INT, tool_output_median, "1500", 1, 1e9,
      "tokens a tool turn appends (heavy-tailed): lognormal median"),
    P("tool_output_sigma", CFG_T_DOUBLE, tool_output_sigma, "1.5", 0, 10, "tool output tokens: lognormal sigma"),
    P("tool_output_max", CFG_T_INT, tool_output_max, "262144", 1, 1e9, "tool output tokens: upper bound"),
    P("user_turn_prob", CFG_T_DOUBLE, user_turn_prob, "0.1", 0, 1,
      "probability that a turn after the first is a user message rather than a tool's output"),
    P("user_message_median", CFG_T_INT, user_message_median, "200", 1, 1e9,
      "tokens a user message appends: lognormal median"),
    P("user_message_sigma", CFG_T_DOUBLE, user_message_sigma, "1.0", 0, 10, "user message tokens: lognormal sigma"),
    P("decode_median", CFG_T_INT, decode_median, "300", 1, 1e9, "tokens decoded per turn: lognormal median"),
    P("decode_sigma", CFG_T_DOUBLE, decode_sigma, "1.0", 0, 10, "decode tokens: lognormal sigma"),
    P("decode_max", CFG_T_INT, decode_max, "32768", 1, 1e9, "decode tokens: upper bound"),
    P("tool_time_median_s", CFG_T_SECONDS, tool_time_median_s, "2s", 0, 1e9,
      "tool latency before a tool turn, s: lognormal median (0: none)"),
    P("tool_time_sigma", CFG_T_DOUBLE, tool_time_sigma, "1.5", 0, 10, "tool latency: lognormal sigma"),
    P("user_think_median_s", CFG_T_SECONDS, user_think_median_s, "30s", 0, 1e9,
      "user think time before a user turn, s: lognormal median (0: none)"),
    P("user_think_sigma", CFG_T_DOUBLE, user_think_sigma, "1.0", 0, 10, "user think time: lognormal sigma"),
    P("max_context_tokens", CFG_T_INT, max_context_tokens, "2Mi", 2, 1e9,
      "a session ends when its context (input + decode) reaches this, tokens; the last turn is cut to fit"),
};
#undef P
#define TG_N (sizeof tg_table / sizeof tg_table[0])

struct tracegen {
    tg_params_t p;
    gsl_rng *rng;
    trace_header_t hdr;
    uint64_t next_id;
    double clock_s; /* Poisson arrivals */
};

void tracegen_params_describe(FILE *fp) { cfg_params_describe(fp, "trace gen", tg_table, TG_N); }

static uint64_t draw_tokens(gsl_rng *r, int64_t median, double sigma, int64_t max)
{
    double x = sigma > 0 ? gsl_ran_lognormal(r, log((double)median), sigma) : (double)median;
    double v = floor(x + 0.5);
    if (!(v >= 1)) v = 1;
    if (v > (double)max) v = (double)max;
    return (uint64_t)v;
}

static int64_t draw_ns(gsl_rng *r, double median_s, double sigma)
{
    if (median_s <= 0) return 0;
    double x = sigma > 0 ? gsl_ran_lognormal(r, log(median_s), sigma) : median_s;
    double ns = floor(x * 1e9 + 0.5);
    if (ns > 1e15) ns = 1e15; /* ~11.6 days: a tail draw, not an outlier to keep */
    return (int64_t)ns;
}

static int emit_config(tracegen_t *g, err_t *e)
{
    char buf[4096];
    size_t n = 0;
    const tg_params_t *p = &g->p;
    for (size_t i = 0; i < TG_N; i++) {
        const cfg_param_t *q = &tg_table[i];
        const char *base = (const char *)p + q->offset;
        int k;
        switch (q->type) {
        case CFG_T_INT: k = snprintf(buf + n, sizeof buf - n, "%s: %lld\n", q->key, (long long)*(const int64_t *)base); break;
        case CFG_T_ENUM: k = snprintf(buf + n, sizeof buf - n, "%s: %s\n", q->key, q->choices[*(const int *)base]); break;
        default: k = snprintf(buf + n, sizeof buf - n, "%s: %.17g\n", q->key, *(const double *)base); break;
        }
        if (k < 0 || (size_t)k >= sizeof buf - n) return err_set(e, ERR_RANGE, "generator config text too long");
        n += (size_t)k;
    }
    return trace_strset(&g->hdr.generator_config, buf, e);
}

int tracegen_new(const cfg_node_t *cfg, const uint64_t *seed, tracegen_t **out, err_t *e)
{
    *out = NULL;
    tracegen_t *g = calloc(1, sizeof *g);
    if (!g) return err_set(e, ERR_NOMEM, "out of memory");
    int rc = cfg_bind(cfg, tg_table, TG_N, &g->p, e);
    if (rc) {
        free(g);
        return rc;
    }
    if (seed) {
        if (*seed > 4294967294ull) {
            free(g);
            return err_set(e, ERR_RANGE, "seed %llu outside [0, 4294967294]", (unsigned long long)*seed);
        }
        g->p.seed = (int64_t)*seed;
    }
    if (g->p.initial_context_median >= g->p.max_context_tokens) {
        long long a = (long long)g->p.initial_context_median, b = (long long)g->p.max_context_tokens;
        free(g);
        return err_set(e, ERR_INVAL, "initial_context_median %lld must be below max_context_tokens %lld", a, b);
    }
    g->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!g->rng) {
        free(g);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    gsl_rng_set(g->rng, (unsigned long)g->p.seed + 1); /* mt19937 maps seed 0 to 4357: keep seeds distinct */
    char made[256];
    trace_made_by(made, sizeof made, "trace gen");
    if ((rc = trace_header_init(&g->hdr, "generator", made, e)) || (rc = emit_config(g, e))) {
        tracegen_free(g);
        return rc;
    }
    g->hdr.has_seed = true;
    g->hdr.seed = (uint64_t)g->p.seed;
    g->hdr.open_loop = false;
    g->hdr.closed_loop = true;
    if (g->p.arrival == ARR_CLOSED) {
        g->hdr.session_arrivals = TRACE_ARRIVALS_CLOSED;
        g->hdr.population = (uint32_t)g->p.population;
    }
    if ((rc = trace_strset(&g->hdr.notes,
                           "synthetic agent sessions (odsim trace gen): closed loop, think times drawn; "
                           "parameters in generator_config", e))) {
        tracegen_free(g);
        return rc;
    }
    *out = g;
    return ERR_OK;
}

const trace_header_t *tracegen_header(const tracegen_t *g) { return &g->hdr; }
uint64_t tracegen_sessions_max(const tracegen_t *g) { return (uint64_t)g->p.sessions; }

void tracegen_contexts(const tracegen_t *g, uint64_t *initial_median, uint64_t *max)
{
    *initial_median = (uint64_t)g->p.initial_context_median;
    *max = (uint64_t)g->p.max_context_tokens;
}

void tracegen_free(tracegen_t *g)
{
    if (!g) return;
    if (g->rng) gsl_rng_free(g->rng);
    trace_header_free(&g->hdr);
    free(g);
}

int tracegen_next_session(tracegen_t *g, trace_session_t *s, err_t *e)
{
    const tg_params_t *p = &g->p;
    if (p->sessions > 0 && g->next_id >= (uint64_t)p->sessions) return 0;
    gsl_rng *r = g->rng;
    trace_session_reset(s);
    s->id = g->next_id++;
    if (p->arrival == ARR_POISSON) {
        g->clock_s += gsl_ran_exponential(r, 1.0 / p->rate_per_s);
        double ns = floor(g->clock_s * 1e9 + 0.5);
        if (ns > (double)TRACE_MAX_TIME_NS) return err_set(e, ERR_RANGE, "session %llu arrives after 100 years",
                                                           (unsigned long long)s->id);
        s->arrival_ns = (int64_t)ns;
    } else {
        s->user = (int64_t)(s->id % (uint64_t)p->population);
        s->start_think_ns = p->session_gap_s > 0 ? (int64_t)floor(gsl_ran_exponential(r, p->session_gap_s) * 1e9 + 0.5) : 0;
        if (s->start_think_ns > (int64_t)1e15) s->start_think_ns = (int64_t)1e15;
    }
    const uint64_t maxc = (uint64_t)p->max_context_tokens;
    double nt = p->turns_sigma > 0 ? gsl_ran_lognormal(r, log(p->turns_median), p->turns_sigma) : p->turns_median;
    nt = floor(nt + 0.5);
    if (!(nt >= 1)) nt = 1;
    if (nt > (double)p->turns_max) nt = (double)p->turns_max;
    uint64_t held = 0;
    for (uint64_t i = 0; i < (uint64_t)nt; i++) {
        trace_turn_t t = trace_turn_blank();
        uint64_t add;
        if (i == 0) {
            add = draw_tokens(r, p->initial_context_median, p->initial_context_sigma, (int64_t)maxc - 1);
            t.kind = TRACE_TURN_USER;
            t.arrival_ns = s->arrival_ns;
        } else {
            bool user = p->user_turn_prob > 0 && gsl_rng_uniform(r) < p->user_turn_prob;
            t.kind = user ? TRACE_TURN_USER : TRACE_TURN_TOOL;
            t.think_ns = user ? draw_ns(r, p->user_think_median_s, p->user_think_sigma)
                              : draw_ns(r, p->tool_time_median_s, p->tool_time_sigma);
            add = user ? draw_tokens(r, p->user_message_median, p->user_message_sigma, (int64_t)maxc)
                       : draw_tokens(r, p->tool_output_median, p->tool_output_sigma, p->tool_output_max);
        }
        uint64_t dec = draw_tokens(r, p->decode_median, p->decode_sigma, p->decode_max);
        if (held + add >= maxc) add = maxc - held - 1; /* leave room for one decoded token */
        if (i > 0 && add == 0) break;
        t.input_tokens = held + add;
        t.prefill_tokens = add;
        if (i == 0 && p->shared_prefix_tokens > 0) {
            uint64_t sh = (uint64_t)p->shared_prefix_tokens < add ? (uint64_t)p->shared_prefix_tokens : add;
            t.shared_prefix_tokens = sh;
            t.shared_prefix_id = 1;
            t.prefill_tokens = add - (sh < add ? sh : add - 1);
        }
        if (t.input_tokens + dec > maxc) dec = maxc - t.input_tokens;
        t.decode_tokens = dec;
        int rc = trace_session_add_turn(s, &t, e);
        if (rc) return rc;
        held = t.input_tokens + t.decode_tokens;
        if (held >= maxc) break;
    }
    return 1;
}

int tracegen_write_file(const cfg_node_t *cfg, const uint64_t *seed, const char *path, uint64_t *n_sessions,
                        uint64_t *n_turns, err_t *e)
{
    uint64_t ns = 0, nt = 0;
    tracegen_t *g;
    int rc = tracegen_new(cfg, seed, &g, e);
    if (rc) return rc;
    if (g->p.sessions == 0) {
        tracegen_free(g);
        return err_set(e, ERR_INVAL, "sessions: 0 (unbounded) cannot be written to a file");
    }
    trace_writer_t *w;
    if ((rc = trace_writer_open(path, &g->hdr, &w, e))) {
        tracegen_free(g);
        return rc;
    }
    trace_session_t s;
    trace_session_init(&s);
    while ((rc = tracegen_next_session(g, &s, e)) == 1) {
        if ((rc = trace_writer_add_session(w, &s, e))) break;
        ns++;
        nt += s.n_turns;
    }
    trace_session_free(&s);
    tracegen_free(g);
    if (rc) {
        trace_writer_abort(w);
        return rc;
    }
    if ((rc = trace_writer_commit(w, e))) return rc;
    if (n_sessions) *n_sessions = ns;
    if (n_turns) *n_turns = nt;
    return ERR_OK;
}
