/* TraceLab agent-session JSONL importer: real agent loops, closed loop (rule in import.h). */
#include <stdlib.h>
#include <string.h>

#include "traces/import_int.h"

typedef struct tl_row {
    char *key;
    int64_t round;
    uint64_t in, prefix, added, out;
    int64_t start_ns, end_ns;
    trace_turn_kind_t kind;
    int line;
} tl_row_t;

static int cmp_key_round(const void *a, const void *b)
{
    const tl_row_t *x = *(tl_row_t *const *)a, *y = *(tl_row_t *const *)b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return (x->round > y->round) - (x->round < y->round);
}

typedef struct tl_sess {
    tl_row_t **rows;
    size_t n;
} tl_sess_t;

static int cmp_sess(const void *a, const void *b)
{
    const tl_sess_t *x = a, *y = b;
    int64_t s = x->rows[0]->start_ns, t = y->rows[0]->start_ns;
    if (s != t) return (s > t) - (s < t);
    return strcmp(x->rows[0]->key, y->rows[0]->key);
}

static int parse_row(const char *name, int line, json_t *j, tl_row_t *r, err_t *e)
{
    json_t *v = json_object_get(j, "session_id");
    if (!v) return err_set(e, ERR_PARSE, "%s:%d: missing field 'session_id'", name, line);
    if (!json_is_string(v) || json_string_length(v) == 0)
        return err_set(e, ERR_PARSE, "%s:%d: field 'session_id': not a non-empty string", name, line);
    v = json_object_get(j, "round_index");
    if (!v) return err_set(e, ERR_PARSE, "%s:%d: missing field 'round_index'", name, line);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return err_set(e, ERR_PARSE, "%s:%d: field 'round_index': not a non-negative integer", name, line);
    r->round = (int64_t)json_integer_value(v);
    int rc;
    if ((rc = import_json_tokens(name, line, j, "input_tokens_total", &r->in, e)) ||
        (rc = import_json_tokens(name, line, j, "prefix_tokens", &r->prefix, e)) ||
        (rc = import_json_tokens(name, line, j, "newly_append_tokens", &r->added, e)) ||
        (rc = import_json_tokens(name, line, j, "output_tokens", &r->out, e)))
        return rc;
    if (r->prefix + r->added != r->in)
        return err_set(e, ERR_PARSE, "%s:%d: prefix_tokens %llu + newly_append_tokens %llu != input_tokens_total %llu",
                       name, line, (unsigned long long)r->prefix, (unsigned long long)r->added,
                       (unsigned long long)r->in);
    json_t *ev = json_object_get(j, "timing_events");
    if (!ev) return err_set(e, ERR_PARSE, "%s:%d: missing field 'timing_events'", name, line);
    if (!json_is_array(ev) || json_array_size(ev) == 0)
        return err_set(e, ERR_PARSE, "%s:%d: field 'timing_events': not a non-empty array", name, line);
    int64_t first = INT64_MAX, last = INT64_MIN, input_at = INT64_MIN;
    bool user = false, tool = false;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *x = json_array_get(ev, i);
        json_t *ty = json_is_object(x) ? json_object_get(x, "event_type") : NULL;
        json_t *ts = json_is_object(x) ? json_object_get(x, "timestamp") : NULL;
        if (!json_is_string(ty) || !json_is_string(ts))
            return err_set(e, ERR_PARSE, "%s:%d: timing_events[%zu]: needs string 'event_type' and 'timestamp'", name,
                           line, i);
        int64_t t;
        int drc = import_parse_datetime(json_string_value(ts), json_string_length(ts), &t);
        if (drc == ERR_RANGE)
            return err_set(e, ERR_PARSE, "%s:%d: timing_events[%zu]: timestamp '%.40s' is outside the years %d-%d", name,
                           line, i, json_string_value(ts), IMPORT_YEAR_MIN, IMPORT_YEAR_MAX);
        if (drc)
            return err_set(e, ERR_PARSE, "%s:%d: timing_events[%zu]: bad timestamp '%.40s' (want ISO-8601 UTC)", name,
                           line, i, json_string_value(ts));
        const char *type = json_string_value(ty);
        bool is_user = !strcmp(type, "user_message"), is_tool = !strcmp(type, "tool_result");
        user |= is_user;
        tool |= is_tool;
        if ((is_user || is_tool) && t > input_at) input_at = t;
        if (t < first) first = t;
        if (t > last) last = t;
    }
    r->start_ns = input_at != INT64_MIN ? input_at : first;
    r->end_ns = last;
    r->kind = user ? TRACE_TURN_USER : tool ? TRACE_TURN_TOOL : TRACE_TURN_UNKNOWN;
    return ERR_OK;
}

