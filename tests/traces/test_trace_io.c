/* traces: framed file round trips, the streaming reader, the atomic writer, and every bad-file case. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traces/trace_io.h"

static char dir[64];

static void mkdir_tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/odsim_tio_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void rm_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(trace_io, .init = mkdir_tmp, .fini = rm_tmp);

static const char *path_in(const char *name)
{
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* A small trace with every field used: open + closed loop, a fork, shared prefixes, keys. */
static void build_sample(trace_t *t)
{
    err_t e;
    trace_init(t);
    cr_assert_eq(trace_header_init(&t->hdr, "test", "odsim test", &e), 0);
    t->hdr.open_loop = t->hdr.closed_loop = true;
    trace_strset(&t->hdr.source_file, "sample.jsonl", &e);
    trace_strset(&t->hdr.notes, "a note", &e);
    trace_strset(&t->hdr.generator_config, "a: 1\n", &e);
    t->hdr.has_seed = true;
    t->hdr.seed = 42;
    t->hdr.source_bytes = 1234;
    trace_header_add(&t->hdr, false, "min_shared_blocks", &e, "%d", 2);
    trace_header_add(&t->hdr, true, "forks", &e, "%d", 1);
    for (int i = 0; i < 3; i++) {
        trace_session_t *s;
        cr_assert_eq(trace_add_session(t, &s, &e), 0);
        s->id = (uint64_t)i * 10;
        s->arrival_ns = 1000 * i;
        if (i == 1) trace_strset(&s->key, "claude:abc", &e);
        if (i == 2) {
            s->forked_from = 0;
            s->fork_tokens = 512;
        }
        uint64_t held = 0;
        for (int k = 0; k < 2 + i; k++) {
            trace_turn_t tu = trace_turn_blank();
            tu.arrival_ns = 1000 * i + 500 * k;
            if (k > 0) tu.think_ns = 100 + k;
            tu.prefill_tokens = 100 + (uint64_t)k;
            tu.input_tokens = held + tu.prefill_tokens;
            if (k == 0 && i == 2) {
                tu.input_tokens = 700;
                tu.prefill_tokens = 188; /* reuses 512 from the fork */
            }
            if (k == 0 && i == 1) {
                tu.shared_prefix_tokens = 50;
                tu.shared_prefix_id = 7;
                tu.input_tokens = 150;
                tu.prefill_tokens = 100;
            }
            tu.decode_tokens = 10 + (uint64_t)k;
            tu.kind = k ? TRACE_TURN_TOOL : TRACE_TURN_USER;
            held = tu.input_tokens + tu.decode_tokens;
            cr_assert_eq(trace_session_add_turn(s, &tu, &e), 0);
        }
    }
}

static void assert_same(const trace_t *a, const trace_t *b)
{
    cr_assert_str_eq(a->hdr.source, b->hdr.source);
    cr_assert_str_eq(a->hdr.made_by, b->hdr.made_by);
    cr_assert_str_eq(a->hdr.source_file, b->hdr.source_file);
    cr_assert_str_eq(a->hdr.notes, b->hdr.notes);
    cr_assert_str_eq(a->hdr.generator_config, b->hdr.generator_config);
    cr_assert_eq(a->hdr.seed, b->hdr.seed);
    cr_assert_eq(a->hdr.has_seed, b->hdr.has_seed);
    cr_assert_eq(a->hdr.source_bytes, b->hdr.source_bytes);
    cr_assert_eq(a->hdr.open_loop, b->hdr.open_loop);
    cr_assert_eq(a->hdr.closed_loop, b->hdr.closed_loop);
    cr_assert_eq(a->hdr.n_params, b->hdr.n_params);
    cr_assert_eq(a->hdr.n_report, b->hdr.n_report);
    cr_assert_str_eq(trace_header_get(&b->hdr, false, "min_shared_blocks"), "2");
    cr_assert_str_eq(trace_header_get(&b->hdr, true, "forks"), "1");
    cr_assert_eq(a->n_sessions, b->n_sessions);
    for (size_t i = 0; i < a->n_sessions; i++) {
        const trace_session_t *x = &a->sessions[i], *y = &b->sessions[i];
        cr_assert_eq(x->id, y->id);
        cr_assert_eq(x->arrival_ns, y->arrival_ns);
        cr_assert_eq(x->user, y->user);
        cr_assert_eq(x->start_think_ns, y->start_think_ns);
        cr_assert_eq(x->forked_from, y->forked_from);
        cr_assert_eq(x->fork_tokens, y->fork_tokens);
        cr_assert((x->key == NULL) == (y->key == NULL));
        if (x->key) cr_assert_str_eq(x->key, y->key);
        cr_assert_eq(x->n_turns, y->n_turns);
        for (size_t k = 0; k < x->n_turns; k++)
            cr_assert_eq(memcmp(&x->turns[k], &y->turns[k], sizeof x->turns[k]), 0, "session %zu turn %zu", i, k);
    }
}

