#include "traces/trace_stats.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "traces/trace_io.h"
#include "traces/trace_sketch.h"

/* Ends of the sessions alive at the latest arrival, a min-heap: sessions come in arrival order (as
 * trace files hold them), so the peak is found in one pass holding only the live sessions. */
typedef struct ends {
    int64_t *v;
    size_t n, cap;
} ends_t;

struct trace_stats {
    trace_sketch_t input, prefill, decode, think, turns, ctx;
    ends_t live;
    uint64_t peak;
    int64_t last_arrival;
    bool any_arrival;
    uint64_t sessions, turns_total, one, forked;
    bool has_span;
    int64_t first, last;
    double prefill_tps, decode_tps; /* assumed service rates; 0: service time excluded */
};

void trace_stats_set_service(trace_stats_t *st, double prefill_tps, double decode_tps)
{
    st->prefill_tps = prefill_tps > 0 ? prefill_tps : 0;
    st->decode_tps = decode_tps > 0 ? decode_tps : 0;
}

int trace_stats_new(trace_stats_t **out, err_t *e)
{
    *out = calloc(1, sizeof **out);
    return *out ? ERR_OK : err_set(e, ERR_NOMEM, "out of memory");
}

void trace_stats_free(trace_stats_t *st)
{
    if (!st) return;
    trace_sketch_t *all[] = {&st->input, &st->prefill, &st->decode, &st->think, &st->turns, &st->ctx};
    for (size_t i = 0; i < 6; i++) trace_sketch_free(all[i]);
    free(st->live.v);
    free(st);
}

static void ends_pop(ends_t *h)
{
    h->v[0] = h->v[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < h->n && h->v[l] < h->v[m]) m = l;
        if (l + 1 < h->n && h->v[l + 1] < h->v[m]) m = l + 1;
        if (m == i) break;
        int64_t t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
}

