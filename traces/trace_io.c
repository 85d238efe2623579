#include "traces/trace_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/atomicio.h"
#include "odsim_trace.pb-c.h"

#define FRAME_HDR 9u
#define PREAMBLE 12u

/* ---- CRC-32 (reflected 0xEDB88320), nibble table ---- */

static const uint32_t crc_nib[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
    0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu, 0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

uint32_t trace_crc32(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
        c ^= p[i];
        c = (c >> 4) ^ crc_nib[c & 15];
        c = (c >> 4) ^ crc_nib[c & 15];
    }
    return c ^ 0xFFFFFFFFu;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- a protobuf-c allocator with a budget, so a hostile message cannot make unpack allocate far
 * more than its size suggests ---- */

typedef struct budget {
    size_t used, limit;
} budget_t;

static void *budget_alloc(void *ctx, size_t size)
{
    budget_t *b = ctx;
    if (size > b->limit - b->used) return NULL;
    size_t *p = malloc(size + sizeof(size_t) * 2);
    if (!p) return NULL;
    p[0] = size;
    b->used += size;
    return p + 2;
}

static void budget_free(void *ctx, void *ptr)
{
    if (!ptr) return;
    budget_t *b = ctx;
    size_t *p = (size_t *)ptr - 2;
    b->used -= p[0];
    free(p);
}

/* ---- header conversion ---- */

static int kv_from_pb(trace_header_t *h, bool report, OdsimTrace__KeyValue **kv, size_t n, err_t *e)
{
    for (size_t i = 0; i < n; i++)
        if (trace_header_add(h, report, kv[i]->key, e, "%s", kv[i]->value)) return ERR_NOMEM;
    return ERR_OK;
}

static int header_from_pb(const OdsimTrace__Header *p, trace_header_t *h, err_t *e)
{
    if (trace_header_init(h, p->source, p->made_by, e)) return ERR_NOMEM;
    h->format_version = p->format_version;
    if (strcmp(p->time_unit, "ns") || strcmp(p->token_unit, "token"))
        return err_set(e, ERR_PARSE, "header: units '%s'/'%s', expected 'ns'/'token'", p->time_unit,
                       p->token_unit);
    int rc = 0;
    if ((rc = trace_strset(&h->source_file, p->source_file, e)) ||
        (rc = trace_strset(&h->generator_config, p->generator_config, e)) ||
        (rc = trace_strset(&h->notes, p->notes, e)) ||
        (rc = kv_from_pb(h, false, p->params, p->n_params, e)) ||
        (rc = kv_from_pb(h, true, p->report, p->n_report, e)))
        return rc;
    h->source_bytes = p->has_source_bytes ? p->source_bytes : 0;
    h->has_seed = p->has_seed;
    h->seed = p->seed;
    h->open_loop = p->open_loop;
    h->closed_loop = p->closed_loop;
    h->session_arrivals = (trace_arrivals_t)p->session_arrivals;
    h->population = p->has_population ? p->population : 0;
    h->scale_factor = p->scale_factor;
    h->scale_target_tokens = p->has_scale_target_tokens ? p->scale_target_tokens : 0;
    h->unscaled_max_input_tokens = p->has_unscaled_max_input_tokens ? p->unscaled_max_input_tokens : 0;
    return trace_header_check(h, e);
}

static int kv_to_pb(const trace_kv_t *kv, size_t n, OdsimTrace__KeyValue **out_arr, OdsimTrace__KeyValue *store)
{
    for (size_t i = 0; i < n; i++) {
        odsim_trace__key_value__init(&store[i]);
        store[i].key = kv[i].key;
        store[i].value = kv[i].value;
        out_arr[i] = &store[i];
    }
    return 0;
}

/* ---- reader ---- */

struct trace_reader {
    char *name;
    FILE *fp;            /* file source, or NULL */
    const uint8_t *mem;  /* memory source */
    size_t mem_len;
    uint64_t off;        /* bytes consumed */
    int64_t size;        /* total bytes, -1 when unknown (a pipe) */
    uint8_t *buf;        /* frame payload buffer, reused */
    size_t buf_cap;
    trace_header_t hdr;
    trace_check_state_t st;
    int done;            /* 0 reading, 1 end reached, <0 the error returned again */
    err_t last_err;
};

static size_t rd(trace_reader_t *r, void *dst, size_t n)
{
    size_t got;
    if (r->fp) {
        got = fread(dst, 1, n, r->fp);
    } else {
        size_t left = r->mem_len - (size_t)r->off;
        got = n < left ? n : left;
        memcpy(dst, r->mem + r->off, got);
    }
    r->off += got;
    return got;
}

/* Reads one frame into r->buf. Returns 0, or an error naming the frame's offset. *eof_ok: a clean EOF
 * before the frame starts gives ERR_OK with *kind = 0. */
static int read_frame(trace_reader_t *r, uint8_t *kind, uint32_t *len, err_t *e)
{
    uint64_t at = r->off;
    uint8_t fh[FRAME_HDR];
    size_t got = rd(r, fh, FRAME_HDR);
    if (r->fp && ferror(r->fp)) return err_set(e, ERR_IO, "%s: byte %llu: read error", r->name, (unsigned long long)at);
    if (got == 0) {
        *kind = 0;
        return ERR_OK;
    }
    if (got < FRAME_HDR)
        return err_set(e, ERR_PARSE, "%s: byte %llu: truncated file: frame header cut after %zu of %u bytes", r->name,
                       (unsigned long long)at, got, FRAME_HDR);
    *kind = fh[0];
    uint32_t n = get_u32(fh + 1), crc = get_u32(fh + 5);
    uint32_t max;
    switch (*kind) {
    case 'H': max = TRACE_MAX_HEADER_BYTES; break;
    case 'S': max = TRACE_MAX_SESSION_BYTES; break;
    case 'E': max = TRACE_MAX_TRAILER_BYTES; break;
    default:
        return err_set(e, ERR_PARSE, "%s: byte %llu: corrupt file: unknown frame kind 0x%02x", r->name,
                       (unsigned long long)at, *kind);
    }
    if (n > max)
        return err_set(e, ERR_PARSE, "%s: byte %llu: corrupt file: '%c' frame length %u exceeds the limit of %u bytes",
                       r->name, (unsigned long long)at, *kind, n, max);
    if (r->size >= 0 && (uint64_t)n > (uint64_t)r->size - r->off)
        return err_set(e, ERR_PARSE, "%s: byte %llu: truncated file: '%c' frame of %u bytes, only %llu bytes left",
                       r->name, (unsigned long long)at, *kind, n, (unsigned long long)((uint64_t)r->size - r->off));
    if (n > r->buf_cap) {
        size_t nc = r->buf_cap ? r->buf_cap : 4096;
        while (nc < n) nc *= 2;
        uint8_t *nb = realloc(r->buf, nc);
        if (!nb) return err_set(e, ERR_NOMEM, "%s: byte %llu: out of memory", r->name, (unsigned long long)at);
        r->buf = nb;
        r->buf_cap = nc;
    }
    got = n ? rd(r, r->buf, n) : 0;
    if (r->fp && ferror(r->fp)) return err_set(e, ERR_IO, "%s: byte %llu: read error", r->name, (unsigned long long)at);
    if (got < n)
        return err_set(e, ERR_PARSE, "%s: byte %llu: truncated file: '%c' frame cut after %zu of %u bytes", r->name,
                       (unsigned long long)at, *kind, got, n);
    if (trace_crc32(r->buf, n) != crc)
        return err_set(e, ERR_PARSE, "%s: byte %llu: corrupt '%c' frame: CRC mismatch", r->name,
                       (unsigned long long)at, *kind);
    *len = n;
    return ERR_OK;
}

static ProtobufCAllocator make_alloc(budget_t *b, uint32_t len)
{
    b->used = 0;
    b->limit = (size_t)len * 64u + (1u << 20);
    ProtobufCAllocator a = {budget_alloc, budget_free, b};
    return a;
}

static int reader_start(trace_reader_t *r, err_t *e)
{
    uint8_t pre[PREAMBLE];
    errno = 0;
    size_t got = rd(r, pre, PREAMBLE);
    if (r->fp && ferror(r->fp))
        return err_set(e, ERR_IO, "%s: byte 0: read error: %s", r->name, strerror(errno ? errno : EIO));
    if (got < PREAMBLE || memcmp(pre, TRACE_MAGIC, 8))
        return err_set(e, ERR_PARSE, "%s: byte 0: not an odsim trace (wrong magic number%s)", r->name,
                       got < PREAMBLE ? ", file too short" : "");
    uint32_t v = get_u32(pre + 8);
    if (v != TRACE_FORMAT_VERSION)
        return err_set(e, ERR_PARSE, "%s: byte 8: trace format version %u, this odsim reads version %u", r->name, v,
                       TRACE_FORMAT_VERSION);
    uint64_t at = r->off;
    uint8_t kind;
    uint32_t len = 0;
    int rc = read_frame(r, &kind, &len, e);
    if (rc) return rc;
    if (kind == 0) return err_set(e, ERR_PARSE, "%s: byte %llu: truncated file: no header", r->name, (unsigned long long)at);
    if (kind != 'H')
        return err_set(e, ERR_PARSE, "%s: byte %llu: corrupt file: first frame is '%c', not the header", r->name,
                       (unsigned long long)at, kind);
    budget_t b;
    ProtobufCAllocator a = make_alloc(&b, len);
    OdsimTrace__Header *p = odsim_trace__header__unpack(&a, len, r->buf);
    if (!p)
        return err_set(e, ERR_PARSE, "%s: byte %llu: corrupt header: not a valid Header message", r->name,
                       (unsigned long long)at);
    rc = header_from_pb(p, &r->hdr, e);
    odsim_trace__header__free_unpacked(p, &a);
    if (rc) return err_prefix(e, "%s: byte %llu", r->name, (unsigned long long)at);
    return ERR_OK;
}

static int reader_new(const char *name, trace_reader_t **out, err_t *e)
{
    *out = NULL;
    trace_reader_t *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(name ? name : "(trace)"))) {
        free(r);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    r->size = -1;
    *out = r;
    return ERR_OK;
}