Test(trace_io, crc32_check_value)
{
    cr_assert_eq(trace_crc32("123456789", 9), 0xCBF43926u);
    cr_assert_eq(trace_crc32("", 0), 0u);
}

Test(trace_io, round_trip_every_field)
{
    trace_t a, b;
    err_t e;
    build_sample(&a);
    const char *p = path_in("rt.pb");
    cr_assert_eq(trace_write_file(p, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_read_file(p, &b, &e), 0, "%s", e.msg);
    assert_same(&a, &b);
    /* and a second write of what was read is byte-identical */
    const char *p2 = path_in("rt2.pb");
    cr_assert_eq(trace_write_file(p2, &b, &e), 0, "%s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", p, p2);
    cr_assert_eq(system(cmd), 0);
    trace_free(&a);
    trace_free(&b);
}

Test(trace_io, streaming_reader_reuses_session)
{
    trace_t a;
    err_t e;
    build_sample(&a);
    const char *p = path_in("st.pb");
    cr_assert_eq(trace_write_file(p, &a, &e), 0, "%s", e.msg);
    trace_reader_t *r;
    cr_assert_eq(trace_reader_open(p, &r, &e), 0, "%s", e.msg);
    cr_assert_str_eq(trace_reader_header(r)->source, "test");
    trace_session_t s;
    trace_session_init(&s);
    int rc, n = 0;
    size_t turns = 0;
    while ((rc = trace_reader_next_session(r, &s, &e)) == 1) {
        cr_assert_eq(s.id, a.sessions[n].id);
        turns += s.n_turns;
        n++;
    }
    cr_assert_eq(rc, 0, "%s", e.msg);
    cr_assert_eq(n, 3);
    cr_assert_eq(turns, 2 + 3 + 4);
    cr_assert_eq(trace_reader_next_session(r, &s, &e), 0); /* sticky end */
    struct stat sb;
    cr_assert_eq(stat(p, &sb), 0);
    cr_assert_eq(trace_reader_offset(r), (uint64_t)sb.st_size);
    trace_session_free(&s);
    trace_reader_close(r);
    trace_free(&a);
}

Test(trace_io, writer_rejects_invalid_sessions_and_abort_leaves_nothing)
{
    trace_t a;
    err_t e;
    build_sample(&a);
    const char *p = path_in("w.pb");
    trace_writer_t *w;
    cr_assert_eq(trace_writer_open(p, &a.hdr, &w, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_writer_add_session(w, &a.sessions[1], &e), 0, "%s", e.msg);
    /* id not increasing */
    cr_assert_eq(trace_writer_add_session(w, &a.sessions[0], &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "id not above"), "%s", e.msg);
    /* prefill > input */
    trace_session_t bad = a.sessions[2];
    trace_turn_t t0 = bad.turns[0];
    bad.turns[0].prefill_tokens = bad.turns[0].input_tokens + 1;
    cr_assert_eq(trace_writer_add_session(w, &bad, &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "prefill_tokens"), "%s", e.msg);
    a.sessions[2].turns[0] = t0;
    cr_assert_eq(access(p, F_OK), -1, "nothing may appear before commit");
    trace_writer_abort(w);
    cr_assert_eq(access(p, F_OK), -1);
    /* no temporary left behind */
    char cmd[200];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    cr_assert_eq(system(cmd), 0);
    trace_free(&a);
}

Test(trace_io, writer_checks_replay_fields)
{
    trace_t a;
    err_t e;
    build_sample(&a);
    a.sessions[0].turns[1].think_ns = TRACE_NONE; /* closed loop needs it */
    cr_assert_eq(trace_write_file(path_in("c.pb"), &a, &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "no think time"), "%s", e.msg);
    a.sessions[0].turns[1].think_ns = 5;
    a.sessions[0].turns[1].arrival_ns = TRACE_NONE; /* open loop needs it */
    cr_assert_eq(trace_write_file(path_in("c.pb"), &a, &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "no arrival time"), "%s", e.msg);
    a.sessions[0].turns[1].arrival_ns = 500;
    a.sessions[0].turns[1].prefill_tokens = 1;
    a.sessions[0].turns[1].input_tokens = 100000; /* reuses more than the session held */
    cr_assert_eq(trace_write_file(path_in("c.pb"), &a, &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "held"), "%s", e.msg);
    cr_assert_eq(access(path_in("c.pb"), F_OK), -1);
    trace_free(&a);
}

/* ---- bad files ---- */

static char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)l + 1);
    cr_assert_eq(fread(b, 1, (size_t)l, f), (size_t)l);
    fclose(f);
    *n = (size_t)l;
    return b;
}