static int ends_push(ends_t *h, int64_t end, err_t *e)
{
    if (grow_to((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v)) return err_set(e, ERR_NOMEM, "out of memory");
    size_t i = h->n++;
    for (; i > 0 && h->v[(i - 1) / 2] > end; i = (i - 1) / 2) h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = end;
    return ERR_OK;
}

/* A session alive from arrival to end: those ended before it arrives leave (one ending at the very
 * instant it arrives still counts), then it joins. */
static int live_add(trace_stats_t *st, int64_t arrival, int64_t end, err_t *e)
{
    if (st->any_arrival && arrival < st->last_arrival)
        return err_set(e, ERR_INVAL, "session arrivals out of order (%lld ns after %lld ns)", (long long)arrival,
                       (long long)st->last_arrival);
    st->any_arrival = true;
    st->last_arrival = arrival;
    while (st->live.n && st->live.v[0] < arrival) ends_pop(&st->live);
    int rc = ends_push(&st->live, end, e);
    if (!rc && st->live.n > st->peak) st->peak = st->live.n;
    return rc;
}

static void span(trace_stats_t *st, int64_t t)
{
    if (t == TRACE_NONE) return;
    if (!st->has_span || t < st->first) st->first = t;
    if (!st->has_span || t > st->last) st->last = t;
    st->has_span = true;
}

int trace_stats_add(trace_stats_t *st, const trace_session_t *s, err_t *e)
{
    int rc;
    st->sessions++;
    st->turns_total += s->n_turns;
    st->one += s->n_turns == 1;
    st->forked += s->forked_from != TRACE_NONE;
    uint64_t maxctx = 0;
    /* end of the session: turns start at their arrival when known, else after the previous turn's
     * end plus think time; each turn then takes its assumed service time (0 when no rates given) */
    double cursor = s->arrival_ns != TRACE_NONE ? (double)s->arrival_ns : 0;
    for (size_t i = 0; i < s->n_turns; i++) {
        const trace_turn_t *t = &s->turns[i];
        if ((rc = trace_sketch_add(&st->input, (double)t->input_tokens, e)) ||
            (rc = trace_sketch_add(&st->prefill, (double)t->prefill_tokens, e)) ||
            (rc = trace_sketch_add(&st->decode, (double)t->decode_tokens, e)))
            return rc;
        if (t->think_ns != TRACE_NONE && (rc = trace_sketch_add(&st->think, (double)t->think_ns / 1e9, e))) return rc;
        if (t->arrival_ns != TRACE_NONE) {
            span(st, t->arrival_ns);
            if ((double)t->arrival_ns > cursor) cursor = (double)t->arrival_ns;
        } else if (i > 0 && t->think_ns != TRACE_NONE) {
            cursor += (double)t->think_ns;
        }
        if (st->prefill_tps > 0) cursor += 1e9 * (double)t->prefill_tokens / st->prefill_tps;
        if (st->decode_tps > 0) cursor += 1e9 * (double)t->decode_tokens / st->decode_tps;
        if (t->input_tokens + t->decode_tokens > maxctx) maxctx = t->input_tokens + t->decode_tokens;
    }
    int64_t end = cursor > 9e18 ? INT64_MAX : (int64_t)cursor;
    if ((rc = trace_sketch_add(&st->turns, (double)s->n_turns, e)) || (rc = trace_sketch_add(&st->ctx, (double)maxctx, e)))
        return rc;
    if (s->arrival_ns != TRACE_NONE) {
        span(st, s->arrival_ns);
        rc = live_add(st, s->arrival_ns, end, e);
    }
    return rc;
}

static trace_dist_t dist(trace_sketch_t *k)
{
    trace_dist_t r;
    memset(&r, 0, sizeof r);
    r.n = (size_t)k->n;
    if (!k->n) return r;
    r.mean = k->sum / (double)k->n;
    r.min = k->min;
    r.max = k->max;
    r.p50 = trace_sketch_quantile(k, 0.50);
    r.p90 = trace_sketch_quantile(k, 0.90);
    r.p99 = trace_sketch_quantile(k, 0.99);
    return r;
}

int trace_stats_summary(trace_stats_t *st, const trace_header_t *h, trace_summary_t *o, err_t *e)
{
    memset(o, 0, sizeof *o);
    o->sessions = st->sessions;
    o->turns = st->turns_total;
    o->one_turn_sessions = st->one;
    o->forked_sessions = st->forked;
    o->has_span = st->has_span;
    o->first_ns = st->first;
    o->last_ns = st->last;
    o->input_tokens = dist(&st->input);
    o->prefill_tokens = dist(&st->prefill);
    o->decode_tokens = dist(&st->decode);
    o->think_s = dist(&st->think);
    o->turns_per_session = dist(&st->turns);
    o->session_context = dist(&st->ctx);
    if (h && h->session_arrivals == TRACE_ARRIVALS_CLOSED) {
        o->peak_concurrency = h->population;
        o->concurrency_is_population = true;
        return ERR_OK;
    }
    o->peak_concurrency = st->peak;
    return ERR_OK;
}

int trace_stats_file(const char *path, double prefill_tps, double decode_tps, trace_summary_t *out,
                     trace_header_t *hdr, err_t *e)
{
    trace_reader_t *r;
    int rc = trace_reader_open(path, &r, e);
    if (rc) return rc;
    trace_stats_t *st;
    if ((rc = trace_stats_new(&st, e))) {
        trace_reader_close(r);
        return rc;
    }
    trace_stats_set_service(st, prefill_tps, decode_tps);
    trace_session_t s;
    trace_session_init(&s);
    while ((rc = trace_reader_next_session(r, &s, e)) == 1)
        if ((rc = trace_stats_add(st, &s, e))) break;
    trace_session_free(&s);
    if (rc == 0) rc = trace_stats_summary(st, trace_reader_header(r), out, e);
    if (rc == 0 && hdr) {
        const trace_header_t *h = trace_reader_header(r);
        if ((rc = trace_header_init(hdr, h->source, h->made_by, e)) == 0) {
            hdr->open_loop = h->open_loop;
            hdr->closed_loop = h->closed_loop;
            hdr->session_arrivals = h->session_arrivals;
            hdr->population = h->population;
            hdr->scale_factor = h->scale_factor;
            hdr->scale_target_tokens = h->scale_target_tokens;
            hdr->unscaled_max_input_tokens = h->unscaled_max_input_tokens;
            hdr->has_seed = h->has_seed;
            hdr->seed = h->seed;
            if (trace_strset(&hdr->source_file, h->source_file, e) || trace_strset(&hdr->notes, h->notes, e))
                rc = ERR_NOMEM;
            for (size_t i = 0; !rc && i < h->n_params; i++)
                rc = trace_header_add(hdr, false, h->params[i].key, e, "%s", h->params[i].value);
            for (size_t i = 0; !rc && i < h->n_report; i++)
                rc = trace_header_add(hdr, true, h->report[i].key, e, "%s", h->report[i].value);
        }
    }
    trace_stats_free(st);
    trace_reader_close(r);
    return rc;
}

static void pdist(FILE *fp, const char *name, const trace_dist_t *d, const char *unit)
{
    if (!d->n) {
        fprintf(fp, "  %-22s (none)\n", name);
        return;
    }
    fprintf(fp, "  %-22s n %-9zu mean %-12.6g p50 %-10.6g p90 %-10.6g p99 %-10.6g min %-8.6g max %.6g %s\n", name, d->n,
            d->mean, d->p50, d->p90, d->p99, d->min, d->max, unit);
}

void trace_summary_print(FILE *fp, const char *path, const trace_header_t *h, const trace_summary_t *s)
{
    fprintf(fp, "%s\n", path);
    fprintf(fp, "  source                 %s%s%s\n", h->source, h->source_file ? " " : "", h->source_file ? h->source_file : "");
    fprintf(fp, "  made by                %s\n", h->made_by);
    fprintf(fp, "  replay                 %s%s%s\n", h->open_loop ? "open-loop" : "", h->open_loop && h->closed_loop ? " + " : "",
            h->closed_loop ? "closed-loop" : "");
    if (h->session_arrivals == TRACE_ARRIVALS_CLOSED) fprintf(fp, "  session arrivals       closed population of %u users\n", h->population);
    else fprintf(fp, "  session arrivals       open (recorded or drawn times)\n");
    if (h->scale_factor != 1.0)
        fprintf(fp, "  scaling                contexts x%.6g (largest input before: %llu tokens)\n", h->scale_factor,
                (unsigned long long)h->unscaled_max_input_tokens);
    if (h->has_seed) fprintf(fp, "  seed                   %llu\n", (unsigned long long)h->seed);
    for (size_t i = 0; i < h->n_params; i++) fprintf(fp, "  param  %-15s %s\n", h->params[i].key, h->params[i].value);
    for (size_t i = 0; i < h->n_report; i++) fprintf(fp, "  import %-15s %s\n", h->report[i].key, h->report[i].value);
    fprintf(fp, "  sessions               %llu (one-turn %llu, forked %llu)\n", (unsigned long long)s->sessions,
            (unsigned long long)s->one_turn_sessions, (unsigned long long)s->forked_sessions);
    fprintf(fp, "  turns                  %llu\n", (unsigned long long)s->turns);
    if (s->has_span)
        fprintf(fp, "  time span              %.3f s (%.3f .. %.3f s)\n", (double)(s->last_ns - s->first_ns) / 1e9,
                (double)s->first_ns / 1e9, (double)s->last_ns / 1e9);
    else
        fprintf(fp, "  time span              (no arrival times)\n");
    pdist(fp, "context (input) tokens", &s->input_tokens, "per turn");
    pdist(fp, "prefill tokens", &s->prefill_tokens, "per turn");
    pdist(fp, "decode tokens", &s->decode_tokens, "per turn");
    pdist(fp, "think time", &s->think_s, "s");
    pdist(fp, "turns per session", &s->turns_per_session, "");
    pdist(fp, "session peak context", &s->session_context, "tokens (input + decode)");
    fprintf(fp, "  peak concurrency       %llu sessions%s\n", (unsigned long long)s->peak_concurrency,
            s->concurrency_is_population ? " (the population)"
                                         : " (arrival to end of last turn; see trace_stats.h)");
}

static json_t *jdist(const trace_dist_t *d)
{
    return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "n", (json_int_t)d->n, "mean", d->mean, "min", d->min, "p50", d->p50,
                     "p90", d->p90, "p99", d->p99, "max", d->max);
}