int import_tracelab(const char *name, const char *buf, size_t len, const trace_import_opts_t *o, trace_t *t,
                    err_t *e)
{
    (void)o;
    tl_row_t *rows = NULL;
    tl_row_t **idx = NULL;
    tl_sess_t *ss = NULL;
    int *line_of = NULL;
    size_t n = 0, cap = 0, nsess = 0, clamped_gaps = 0, clamped_arrivals = 0;
    int rc = ERR_OK;
    line_iter_t it;
    line_iter_init(&it, buf, len);
    const char *s;
    size_t sl;
    int line;
    while (line_iter_next(&it, &s, &sl, &line)) {
        json_t *j;
        if ((rc = import_json_line(name, line, s, sl, &j, e))) goto out;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            tl_row_t *nr = realloc(rows, cap * sizeof *nr);
            if (!nr) {
                json_decref(j);
                rc = err_set(e, ERR_NOMEM, "out of memory");
                goto out;
            }
            rows = nr;
        }
        tl_row_t *r = &rows[n];
        memset(r, 0, sizeof *r);
        r->line = line;
        rc = parse_row(name, line, j, r, e);
        if (!rc && !(r->key = strdup(json_string_value(json_object_get(j, "session_id")))))
            rc = err_set(e, ERR_NOMEM, "out of memory");
        json_decref(j);
        if (rc) goto out;
        n++;
    }
    if (n == 0) {
        rc = err_set(e, ERR_PARSE, "%s: no rows", name);
        goto out;
    }
    idx = malloc(n * sizeof *idx);
    ss = calloc(n, sizeof *ss);
    line_of = malloc(n * sizeof *line_of);
    if (!idx || !ss || !line_of) {
        rc = err_set(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) idx[i] = &rows[i];
    qsort(idx, n, sizeof *idx, cmp_key_round);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && !strcmp(idx[i]->key, idx[i - 1]->key)) {
            if (idx[i]->round == idx[i - 1]->round) {
                rc = err_set(e, ERR_PARSE, "%s:%d: session '%.60s' round %lld also on line %d", name, idx[i]->line,
                             idx[i]->key, (long long)idx[i]->round, idx[i - 1]->line);
                goto out;
            }
            ss[nsess - 1].n++;
        } else {
            ss[nsess].rows = &idx[i];
            ss[nsess].n = 1;
            nsess++;
        }
    }
    qsort(ss, nsess, sizeof *ss, cmp_sess);
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < nsess; i++)
        if (ss[i].rows[0]->start_ns < t0) t0 = ss[i].rows[0]->start_ns;
    for (size_t i = 0; i < nsess; i++) {
        trace_session_t *se;
        if ((rc = trace_add_session(t, &se, e))) goto out;
        se->id = i;
        line_of[i] = ss[i].rows[0]->line;
        if ((rc = trace_strset(&se->key, ss[i].rows[0]->key, e))) goto out;
        int64_t prev_arr = 0;
        for (size_t k = 0; k < ss[i].n; k++) {
            const tl_row_t *r = ss[i].rows[k];
            trace_turn_t tu = trace_turn_blank();
            int64_t arr;
            if (!import_span_ns(t0, r->start_ns, &arr)) {
                rc = err_set(e, ERR_PARSE, "%s:%d: timestamps span more than 100 years", name, r->line);
                goto out;
            }
            if (k > 0 && arr < prev_arr) {
                arr = prev_arr;
                clamped_arrivals++;
            }
            tu.arrival_ns = arr;
            prev_arr = arr;
            if (k > 0) {
                /* start - end when positive: both lie within 100 years of t0 */
                int64_t end = ss[i].rows[k - 1]->end_ns, gap = r->start_ns > end ? r->start_ns - end : 0;
                if (r->start_ns < end) clamped_gaps++;
                tu.think_ns = gap;
            } else {
                se->arrival_ns = arr;
                tu.shared_prefix_tokens = r->prefix;
            }
            tu.input_tokens = r->in;
            tu.prefill_tokens = r->added;
            tu.decode_tokens = r->out;
            tu.kind = r->kind;
            if ((rc = trace_session_add_turn(se, &tu, e))) goto out;
        }
    }
    t->hdr.open_loop = true;
    t->hdr.closed_loop = true;
    t->hdr.session_arrivals = TRACE_ARRIVALS_OPEN;
    if ((rc = import_report_common(t, n, e)) ||
        (rc = trace_header_add(&t->hdr, true, "negative_gaps_clamped", e, "%zu", clamped_gaps)) ||
        (rc = trace_header_add(&t->hdr, true, "arrivals_clamped", e, "%zu", clamped_arrivals)) ||
        (rc = trace_strset(&t->hdr.notes,
                           "TraceLab: turn ready at its last user_message/tool_result event, ends at its last event; "
                           "think_ns = ready - previous end (tool latency or user time); open and closed loop", e)) ||
        (rc = import_check(name, t, line_of, e)))
        goto out;
out:
    for (size_t i = 0; i < n; i++) free(rows[i].key);
    free(rows);
    free(idx);
    free(ss);
    free(line_of);
    return rc;
}