static void spit(const char *p, const void *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Reads a whole file through the streaming API; returns the status and leaves the message in e. */
static int read_all(const char *p, err_t *e)
{
    trace_reader_t *r;
    int rc = trace_reader_open(p, &r, e);
    if (rc) return rc;
    trace_session_t s;
    trace_session_init(&s);
    while ((rc = trace_reader_next_session(r, &s, e)) == 1) {
    }
    trace_session_free(&s);
    trace_reader_close(r);
    return rc;
}

static char *sample_bytes(size_t *n)
{
    trace_t a;
    err_t e;
    build_sample(&a);
    const char *p = path_in("good.pb");
    cr_assert_eq(trace_write_file(p, &a, &e), 0);
    trace_free(&a);
    return slurp(p, n);
}

Test(trace_io, truncated_at_every_length)
{
    size_t n;
    char *b = sample_bytes(&n);
    err_t e;
    for (size_t k = 0; k < n; k++) {
        trace_reader_t *r = NULL;
        int rc = trace_reader_open_mem("cut.pb", b, k, &r, &e);
        if (rc == 0) {
            trace_session_t s;
            trace_session_init(&s);
            while ((rc = trace_reader_next_session(r, &s, &e)) == 1) {
            }
            trace_session_free(&s);
            trace_reader_close(r);
        }
        cr_assert_eq(rc, ERR_PARSE, "cut at %zu gave %d", k, rc);
        cr_assert(strstr(e.msg, "cut.pb: byte "), "cut at %zu: %s", k, e.msg);
        if (k >= 12) cr_assert(strstr(e.msg, "truncated"), "cut at %zu: %s", k, e.msg);
    }
    const char *p = path_in("trunc.pb");
    spit(p, b, n - 3);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "trunc.pb: byte ") && strstr(e.msg, "truncated"), "%s", e.msg);
    free(b);
}

Test(trace_io, wrong_magic_and_version)
{
    size_t n;
    char *b = sample_bytes(&n);
    err_t e;
    const char *p = path_in("m.pb");
    b[0] = 'X';
    spit(p, b, n);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "m.pb: byte 0: not an odsim trace (wrong magic number"), "%s", e.msg);
    b[0] = 'O';
    b[8] = 9;
    spit(p, b, n);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "byte 8: trace format version 9"), "%s", e.msg);
    spit(p, "", 0);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "wrong magic"), "%s", e.msg);
    cr_assert_eq(read_all(path_in("missing.pb"), &e), ERR_IO);
    cr_assert(strstr(e.msg, "missing.pb: cannot open"), "%s", e.msg);
    free(b);
}