int trace_reader_open(const char *path, trace_reader_t **out, err_t *e)
{
    trace_reader_t *r;
    int rc = reader_new(path, &r, e);
    if (rc) {
        *out = NULL;
        return rc;
    }
    *out = NULL;
    r->fp = fopen(path, "rb");
    if (!r->fp) {
        rc = err_set(e, ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        trace_reader_close(r);
        return rc;
    }
    struct stat sb;
    if (fstat(fileno(r->fp), &sb) == 0 && S_ISREG(sb.st_mode)) r->size = (int64_t)sb.st_size;
    if ((rc = reader_start(r, e))) {
        trace_reader_close(r);
        return rc;
    }
    *out = r;
    return ERR_OK;
}

int trace_reader_open_mem(const char *name, const void *buf, size_t len, trace_reader_t **out, err_t *e)
{
    trace_reader_t *r;
    int rc = reader_new(name, &r, e);
    *out = NULL;
    if (rc) return rc;
    r->mem = buf;
    r->mem_len = len;
    r->size = (int64_t)len;
    if ((rc = reader_start(r, e))) {
        trace_reader_close(r);
        return rc;
    }
    *out = r;
    return ERR_OK;
}

const trace_header_t *trace_reader_header(const trace_reader_t *r) { return &r->hdr; }
uint64_t trace_reader_offset(const trace_reader_t *r) { return r->off; }

void trace_reader_close(trace_reader_t *r)
{
    if (!r) return;
    if (r->fp) fclose(r->fp);
    trace_header_free(&r->hdr);
    free(r->buf);
    free(r->name);
    free(r);
}

static int session_from_pb(const OdsimTrace__Session *p, trace_session_t *s, err_t *e)
{
    trace_session_reset(s);
    s->id = p->id;
    if (p->has_arrival_ns) s->arrival_ns = p->arrival_ns;
    if (p->has_user) s->user = p->user;
    if (p->has_start_think_ns) s->start_think_ns = p->start_think_ns;
    if (p->has_forked_from) {
        if (p->forked_from > (uint64_t)INT64_MAX)
            return err_set(e, ERR_PARSE, "session %llu: forked_from %llu out of range", (unsigned long long)p->id,
                           (unsigned long long)p->forked_from);
        s->forked_from = (int64_t)p->forked_from;
    }
    if (p->has_fork_tokens) s->fork_tokens = p->fork_tokens;
    if (p->key && trace_strset(&s->key, p->key, e)) return ERR_NOMEM;
    if (p->n_turns > TRACE_MAX_TURNS)
        return err_set(e, ERR_PARSE, "session %llu: %zu turns, more than %llu", (unsigned long long)p->id, p->n_turns,
                       TRACE_MAX_TURNS);
    for (size_t i = 0; i < p->n_turns; i++) {
        const OdsimTrace__Turn *q = p->turns[i];
        trace_turn_t t = trace_turn_blank();
        if (q->has_arrival_ns) t.arrival_ns = q->arrival_ns;
        if (q->has_think_ns) t.think_ns = q->think_ns;
        t.input_tokens = q->input_tokens;
        t.prefill_tokens = q->prefill_tokens;
        t.decode_tokens = q->decode_tokens;
        if (q->has_shared_prefix_tokens) t.shared_prefix_tokens = q->shared_prefix_tokens;
        if (q->has_shared_prefix_id) t.shared_prefix_id = q->shared_prefix_id;
        if (q->has_kind) t.kind = (trace_turn_kind_t)q->kind;
        /* an absent time must not be confused with a negative one read from the file */
        if ((q->has_arrival_ns && q->arrival_ns < 0) || (q->has_think_ns && q->think_ns < 0))
            return err_set(e, ERR_PARSE, "session %llu turn %zu: negative time", (unsigned long long)p->id, i);
        int rc = trace_session_add_turn(s, &t, e);
        if (rc) return rc;
    }
    if ((p->has_arrival_ns && p->arrival_ns < 0) || (p->has_start_think_ns && p->start_think_ns < 0))
        return err_set(e, ERR_PARSE, "session %llu: negative time", (unsigned long long)p->id);
    return ERR_OK;
}

static int reader_fail(trace_reader_t *r, int rc, err_t *e)
{
    r->done = rc;
    if (e) r->last_err = *e;
    else err_set(&r->last_err, rc, "%s: error", r->name);
    return rc;
}

int trace_reader_next_session(trace_reader_t *r, trace_session_t *s, err_t *e)
{
    if (r->done > 0) return 0;
    if (r->done < 0) {
        if (e) *e = r->last_err;
        return r->done;
    }
    err_t local;
    if (!e) e = &local;
    uint64_t at = r->off;
    uint8_t kind;
    uint32_t len = 0;
    int rc = read_frame(r, &kind, &len, e);
    if (rc) return reader_fail(r, rc, e);
    if (kind == 0)
        return reader_fail(r, err_set(e, ERR_PARSE, "%s: byte %llu: truncated file: ends without its trailer after %llu sessions",
                                      r->name, (unsigned long long)at, (unsigned long long)r->st.sessions), e);
    budget_t b;
    ProtobufCAllocator a = make_alloc(&b, len);
    if (kind == 'E') {
        OdsimTrace__Trailer *t = odsim_trace__trailer__unpack(&a, len, r->buf);
        if (!t)
            return reader_fail(r, err_set(e, ERR_PARSE, "%s: byte %llu: corrupt trailer", r->name, (unsigned long long)at), e);
        unsigned long long ns = t->sessions, nt = t->turns;
        odsim_trace__trailer__free_unpacked(t, &a);
        if (ns != r->st.sessions || nt != r->st.turns)
            return reader_fail(r, err_set(e, ERR_PARSE, "%s: byte %llu: trailer counts %llu sessions / %llu turns, the file holds %llu / %llu",
                                          r->name, (unsigned long long)at, ns, nt, (unsigned long long)r->st.sessions,
                                          (unsigned long long)r->st.turns), e);
        uint8_t extra;
        uint64_t end = r->off;
        if (rd(r, &extra, 1) != 0)
            return reader_fail(r, err_set(e, ERR_PARSE, "%s: byte %llu: data after the trailer", r->name, (unsigned long long)end), e);
        r->done = 1;
        return 0;
    }
    if (kind != 'S')
        return reader_fail(r, err_set(e, ERR_PARSE, "%s: byte %llu: corrupt file: unexpected '%c' frame", r->name,
                                      (unsigned long long)at, kind), e);
    OdsimTrace__Session *p = odsim_trace__session__unpack(&a, len, r->buf);
    if (!p)
        return reader_fail(r, err_set(e, ERR_PARSE, "%s: byte %llu: corrupt session frame: not a valid Session message",
                                      r->name, (unsigned long long)at), e);
    rc = session_from_pb(p, s, e);
    odsim_trace__session__free_unpacked(p, &a);
    if (!rc) rc = trace_session_check(&r->hdr, s, &r->st, e);
    if (rc) {
        err_prefix(e, "%s: byte %llu", r->name, (unsigned long long)at);
        return reader_fail(r, rc, e);
    }
    return 1;
}

/* ---- writer ---- */

struct trace_writer {
    atomicio_t *f;
    char *path;
    trace_header_t hdr; /* the fields the checks need */
    trace_check_state_t st;
    uint8_t *buf;
    size_t buf_cap;
    OdsimTrace__Turn *turns;
    OdsimTrace__Turn **turn_ptrs;
    size_t turns_cap;
    int broken;
};

static int write_frame(trace_writer_t *w, uint8_t kind, const uint8_t *payload, size_t len, err_t *e)
{
    uint8_t fh[FRAME_HDR];
    fh[0] = kind;
    put_u32(fh + 1, (uint32_t)len);
    put_u32(fh + 5, trace_crc32(payload, len));
    FILE *fp = atomicio_file(w->f);
    if (fwrite(fh, 1, FRAME_HDR, fp) != FRAME_HDR || (len && fwrite(payload, 1, len, fp) != len)) {
        w->broken = 1;
        return err_set(e, ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    return ERR_OK;
}

static int ensure_buf(trace_writer_t *w, size_t n, err_t *e)
{
    if (n <= w->buf_cap) return ERR_OK;
    size_t nc = w->buf_cap ? w->buf_cap : 4096;
    while (nc < n) nc *= 2;
    uint8_t *nb = realloc(w->buf, nc);
    if (!nb) return err_set(e, ERR_NOMEM, "out of memory");
    w->buf = nb;
    w->buf_cap = nc;
    return ERR_OK;
}

static int copy_header(trace_header_t *dst, const trace_header_t *h, err_t *e)
{
    if (trace_header_init(dst, h->source, h->made_by, e)) return ERR_NOMEM;
    dst->format_version = h->format_version;
    dst->open_loop = h->open_loop;
    dst->closed_loop = h->closed_loop;
    dst->session_arrivals = h->session_arrivals;
    dst->population = h->population;
    dst->scale_factor = h->scale_factor;
    return ERR_OK;
}

int trace_writer_open(const char *path, const trace_header_t *h, trace_writer_t **out, err_t *e)
{
    *out = NULL;
    int rc = trace_header_check(h, e);
    if (rc) return err_prefix(e, "%s", path), ERR_INVAL;
    trace_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    if ((rc = copy_header(&w->hdr, h, e)) || (rc = atomicio_open(path, &w->f, e))) {
        trace_header_free(&w->hdr);
        free(w->path);
        free(w);
        return rc;
    }
    OdsimTrace__Header p = ODSIM_TRACE__HEADER__INIT;
    p.format_version = h->format_version;
    p.source = h->source;
    p.source_file = h->source_file;
    p.has_source_bytes = h->source_bytes > 0;
    p.source_bytes = h->source_bytes;
    p.time_unit = (char *)"ns";
    p.token_unit = (char *)"token";
    p.made_by = h->made_by;
    p.generator_config = h->generator_config;
    p.has_seed = h->has_seed;
    p.seed = h->seed;
    p.open_loop = h->open_loop;
    p.closed_loop = h->closed_loop;
    p.session_arrivals = (OdsimTrace__SessionArrivals)h->session_arrivals;
    p.has_population = h->session_arrivals == TRACE_ARRIVALS_CLOSED;
    p.population = h->population;
    p.scale_factor = h->scale_factor;
    p.has_scale_target_tokens = h->scale_target_tokens > 0;
    p.scale_target_tokens = h->scale_target_tokens;
    p.has_unscaled_max_input_tokens = h->unscaled_max_input_tokens > 0;
    p.unscaled_max_input_tokens = h->unscaled_max_input_tokens;
    p.notes = h->notes;
    size_t nkv = h->n_params + h->n_report;
    OdsimTrace__KeyValue *kvs = calloc(nkv ? nkv : 1, sizeof *kvs);
    OdsimTrace__KeyValue **kvp = calloc(nkv ? nkv : 1, sizeof *kvp);
    if (!kvs || !kvp) {
        free(kvs);
        free(kvp);
        trace_writer_abort(w);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    kv_to_pb(h->params, h->n_params, kvp, kvs);
    kv_to_pb(h->report, h->n_report, kvp + h->n_params, kvs + h->n_params);
    p.n_params = h->n_params;
    p.params = kvp;
    p.n_report = h->n_report;
    p.report = kvp + h->n_params;
    size_t n = odsim_trace__header__get_packed_size(&p);
    if (n > TRACE_MAX_HEADER_BYTES) rc = err_set(e, ERR_RANGE, "%s: header of %zu bytes exceeds %u", path, n, TRACE_MAX_HEADER_BYTES);
    else if (!(rc = ensure_buf(w, n, e))) {
        odsim_trace__header__pack(&p, w->buf);
        uint8_t pre[PREAMBLE];
        memcpy(pre, TRACE_MAGIC, 8);
        put_u32(pre + 8, TRACE_FORMAT_VERSION);
        if (fwrite(pre, 1, PREAMBLE, atomicio_file(w->f)) != PREAMBLE)
            rc = err_set(e, ERR_IO, "%s: write failed: %s", path, strerror(errno));
        else
            rc = write_frame(w, 'H', w->buf, n, e);
    }
    free(kvs);
    free(kvp);
    if (rc) {
        trace_writer_abort(w);
        return rc;
    }
    *out = w;
    return ERR_OK;
}

int trace_writer_add_session(trace_writer_t *w, const trace_session_t *s, err_t *e)
{
    if (w->broken) return err_set(e, ERR_IO, "%s: an earlier write failed", w->path);
    trace_check_state_t st = w->st;
    int rc = trace_session_check(&w->hdr, s, &st, e);
    if (rc) return err_prefix(e, "%s: writing", w->path), ERR_INVAL;
    if (s->n_turns > w->turns_cap) {
        size_t nc = w->turns_cap ? w->turns_cap : 64;
        while (nc < s->n_turns) nc *= 2;
        OdsimTrace__Turn *nt = realloc(w->turns, nc * sizeof *nt);
        if (!nt) return err_set(e, ERR_NOMEM, "out of memory");
        w->turns = nt;
        OdsimTrace__Turn **np = realloc(w->turn_ptrs, nc * sizeof *np);
        if (!np) return err_set(e, ERR_NOMEM, "out of memory");
        w->turn_ptrs = np;
        w->turns_cap = nc;
    }
    OdsimTrace__Session p = ODSIM_TRACE__SESSION__INIT;
    p.id = s->id;
    p.has_arrival_ns = s->arrival_ns != TRACE_NONE;
    p.arrival_ns = s->arrival_ns;
    p.has_user = s->user != TRACE_NONE;
    p.user = (uint32_t)s->user;
    p.has_start_think_ns = s->start_think_ns != TRACE_NONE;
    p.start_think_ns = s->start_think_ns;
    p.has_forked_from = s->forked_from != TRACE_NONE;
    p.forked_from = (uint64_t)s->forked_from;
    p.has_fork_tokens = s->fork_tokens > 0;
    p.fork_tokens = s->fork_tokens;
    p.key = s->key;
    p.n_turns = s->n_turns;
    p.turns = w->turn_ptrs;
    for (size_t i = 0; i < s->n_turns; i++) {
        const trace_turn_t *t = &s->turns[i];
        OdsimTrace__Turn *q = &w->turns[i];
        odsim_trace__turn__init(q);
        q->has_arrival_ns = t->arrival_ns != TRACE_NONE;
        q->arrival_ns = t->arrival_ns;
        q->has_think_ns = t->think_ns != TRACE_NONE;
        q->think_ns = t->think_ns;
        q->input_tokens = t->input_tokens;
        q->prefill_tokens = t->prefill_tokens;
        q->decode_tokens = t->decode_tokens;
        q->has_shared_prefix_tokens = t->shared_prefix_tokens > 0;
        q->shared_prefix_tokens = t->shared_prefix_tokens;
        q->has_shared_prefix_id = t->shared_prefix_tokens > 0;
        q->shared_prefix_id = t->shared_prefix_id;
        q->has_kind = t->kind != TRACE_TURN_UNKNOWN;
        q->kind = (OdsimTrace__TurnKind)t->kind;
        w->turn_ptrs[i] = q;
    }
    size_t n = odsim_trace__session__get_packed_size(&p);
    if (n > TRACE_MAX_SESSION_BYTES)
        return err_set(e, ERR_RANGE, "%s: session %llu encodes to %zu bytes, more than the %u a reader accepts", w->path,
                       (unsigned long long)s->id, n, TRACE_MAX_SESSION_BYTES);
    if ((rc = ensure_buf(w, n, e))) return rc;
    odsim_trace__session__pack(&p, w->buf);
    if ((rc = write_frame(w, 'S', w->buf, n, e))) return rc;
    w->st = st;
    return ERR_OK;
}

static void writer_free(trace_writer_t *w)
{
    trace_header_free(&w->hdr);
    free(w->buf);
    free(w->turns);
    free(w->turn_ptrs);
    free(w->path);
    free(w);
}

int trace_writer_commit(trace_writer_t *w, err_t *e)
{
    int rc = ERR_OK;
    if (w->broken) rc = err_set(e, ERR_IO, "%s: an earlier write failed; nothing written", w->path);
    if (!rc) {
        OdsimTrace__Trailer t = ODSIM_TRACE__TRAILER__INIT;
        t.sessions = w->st.sessions;
        t.turns = w->st.turns;
        uint8_t b[TRACE_MAX_TRAILER_BYTES];
        size_t n = odsim_trace__trailer__pack(&t, b);
        rc = write_frame(w, 'E', b, n, e);
    }
    if (rc) {
        atomicio_abort(w->f);
    } else {
        rc = atomicio_commit(w->f, e);
    }
    writer_free(w);
    return rc;
}

void trace_writer_abort(trace_writer_t *w)
{
    if (!w) return;
    atomicio_abort(w->f);
    writer_free(w);
}

int trace_write_file(const char *path, const trace_t *t, err_t *e)
{
    trace_writer_t *w;
    int rc = trace_writer_open(path, &t->hdr, &w, e);
    if (rc) return rc;
    for (size_t i = 0; i < t->n_sessions; i++) {
        if ((rc = trace_writer_add_session(w, &t->sessions[i], e))) {
            trace_writer_abort(w);
            return rc;
        }
    }
    return trace_writer_commit(w, e);
}

static int copy_header_full(trace_header_t *d, const trace_header_t *h, err_t *e)
{
    int rc = copy_header(d, h, e);
    if (rc) return rc;
    d->source_bytes = h->source_bytes;
    d->has_seed = h->has_seed;
    d->seed = h->seed;
    d->scale_target_tokens = h->scale_target_tokens;
    d->unscaled_max_input_tokens = h->unscaled_max_input_tokens;
    if ((rc = trace_strset(&d->source_file, h->source_file, e)) ||
        (rc = trace_strset(&d->generator_config, h->generator_config, e)) || (rc = trace_strset(&d->notes, h->notes, e)))
        return rc;
    for (size_t i = 0; i < h->n_params; i++)
        if ((rc = trace_header_add(d, false, h->params[i].key, e, "%s", h->params[i].value))) return rc;
    for (size_t i = 0; i < h->n_report; i++)
        if ((rc = trace_header_add(d, true, h->report[i].key, e, "%s", h->report[i].value))) return rc;
    return ERR_OK;
}

int trace_read_file(const char *path, trace_t *out, err_t *e)
{
    trace_init(out);
    trace_reader_t *r;
    int rc = trace_reader_open(path, &r, e);
    if (rc) return rc;
    if ((rc = copy_header_full(&out->hdr, trace_reader_header(r), e))) goto fail;
    for (;;) {
        trace_session_t *s;
        if ((rc = trace_add_session(out, &s, e))) goto fail;
        rc = trace_reader_next_session(r, s, e);
        if (rc == 1) continue;
        trace_session_free(s);
        out->n_sessions--;
        if (rc == 0) break;
        goto fail;
    }
    trace_reader_close(r);
    return ERR_OK;
fail:
    trace_reader_close(r);
    trace_free(out);
    return rc;
}
