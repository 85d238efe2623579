#include "traces/trace.h"
#include "common/version.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ODSIM_VERSION
#define ODSIM_VERSION "0.0.0"
#endif

int trace_strset(char **dst, const char *src, err_t *e)
{
    char *c = NULL;
    if (src && !(c = strdup(src))) return err_set(e, ERR_NOMEM, "out of memory");
    free(*dst);
    *dst = c;
    return ERR_OK;
}

int trace_header_init(trace_header_t *h, const char *source, const char *made_by, err_t *e)
{
    memset(h, 0, sizeof *h);
    h->format_version = TRACE_FORMAT_VERSION;
    h->scale_factor = 1.0;
    h->session_arrivals = TRACE_ARRIVALS_OPEN;
    if (trace_strset(&h->source, source, e) || trace_strset(&h->made_by, made_by, e)) {
        trace_header_free(h);
        return ERR_NOMEM;
    }
    return ERR_OK;
}

static void kv_free(trace_kv_t *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

void trace_header_free(trace_header_t *h)
{
    free(h->source);
    free(h->source_file);
    free(h->made_by);
    free(h->generator_config);
    free(h->notes);
    kv_free(h->params, h->n_params);
    kv_free(h->report, h->n_report);
    memset(h, 0, sizeof *h);
}

int trace_header_add(trace_header_t *h, bool report, const char *key, err_t *e, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    trace_kv_t **arr = report ? &h->report : &h->params;
    size_t *n = report ? &h->n_report : &h->n_params;
    trace_kv_t *na = realloc(*arr, (*n + 1) * sizeof **arr);
    if (!na) return err_set(e, ERR_NOMEM, "out of memory");
    *arr = na;
    na[*n].key = strdup(key);
    na[*n].value = strdup(buf);
    if (!na[*n].key || !na[*n].value) {
        free(na[*n].key);
        free(na[*n].value);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    (*n)++;
    return ERR_OK;
}

const char *trace_header_get(const trace_header_t *h, bool report, const char *key)
{
    const trace_kv_t *a = report ? h->report : h->params;
    size_t n = report ? h->n_report : h->n_params;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(a[i].key, key)) return a[i].value;
    return NULL;
}

void trace_made_by(char *buf, size_t len, const char *what)
{
    snprintf(buf, len, "odsim %s (%s)%s%s", ODSIM_VERSION, odsim_git_rev, what ? " " : "", what ? what : "");
}

int trace_header_check(const trace_header_t *h, err_t *e)
{
    if (h->format_version != TRACE_FORMAT_VERSION)
        return err_set(e, ERR_PARSE, "header: format version %u, this odsim reads %u", h->format_version,
                       TRACE_FORMAT_VERSION);
    if (!h->source || !*h->source) return err_set(e, ERR_PARSE, "header: no source");
    if (!h->made_by) return err_set(e, ERR_PARSE, "header: no made_by");
    if (!h->open_loop && !h->closed_loop)
        return err_set(e, ERR_PARSE, "header: supports neither open- nor closed-loop replay");
    if (h->session_arrivals != TRACE_ARRIVALS_OPEN && h->session_arrivals != TRACE_ARRIVALS_CLOSED)
        return err_set(e, ERR_PARSE, "header: unknown session arrival process %d", (int)h->session_arrivals);
    if (h->session_arrivals == TRACE_ARRIVALS_CLOSED && h->population == 0)
        return err_set(e, ERR_PARSE, "header: closed population of 0 users");
    if (h->session_arrivals == TRACE_ARRIVALS_CLOSED && h->open_loop)
        return err_set(e, ERR_PARSE, "header: a closed-population trace cannot replay open loop");
    if (!(h->scale_factor >= 1.0) || !isfinite(h->scale_factor) || h->scale_factor > 1e9)
        return err_set(e, ERR_PARSE, "header: scale factor %g not in [1, 1e9]", h->scale_factor);
    return ERR_OK;
}

/* ---- sessions ---- */

trace_turn_t trace_turn_blank(void)
{
    trace_turn_t t;
    memset(&t, 0, sizeof t);
    t.arrival_ns = TRACE_NONE;
    t.think_ns = TRACE_NONE;
    return t;
}

void trace_session_init(trace_session_t *s)
{
    memset(s, 0, sizeof *s);
    s->arrival_ns = s->user = s->start_think_ns = s->forked_from = TRACE_NONE;
}

void trace_session_reset(trace_session_t *s)
{
    trace_turn_t *turns = s->turns;
    size_t cap = s->cap_turns;
    free(s->key);
    trace_session_init(s);
    s->turns = turns;
    s->cap_turns = cap;
}

void trace_session_free(trace_session_t *s)
{
    free(s->key);
    free(s->turns);
    trace_session_init(s);
}

int trace_session_add_turn(trace_session_t *s, const trace_turn_t *t, err_t *e)
{
    if (s->n_turns >= TRACE_MAX_TURNS)
        return err_set(e, ERR_RANGE, "session %llu: more than %llu turns", (unsigned long long)s->id,
                       TRACE_MAX_TURNS);
    if (s->n_turns == s->cap_turns) {
        size_t nc = s->cap_turns ? 2 * s->cap_turns : 8;
        trace_turn_t *nt = realloc(s->turns, nc * sizeof *nt);
        if (!nt) return err_set(e, ERR_NOMEM, "out of memory");
        s->turns = nt;
        s->cap_turns = nc;
    }
    s->turns[s->n_turns++] = *t;
    return ERR_OK;
}

static int time_ok(int64_t t) { return t >= 0 && t <= TRACE_MAX_TIME_NS; }

int trace_session_check(const trace_header_t *h, const trace_session_t *s, trace_check_state_t *st,
                        err_t *e)
{
    unsigned long long id = (unsigned long long)s->id;
    if (st->any && s->id <= st->last_id)
        return err_set(e, ERR_PARSE, "session %llu: id not above the previous session's (%llu)", id,
                       (unsigned long long)st->last_id);
    if (s->n_turns == 0) return err_set(e, ERR_PARSE, "session %llu: no turns", id);
    if (s->n_turns > TRACE_MAX_TURNS)
        return err_set(e, ERR_PARSE, "session %llu: %zu turns, more than %llu", id, s->n_turns, TRACE_MAX_TURNS);
    if (s->forked_from != TRACE_NONE) {
        if (s->forked_from < 0 || (uint64_t)s->forked_from >= s->id)
            return err_set(e, ERR_PARSE, "session %llu: forked from session %lld, not an earlier one", id,
                           (long long)s->forked_from);
        if (s->fork_tokens > TRACE_MAX_TOKENS)
            return err_set(e, ERR_PARSE, "session %llu: fork_tokens %llu absurd (max %llu)", id,
                           (unsigned long long)s->fork_tokens, TRACE_MAX_TOKENS);
    } else if (s->fork_tokens) {
        return err_set(e, ERR_PARSE, "session %llu: fork_tokens without forked_from", id);
    }
    if (h->session_arrivals == TRACE_ARRIVALS_OPEN) {
        if (s->arrival_ns == TRACE_NONE) return err_set(e, ERR_PARSE, "session %llu: no arrival time", id);
        if (!time_ok(s->arrival_ns))
            return err_set(e, ERR_PARSE, "session %llu: arrival %lld ns out of range", id, (long long)s->arrival_ns);
        if (st->any && s->arrival_ns < st->last_arrival_ns)
            return err_set(e, ERR_PARSE, "session %llu: arrives at %lld ns, before the previous session (%lld ns)",
                           id, (long long)s->arrival_ns, (long long)st->last_arrival_ns);
    } else {
        if (s->arrival_ns != TRACE_NONE)
            return err_set(e, ERR_PARSE, "session %llu: arrival time in a closed-population trace", id);
        if (s->user < 0 || s->user >= (int64_t)h->population)
            return err_set(e, ERR_PARSE, "session %llu: user %lld not below the population %u", id,
                           (long long)s->user, h->population);
        if (s->start_think_ns != TRACE_NONE && !time_ok(s->start_think_ns))
            return err_set(e, ERR_PARSE, "session %llu: start think time %lld ns out of range", id,
                           (long long)s->start_think_ns);
    }
    int64_t prev_arr = s->arrival_ns;
    for (size_t i = 0; i < s->n_turns; i++) {
        const trace_turn_t *t = &s->turns[i];
        if (t->input_tokens > TRACE_MAX_TOKENS || t->prefill_tokens > TRACE_MAX_TOKENS ||
            t->decode_tokens > TRACE_MAX_TOKENS || t->shared_prefix_tokens > TRACE_MAX_TOKENS)
            return err_set(e, ERR_PARSE, "session %llu turn %zu: token count absurd (max %llu)", id, i,
                           TRACE_MAX_TOKENS);
        if (t->prefill_tokens > t->input_tokens)
            return err_set(e, ERR_PARSE, "session %llu turn %zu: prefill_tokens %llu > input_tokens %llu", id, i,
                           (unsigned long long)t->prefill_tokens, (unsigned long long)t->input_tokens);
        if (t->shared_prefix_tokens > t->input_tokens)
            return err_set(e, ERR_PARSE, "session %llu turn %zu: shared_prefix_tokens %llu > input_tokens %llu", id,
                           i, (unsigned long long)t->shared_prefix_tokens, (unsigned long long)t->input_tokens);
        if (t->kind != TRACE_TURN_UNKNOWN && t->kind != TRACE_TURN_USER && t->kind != TRACE_TURN_TOOL)
            return err_set(e, ERR_PARSE, "session %llu turn %zu: unknown turn kind %d", id, i, (int)t->kind);
        uint64_t reused = t->input_tokens - t->prefill_tokens;
        if (i == 0) {
            uint64_t avail = t->shared_prefix_tokens > s->fork_tokens ? t->shared_prefix_tokens : s->fork_tokens;
            if (reused > avail)
                return err_set(e, ERR_PARSE,
                               "session %llu turn 0: reuses %llu tokens but shares only %llu (shared prefix or fork)",
                               id, (unsigned long long)reused, (unsigned long long)avail);
        } else {
            uint64_t held = s->turns[i - 1].input_tokens + s->turns[i - 1].decode_tokens;
            if (reused > held)
                return err_set(e, ERR_PARSE,
                               "session %llu turn %zu: reuses %llu tokens but the session held %llu after turn %zu",
                               id, i, (unsigned long long)reused, (unsigned long long)held, i - 1);
        }
        if (t->arrival_ns != TRACE_NONE) {
            if (!time_ok(t->arrival_ns))
                return err_set(e, ERR_PARSE, "session %llu turn %zu: arrival %lld ns out of range", id, i,
                               (long long)t->arrival_ns);
            if (prev_arr != TRACE_NONE && t->arrival_ns < prev_arr)
                return err_set(e, ERR_PARSE, "session %llu turn %zu: arrives at %lld ns, before %lld ns", id, i,
                               (long long)t->arrival_ns, (long long)prev_arr);
            prev_arr = t->arrival_ns;
        } else if (h->open_loop) {
            return err_set(e, ERR_PARSE, "session %llu turn %zu: no arrival time in an open-loop trace", id, i);
        }
        if (t->think_ns != TRACE_NONE) {
            if (!time_ok(t->think_ns))
                return err_set(e, ERR_PARSE, "session %llu turn %zu: think time %lld ns out of range", id, i,
                               (long long)t->think_ns);
        } else if (h->closed_loop && i > 0) {
            return err_set(e, ERR_PARSE, "session %llu turn %zu: no think time in a closed-loop trace", id, i);
        }
    }
    if (h->session_arrivals == TRACE_ARRIVALS_OPEN && s->turns[0].arrival_ns != TRACE_NONE &&
        s->turns[0].arrival_ns != s->arrival_ns)
        return err_set(e, ERR_PARSE, "session %llu: arrival %lld ns differs from its first turn's %lld ns", id,
                       (long long)s->arrival_ns, (long long)s->turns[0].arrival_ns);
    st->any = true;
    st->last_id = s->id;
    if (h->session_arrivals == TRACE_ARRIVALS_OPEN) st->last_arrival_ns = s->arrival_ns;
    st->sessions++;
    st->turns += s->n_turns;
    return ERR_OK;
}

/* ---- whole traces ---- */

void trace_init(trace_t *t) { memset(t, 0, sizeof *t); }

void trace_free(trace_t *t)
{
    for (size_t i = 0; i < t->n_sessions; i++) trace_session_free(&t->sessions[i]);
    free(t->sessions);
    trace_header_free(&t->hdr);
    memset(t, 0, sizeof *t);
}

int trace_add_session(trace_t *t, trace_session_t **out, err_t *e)
{
    if (t->n_sessions == t->cap_sessions) {
        size_t nc = t->cap_sessions ? 2 * t->cap_sessions : 64;
        trace_session_t *ns = realloc(t->sessions, nc * sizeof *ns);
        if (!ns) return err_set(e, ERR_NOMEM, "out of memory");
        t->sessions = ns;
        t->cap_sessions = nc;
    }
    trace_session_t *s = &t->sessions[t->n_sessions++];
    trace_session_init(s);
    *out = s;
    return ERR_OK;
}

uint64_t trace_max_input(const trace_t *t)
{
    uint64_t m = 0;
    for (size_t i = 0; i < t->n_sessions; i++)
        for (size_t j = 0; j < t->sessions[i].n_turns; j++)
            if (t->sessions[i].turns[j].input_tokens > m) m = t->sessions[i].turns[j].input_tokens;
    return m;
}

static int scale_count(double k, uint64_t x, uint64_t *out, err_t *e)
{
    double v = floor(k * (double)x);
    if (v > (double)TRACE_MAX_TOKENS)
        return err_set(e, ERR_RANGE, "scaling %llu tokens by %g gives more than %llu", (unsigned long long)x, k,
                       TRACE_MAX_TOKENS);
    *out = (uint64_t)v;
    return ERR_OK;
}

typedef struct scale_orig {
    uint64_t input, prefill, shared;
} scale_orig_t;

/* Scales from the saved originals by k; *max receives the largest scaled input. */
static int scale_apply(trace_t *t, const scale_orig_t *orig, const uint64_t *fork, double k, uint64_t *max, err_t *e)
{
    size_t q = 0;
    *max = 0;
    for (size_t i = 0; i < t->n_sessions; i++) {
        trace_session_t *s = &t->sessions[i];
        int rc;
        if ((rc = scale_count(k, fork[i], &s->fork_tokens, e))) return rc;
        uint64_t held = 0; /* scaled input + decode of the previous turn */
        for (size_t j = 0; j < s->n_turns; j++, q++) {
            trace_turn_t *tu = &s->turns[j];
            uint64_t reused = orig[q].input - orig[q].prefill, r2 = 0, p2 = 0, sh2 = 0;
            if ((rc = scale_count(k, reused, &r2, e)) || (rc = scale_count(k, orig[q].prefill, &p2, e)) ||
                (rc = scale_count(k, orig[q].shared, &sh2, e)))
                return rc;
            if (j > 0 && r2 > held) r2 = held;
            tu->prefill_tokens = p2;
            tu->input_tokens = r2 + p2;
            tu->shared_prefix_tokens = sh2 < tu->input_tokens ? sh2 : tu->input_tokens;
            held = tu->input_tokens + tu->decode_tokens;
            if (tu->input_tokens > *max) *max = tu->input_tokens;
        }
    }
    return ERR_OK;
}

int trace_scale(trace_t *t, double k, uint64_t target_tokens, err_t *e)
{
    uint64_t maxin = trace_max_input(t);
    if (target_tokens) {
        if (target_tokens > TRACE_MAX_TOKENS)
            return err_set(e, ERR_RANGE, "--scale-to %llu: more than %llu tokens", (unsigned long long)target_tokens,
                           TRACE_MAX_TOKENS);
        if (maxin == 0) return err_set(e, ERR_INVAL, "--scale-to: the trace has no context to stretch");
        k = (double)target_tokens / (double)maxin;
        if (k < 1.0)
            return err_set(e, ERR_INVAL,
                           "--scale-to %llu is below the trace's largest context (%llu tokens): scaling only stretches",
                           (unsigned long long)target_tokens, (unsigned long long)maxin);
    }
    if (!isfinite(k) || k < 1.0 || k > 1e9)
        return err_set(e, ERR_INVAL, "scale factor %g: must be in [1, 1e9]", k);
    size_t nturns = 0;
    for (size_t i = 0; i < t->n_sessions; i++) nturns += t->sessions[i].n_turns;
    scale_orig_t *orig = malloc((nturns ? nturns : 1) * sizeof *orig);
    uint64_t *fork = malloc((t->n_sessions ? t->n_sessions : 1) * sizeof *fork);
    if (!orig || !fork) {
        free(orig);
        free(fork);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0, q = 0; i < t->n_sessions; i++) {
        fork[i] = t->sessions[i].fork_tokens;
        for (size_t j = 0; j < t->sessions[i].n_turns; j++, q++) {
            const trace_turn_t *tu = &t->sessions[i].turns[j];
            orig[q] = (scale_orig_t){tu->input_tokens, tu->prefill_tokens, tu->shared_prefix_tokens};
        }
    }
    uint64_t got;
    int rc = scale_apply(t, orig, fork, k, &got, e);
    if (!rc && target_tokens && got < target_tokens) {
        /* continuations keep their (unscaled) decode tokens and counts are floored, so the largest
         * context can fall short: find the largest factor whose largest context is <= the target */
        double lo = k, hi = k * (double)target_tokens / (double)(got ? got : 1) + 1e-9;
        if (hi > 1e9) hi = 1e9;
        for (int it = 0; it < 64 && !rc; it++) {
            double mid = 0.5 * (lo + hi);
            if ((rc = scale_apply(t, orig, fork, mid, &got, e))) break;
            if (got <= target_tokens) lo = mid;
            else hi = mid;
        }
        k = lo;
        if (!rc) rc = scale_apply(t, orig, fork, k, &got, e);
    }
    free(orig);
    free(fork);
    if (rc) return rc;
    t->hdr.scale_factor = k * t->hdr.scale_factor;
    t->hdr.scale_target_tokens = target_tokens;
    if (!t->hdr.unscaled_max_input_tokens) t->hdr.unscaled_max_input_tokens = maxin;
    char note[600];
    snprintf(note, sizeof note,
             "contexts stretched x%.9g%s: prefill, reused-prefix, shared-prefix and fork tokens multiplied by the "
             "factor (floored; a reused prefix capped at what the session held, so continuations stay exact); "
             "decode tokens, arrival and think times and turn structure as recorded; largest input %llu tokens "
             "before, %llu after",
             k, target_tokens ? " (--scale-to)" : "", (unsigned long long)maxin, (unsigned long long)got);
    return trace_strset(&t->hdr.notes, note, e);
}