Test(trace_io, corrupt_byte_is_caught_with_offset)
{
    size_t n;
    char *b = sample_bytes(&n);
    err_t e;
    /* every single-byte change after the preamble is detected (CRC, kind, length or framing) */
    for (size_t k = 12; k < n; k++) {
        char *c = malloc(n);
        memcpy(c, b, n);
        c[k] ^= 0x5A;
        trace_reader_t *r = NULL;
        int rc = trace_reader_open_mem("flip.pb", c, n, &r, &e);
        if (rc == 0) {
            trace_session_t s;
            trace_session_init(&s);
            while ((rc = trace_reader_next_session(r, &s, &e)) == 1) {
            }
            trace_session_free(&s);
            trace_reader_close(r);
        }
        cr_assert_eq(rc, ERR_PARSE, "flip at %zu not detected", k);
        cr_assert(strstr(e.msg, "flip.pb: byte "), "%s", e.msg);
        free(c);
    }
    free(b);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The sample's bytes up to the end of its header frame, then one hand-made frame. */
static size_t header_end(const char *b)
{
    const uint8_t *u = (const uint8_t *)b;
    uint32_t len = (uint32_t)u[13] | (uint32_t)u[14] << 8 | (uint32_t)u[15] << 16 | (uint32_t)u[16] << 24;
    return 12 + 9 + len;
}

Test(trace_io, absurd_length_prefix)
{
    size_t n;
    char *b = sample_bytes(&n);
    size_t h = header_end(b);
    uint8_t *c = malloc(h + 9);
    memcpy(c, b, h);
    c[h] = 'S';
    put32(c + h + 1, 0xFFFFFFF0u);
    put32(c + h + 5, 0);
    err_t e;
    const char *p = path_in("absurd.pb");
    spit(p, c, h + 9);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    char want[64];
    snprintf(want, sizeof want, "absurd.pb: byte %zu: corrupt file: 'S' frame length", h);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    /* a length under the limit but beyond the file is "truncated", found before allocating */
    put32(c + h + 1, 1000000);
    spit(p, c, h + 9);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "truncated file: 'S' frame of 1000000 bytes, only 0 bytes left"), "%s", e.msg);
    free(c);
    free(b);
}

Test(trace_io, corrupt_message_with_valid_crc)
{
    size_t n;
    char *b = sample_bytes(&n);
    size_t h = header_end(b);
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x08};
    uint8_t *c = malloc(h + 9 + sizeof junk);
    memcpy(c, b, h);
    c[h] = 'S';
    put32(c + h + 1, sizeof junk);
    put32(c + h + 5, trace_crc32(junk, sizeof junk));
    memcpy(c + h + 9, junk, sizeof junk);
    err_t e;
    const char *p = path_in("junk.pb");
    spit(p, c, h + 9 + sizeof junk);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    char want[80];
    snprintf(want, sizeof want, "junk.pb: byte %zu: corrupt session frame", h);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    free(c);
    free(b);
}

Test(trace_io, trailer_mismatch_and_trailing_data)
{
    size_t n;
    char *b = sample_bytes(&n);
    err_t e;
    const char *p = path_in("tail.pb");
    char *c = malloc(n + 1);
    memcpy(c, b, n);
    c[n] = 0;
    spit(p, c, n + 1);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "data after the trailer"), "%s", e.msg);
    /* drop the trailer: the file ends without it */
    spit(p, b, n - 9 - 4);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "truncated file: ends without its trailer"), "%s", e.msg);
    free(c);
    free(b);
}

Test(trace_io, invalid_session_semantics_name_the_offset)
{
    /* write a session whose decode count is absurd by bypassing the writer's check: patch the
     * encoded bytes of a valid file is fiddly, so build a frame from a hand-encoded Session */
    size_t n;
    char *b = sample_bytes(&n);
    size_t h = header_end(b);
    /* Session{id=1, arrival_ns=0, turns=[Turn{arrival 0, input 5, prefill 9, decode 1}]} */
    const uint8_t msg[] = {0x08, 0x01, 0x10, 0x00, 0x42, 0x08, 0x08, 0x00, 0x18, 0x05, 0x20, 0x09, 0x28, 0x01};
    uint8_t *c = malloc(h + 9 + sizeof msg);
    memcpy(c, b, h);
    c[h] = 'S';
    put32(c + h + 1, sizeof msg);
    put32(c + h + 5, trace_crc32(msg, sizeof msg));
    memcpy(c + h + 9, msg, sizeof msg);
    err_t e;
    const char *p = path_in("sem.pb");
    spit(p, c, h + 9 + sizeof msg);
    cr_assert_eq(read_all(p, &e), ERR_PARSE);
    char want[120];
    snprintf(want, sizeof want, "sem.pb: byte %zu: session 1 turn 0: prefill_tokens 9 > input_tokens 5", h);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    free(c);
    free(b);
}
