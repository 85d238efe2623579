/* Azure LLM inference trace CSV importer (TIMESTAMP, ContextTokens, GeneratedTokens): one-turn
 * sessions, open loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import_int.h"

#define AZ_MAX_COLS 64

static int split(const char *s, size_t n, const char **f, size_t *fl, int *nf)
{
    int k = 0;
    size_t st = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == ',') {
            if (k == AZ_MAX_COLS) return -1;
            f[k] = s + st;
            fl[k] = i - st;
            k++;
            st = i + 1;
        }
    }
    *nf = k;
    return 0;
}

static int parse_count(const char *name, int line, const char *col, const char *s, size_t n, uint64_t *out, err_t *e)
{
    if (n > 0 && s[0] == '-')
        return err_set(e, ERR_PARSE, "%s:%d: column %s: negative token count '%.*s'", name, line, col, (int)(n > 40 ? 40 : n), s);
    if (n == 0) return err_set(e, ERR_PARSE, "%s:%d: column %s: empty field", name, line, col);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return err_set(e, ERR_PARSE, "%s:%d: column %s: bad field '%.*s': not a token count", name, line, col,
                           (int)(n > 40 ? 40 : n), s);
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > TRACE_MAX_TOKENS)
            return err_set(e, ERR_PARSE, "%s:%d: column %s: absurd token count '%.*s' (max %llu)", name, line, col,
                           (int)(n > 40 ? 40 : n), s, TRACE_MAX_TOKENS);
    }
    *out = v;
    return ERR_OK;
}

int import_azure(const char *name, const char *buf, size_t len, const trace_import_opts_t *o, trace_t *t,
                 err_t *e)
{
    (void)o;
    line_iter_t it;
    line_iter_init(&it, buf, len);
    const char *s, *f[AZ_MAX_COLS];
    size_t n, fl[AZ_MAX_COLS];
    int line, nf = 0, ncols = 0;
    if (!line_iter_next(&it, &s, &n, &line)) return err_set(e, ERR_PARSE, "%s:1: empty file: no CSV header", name);
    if (split(s, n, f, fl, &ncols)) return err_set(e, ERR_PARSE, "%s:%d: more than %d columns", name, line, AZ_MAX_COLS);
    static const char *const want[3] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
    int col[3] = {-1, -1, -1};
    for (int i = 0; i < ncols; i++)
        for (int k = 0; k < 3; k++)
            if (fl[i] == strlen(want[k]) && !memcmp(f[i], want[k], fl[i])) {
                if (col[k] >= 0) return err_set(e, ERR_PARSE, "%s:%d: header: column %s twice", name, line, want[k]);
                col[k] = i;
            }
    for (int k = 0; k < 3; k++)
        if (col[k] < 0)
            return err_set(e, ERR_PARSE, "%s:%d: header: no column %s (need TIMESTAMP,ContextTokens,GeneratedTokens)",
                           name, line, want[k]);
    int64_t t0 = 0, last = 0;
    size_t rows = 0;
    int rc = ERR_OK;
    int *line_of = NULL;
    size_t cap_lines = 0;
    char first[64] = "", lastts[64] = "";
    while (line_iter_next(&it, &s, &n, &line)) {
        if (split(s, n, f, fl, &nf) || nf != ncols) {
            rc = err_set(e, ERR_PARSE, "%s:%d: %d fields, the header has %d", name, line, nf, ncols);
            break;
        }
        int64_t ts, arr;
        int drc = import_parse_datetime(f[col[0]], fl[col[0]], &ts);
        int w = (int)(fl[col[0]] > 40 ? 40 : fl[col[0]]);
        if (drc == ERR_RANGE) {
            rc = err_set(e, ERR_PARSE, "%s:%d: column TIMESTAMP: '%.*s' is outside the years %d-%d", name, line, w,
                         f[col[0]], IMPORT_YEAR_MIN, IMPORT_YEAR_MAX);
            break;
        }
        if (drc) {
            rc = err_set(e, ERR_PARSE, "%s:%d: column TIMESTAMP: bad field '%.*s' (want YYYY-MM-DD HH:MM:SS.fffffff)",
                         name, line, w, f[col[0]]);
            break;
        }
        uint64_t ctx, gen;
        if ((rc = parse_count(name, line, want[1], f[col[1]], fl[col[1]], &ctx, e)) ||
            (rc = parse_count(name, line, want[2], f[col[2]], fl[col[2]], &gen, e)))
            break;
        if (rows == 0) {
            t0 = last = ts;
            snprintf(first, sizeof first, "%.*s", (int)(fl[col[0]] > 40 ? 40 : fl[col[0]]), f[col[0]]);
        }
        if (ts < last) {
            rc = err_set(e, ERR_PARSE, "%s:%d: TIMESTAMP earlier than the previous row's (rows must be sorted)", name, line);
            break;
        }
        if (!import_span_ns(t0, ts, &arr)) {
            rc = err_set(e, ERR_PARSE, "%s:%d: TIMESTAMP more than 100 years after the first row", name, line);
            break;
        }
        last = ts;
        snprintf(lastts, sizeof lastts, "%.*s", (int)(fl[col[0]] > 40 ? 40 : fl[col[0]]), f[col[0]]);
        trace_session_t *ss;
        if ((rc = trace_add_session(t, &ss, e))) break;
        ss->id = rows;
        ss->arrival_ns = arr;
        trace_turn_t tu = trace_turn_blank();
        tu.arrival_ns = arr;
        tu.input_tokens = tu.prefill_tokens = ctx;
        tu.decode_tokens = gen;
        if ((rc = trace_session_add_turn(ss, &tu, e))) break;
        if (rows == cap_lines) {
            cap_lines = cap_lines ? 2 * cap_lines : 1024;
            int *nl = realloc(line_of, cap_lines * sizeof *nl);
            if (!nl) {
                rc = err_set(e, ERR_NOMEM, "out of memory");
                break;
            }
            line_of = nl;
        }
        line_of[rows++] = line;
    }
    if (!rc) {
        t->hdr.open_loop = true;
        t->hdr.closed_loop = false;
        t->hdr.session_arrivals = TRACE_ARRIVALS_OPEN;
        if ((rc = import_report_common(t, rows, e)) ||
            (rc = trace_header_add(&t->hdr, true, "first_timestamp", e, "%s", first)) ||
            (rc = trace_header_add(&t->hdr, true, "last_timestamp", e, "%s", lastts)) ||
            (rc = trace_header_add(&t->hdr, true, "time_span_s", e, "%.7f", (double)(last - t0) / 1e9)) ||
            (rc = trace_strset(&t->hdr.notes,
                               "Azure LLM inference trace: one-turn sessions, arrivals relative to the first row "
                               "(timestamps have no zone), no prefix information; open loop only", e)) ||
            (rc = import_check(name, t, line_of, e))) {
            /* rc holds the error */
        }
    }
    free(line_of);
    return rc;
}
