/* import_util — what every importer shares: a buffer's lines, dates, JSON rows, the check of the
 * sessions built and the report they give. The importers call it; it calls none of them. */
#include "traces/import_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lines ---- */

void line_iter_init(line_iter_t *it, const char *buf, size_t len)
{
    it->buf = buf;
    it->len = len;
    it->pos = 0;
    it->line = 0;
}

bool line_iter_next(line_iter_t *it, const char **s, size_t *n, int *line)
{
    while (it->pos < it->len) {
        const char *b = it->buf + it->pos;
        const char *nl = memchr(b, '\n', it->len - it->pos);
        size_t l = nl ? (size_t)(nl - b) : it->len - it->pos;
        it->pos += l + (nl ? 1 : 0);
        it->line++;
        size_t m = l;
        if (m && b[m - 1] == '\r') m--;
        bool blank = true;
        for (size_t i = 0; i < m; i++)
            if (b[i] != ' ' && b[i] != '\t') {
                blank = false;
                break;
            }
        if (blank) continue;
        *s = b;
        *n = m;
        *line = it->line;
        return true;
    }
    return false;
}

/* ---- dates ---- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool digits(const char *s, size_t n, size_t at, size_t k, int *out)
{
    if (at + k > n) return false;
    int v = 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[at + i];
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
}

int import_parse_datetime(const char *s, size_t n, int64_t *ns)
{
    int Y, M, D, h, m, sec;
    if (!digits(s, n, 0, 4, &Y) || n < 19 || s[4] != '-' || !digits(s, n, 5, 2, &M) || s[7] != '-' ||
        !digits(s, n, 8, 2, &D) || (s[10] != ' ' && s[10] != 'T') || !digits(s, n, 11, 2, &h) || s[13] != ':' ||
        !digits(s, n, 14, 2, &m) || s[16] != ':' || !digits(s, n, 17, 2, &sec))
        return ERR_PARSE;
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || (M == 2 && D == 29 && !leap) || h > 23 || m > 59 || sec > 60)
        return ERR_PARSE;
    size_t at = 19;
    int64_t frac = 0;
    if (at < n && s[at] == '.') {
        at++;
        int k = 0;
        while (at < n && s[at] >= '0' && s[at] <= '9') {
            if (k < 9) frac = frac * 10 + (s[at] - '0');
            k++;
            at++;
        }
        if (k == 0 || k > 9) return ERR_PARSE;
        for (int i = k; i < 9; i++) frac *= 10;
    }
    if (at < n && s[at] == 'Z') at++;
    else if (at + 6 == n && (s[at] == '+') && !memcmp(s + at + 1, "00:00", 5)) at += 6;
    if (at != n) return ERR_PARSE;
    if (Y < IMPORT_YEAR_MIN || Y > IMPORT_YEAR_MAX) return ERR_RANGE;
    int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
    *ns = ((days * 86400 + h * 3600 + m * 60 + sec) * 1000000000ll) + frac;
    return ERR_OK;
}

bool import_span_ns(int64_t from, int64_t to, int64_t *span)
{
    /* unsigned differences are exact: two dates in int64 lie less than 2^64 ns apart */
    uint64_t d = to >= from ? (uint64_t)to - (uint64_t)from : (uint64_t)from - (uint64_t)to;
    if (d > (uint64_t)TRACE_MAX_TIME_NS) return false;
    *span = to >= from ? (int64_t)d : -(int64_t)d;
    return true;
}

/* ---- JSON ---- */

int import_json_line(const char *name, int line, const char *s, size_t n, json_t **out, err_t *e)
{
    json_error_t je;
    json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
    if (!j) return err_set(e, ERR_PARSE, "%s:%d: not JSON (column %d): %s", name, line, je.column, je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return err_set(e, ERR_PARSE, "%s:%d: a JSON object was expected", name, line);
    }
    *out = j;
    return ERR_OK;
}

int import_json_tokens(const char *name, int line, json_t *obj, const char *key, uint64_t *out, err_t *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return err_set(e, ERR_PARSE, "%s:%d: missing field '%s'", name, line, key);
    if (!json_is_integer(v)) return err_set(e, ERR_PARSE, "%s:%d: field '%s': not an integer", name, line, key);
    json_int_t x = json_integer_value(v);
    if (x < 0) return err_set(e, ERR_PARSE, "%s:%d: field '%s': negative token count %lld", name, line, key, (long long)x);
    if ((unsigned long long)x > TRACE_MAX_TOKENS)
        return err_set(e, ERR_PARSE, "%s:%d: field '%s': absurd token count %lld (max %llu)", name, line, key,
                       (long long)x, TRACE_MAX_TOKENS);
    *out = (uint64_t)x;
    return ERR_OK;
}

int import_check(const char *name, const trace_t *t, const int *line_of, err_t *e)
{
    trace_check_state_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < t->n_sessions; i++) {
        int rc = trace_session_check(&t->hdr, &t->sessions[i], &st, e);
        if (rc) return err_prefix(e, "%s:%d", name, line_of ? line_of[i] : 0);
    }
    return ERR_OK;
}

int import_report_common(trace_t *t, size_t rows, err_t *e)
{
    size_t turns = 0, one = 0, maxt = 0;
    for (size_t i = 0; i < t->n_sessions; i++) {
        size_t n = t->sessions[i].n_turns;
        turns += n;
        one += n == 1;
        if (n > maxt) maxt = n;
    }
    int rc;
    if ((rc = trace_header_add(&t->hdr, true, "rows", e, "%zu", rows)) ||
        (rc = trace_header_add(&t->hdr, true, "sessions", e, "%zu", t->n_sessions)) ||
        (rc = trace_header_add(&t->hdr, true, "turns", e, "%zu", turns)) ||
        (rc = trace_header_add(&t->hdr, true, "one_turn_sessions", e, "%zu", one)) ||
        (rc = trace_header_add(&t->hdr, true, "max_turns_per_session", e, "%zu", maxt)))
        return rc;
    return ERR_OK;
}