json_t *trace_summary_json(const char *path, const trace_header_t *h, const trace_summary_t *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "source", json_string(h->source));
    if (h->source_file) json_object_set_new(o, "source_file", json_string(h->source_file));
    json_object_set_new(o, "made_by", json_string(h->made_by));
    json_object_set_new(o, "open_loop", json_boolean(h->open_loop));
    json_object_set_new(o, "closed_loop", json_boolean(h->closed_loop));
    json_object_set_new(o, "session_arrivals",
                        json_string(h->session_arrivals == TRACE_ARRIVALS_CLOSED ? "closed_population" : "open"));
    if (h->session_arrivals == TRACE_ARRIVALS_CLOSED) json_object_set_new(o, "population", json_integer(h->population));
    json_object_set_new(o, "scale_factor", json_real(h->scale_factor));
    if (h->has_seed) json_object_set_new(o, "seed", json_integer((json_int_t)h->seed));
    json_t *p = json_object(), *r = json_object();
    for (size_t i = 0; i < h->n_params; i++) json_object_set_new(p, h->params[i].key, json_string(h->params[i].value));
    for (size_t i = 0; i < h->n_report; i++) json_object_set_new(r, h->report[i].key, json_string(h->report[i].value));
    json_object_set_new(o, "params", p);
    json_object_set_new(o, "import_report", r);
    json_object_set_new(o, "sessions", json_integer((json_int_t)s->sessions));
    json_object_set_new(o, "one_turn_sessions", json_integer((json_int_t)s->one_turn_sessions));
    json_object_set_new(o, "forked_sessions", json_integer((json_int_t)s->forked_sessions));
    json_object_set_new(o, "turns", json_integer((json_int_t)s->turns));
    if (s->has_span) {
        json_object_set_new(o, "time_span_s", json_real((double)(s->last_ns - s->first_ns) / 1e9));
        json_object_set_new(o, "first_arrival_s", json_real((double)s->first_ns / 1e9));
        json_object_set_new(o, "last_arrival_s", json_real((double)s->last_ns / 1e9));
    } else {
        json_object_set_new(o, "time_span_s", json_null());
    }
    json_object_set_new(o, "input_tokens", jdist(&s->input_tokens));
    json_object_set_new(o, "prefill_tokens", jdist(&s->prefill_tokens));
    json_object_set_new(o, "decode_tokens", jdist(&s->decode_tokens));
    json_object_set_new(o, "think_s", jdist(&s->think_s));
    json_object_set_new(o, "turns_per_session", jdist(&s->turns_per_session));
    json_object_set_new(o, "session_peak_context_tokens", jdist(&s->session_context));
    json_object_set_new(o, "peak_concurrency", json_integer((json_int_t)s->peak_concurrency));
    json_object_set_new(o, "peak_concurrency_rule",
                        json_string(s->concurrency_is_population ? "population"
                                                                 : "arrival to end of last turn (turn arrivals, think times and the assumed service rates)"));
    return o;
}
