#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomicio.h"
#include "common/cfg.h"

static cfg_doc_t *parse_ok(const char *text)
{
    cfg_doc_t *d = NULL;
    err_t e;
    int rc = cfg_parse_string("t.yaml", text, strlen(text), &d, &e);
    cr_assert_eq(rc, 0, "parse failed: %s", e.msg);
    return d;
}

static void parse_fails(const char *text, const char *want)
{
    cfg_doc_t *d = NULL;
    err_t e;
    int rc = cfg_parse_string("t.yaml", text, strlen(text), &d, &e);
    cr_assert_neq(rc, 0, "parse of %s should fail", text);
    cr_assert_null(d);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
}

Test(cfg, positions_are_one_based)
{
    cfg_doc_t *d = parse_ok("a: 1\nb:\n  c: x\n");
    cfg_node_t *c = cfg_path(cfg_root(d), "b.c");
    cr_assert_not_null(c);
    cr_assert_eq(cfg_line(c), 3);
    cr_assert_eq(cfg_col(c), 6);
    cr_assert_str_eq(cfg_keypath(c), "b.c");
    cfg_free(d);
}

Test(cfg, rejects_duplicates_anchors_merges_and_multidoc)
{
    parse_fails("a: 1\nb: 2\na: 3\n", "t.yaml:3:1: duplicate key 'a'");
    parse_fails("a: &x 1\nb: *x\n", "not supported");
    parse_fails("base: {a: 1}\nc:\n  <<: {a: 2}\n", "merge keys");
    parse_fails("a: 1\n---\nb: 2\n", "more than one YAML document");
    parse_fails("a: [1, 2\n", "t.yaml:");
    parse_fails("? [a]\n: 1\n", "plain scalar");
}

typedef struct demo {
    double bw;
    int64_t n;
    bool on;
    const char *name;
    int mode;
    double size;
    double dt;
} demo_t;

static const char *const modes[] = {"host", "hbm", "split", NULL};
static const cfg_param_t demo_params[] = {
    {"bw_GBps", CFG_T_DOUBLE, offsetof(demo_t, bw), NULL, 0, 1e4, NULL, "bandwidth, GB/s"},
    {"tokens", CFG_T_INT, offsetof(demo_t, n), "1Mi", 1, 1e12, NULL, "context tokens"},
    {"enabled", CFG_T_BOOL, offsetof(demo_t, on), "false", 1, 0, NULL, "switch"},
    {"name", CFG_T_STRING, offsetof(demo_t, name), "none", 1, 0, NULL, "label"},
    {"placement", CFG_T_ENUM, offsetof(demo_t, mode), "host", 1, 0, modes, "index placement"},
    {"buffer", CFG_T_BYTES, offsetof(demo_t, size), "64KiB", 0, 1e15, NULL, "bytes"},
    {"think", CFG_T_SECONDS, offsetof(demo_t, dt), "2s", 0, 1e6, NULL, "seconds"},
};
#define NP (sizeof demo_params / sizeof demo_params[0])

Test(cfg, bind_converts_and_defaults)
{
    cfg_doc_t *d = parse_ok("bw_GBps: 55.3\nplacement: split\nbuffer: 2 MiB\nthink: 250ms\nenabled: yes\n");
    demo_t x;
    err_t e;
    cr_assert_eq(cfg_bind(cfg_root(d), demo_params, NP, &x, &e), 0, "%s", e.msg);
    cr_assert_float_eq(x.bw, 55.3, 1e-12);
    cr_assert_eq(x.n, 1048576);
    cr_assert(x.on);
    cr_assert_str_eq(x.name, "none");
    cr_assert_eq(x.mode, 2);
    cr_assert_float_eq(x.size, 2097152.0, 1e-9);
    cr_assert_float_eq(x.dt, 0.25, 1e-15);
    cfg_free(d);
}

static void bind_fails(const char *text, const char *want)
{
    cfg_doc_t *d = parse_ok(text);
    demo_t x;
    err_t e;
    cr_assert_neq(cfg_bind(cfg_root(d), demo_params, NP, &x, &e), 0, "bind of %s should fail", text);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    cfg_free(d);
}

Test(cfg, bind_errors_name_file_line_and_key)
{
    bind_fails("bw_GBps: 1\nbw_GBsp: 2\n", "t.yaml:2:10: key 'bw_GBsp': unknown key 'bw_GBsp' (did you mean 'bw_GBps'?)");
    bind_fails("tokens: 5\n", "missing required key 'bw_GBps'");
    bind_fails("bw_GBps: -3\n", "t.yaml:1:10: key 'bw_GBps': -3 is outside [0, 10000]");
    bind_fails("bw_GBps: fast\n", "expected a number, got 'fast'");
    bind_fails("bw_GBps: \"5\"\n", "quoted");
    bind_fails("bw_GBps: 1\ntokens: 1.5\n", "expected an integer");
    bind_fails("bw_GBps: 1\nplacement: disk\n", "expected one of host, hbm, split, got 'disk'");
    bind_fails("bw_GBps: 1\nbuffer: 3 parsecs\n", "unknown suffix");
    bind_fails("bw_GBps: .nan\n", "expected a number");
    bind_fails("bw_GBps: [1]\n", "got a list");
}

/* A number's place takes the words a numeric parameter lists (run.duration_s: auto) as NAN, and no
 * other word; a parameter without words refuses them. */
Test(cfg, words_in_a_numbers_place)
{
    static const char *const words[] = {"auto", NULL};
    static const cfg_param_t p[] = {{"dt", CFG_T_SECONDS, offsetof(demo_t, dt), "2s", 0, 10, words, "seconds or auto"},
                                    {"bw_GBps", CFG_T_DOUBLE, offsetof(demo_t, bw), "1", 0, 10, NULL, "GB/s"}};
    demo_t x;
    err_t e;
    cfg_doc_t *d = parse_ok("dt: auto\n");
    cr_assert_eq(cfg_bind(cfg_root(d), p, 2, &x, &e), 0, "%s", e.msg);
    cr_assert(isnan(x.dt));
    cfg_free(d);
    d = parse_ok("dt: 3s\n");
    cr_assert_eq(cfg_bind(cfg_root(d), p, 2, &x, &e), 0, "%s", e.msg);
    cr_assert_float_eq(x.dt, 3.0, 1e-15);
    cfg_free(d);
    const char *bad[][2] = {{"dt: automatic\n", "key 'dt'"}, {"dt: 11s\n", "outside [0, 10]"}, {"bw_GBps: auto\n", "expected a number"}};
    for (size_t i = 0; i < 3; i++) {
        d = parse_ok(bad[i][0]);
        cr_assert_neq(cfg_bind(cfg_root(d), p, 2, &x, &e), 0, "bind of %s should fail", bad[i][0]);
        cr_assert(strstr(e.msg, bad[i][1]), "message '%s' lacks '%s'", e.msg, bad[i][1]);
        cfg_free(d);
    }
}

Test(cfg, merge_overlays_maps_and_replaces_the_rest)
{
    cfg_doc_t *base = parse_ok("gpu: {hbm_GBps: 4800, sms: 132}\nlist: [1, 2]\nname: h200\n");
    cfg_doc_t *over = parse_ok("gpu: {sms: 100}\nlist: [3]\n");
    cfg_doc_t *m;
    err_t e;
    cr_assert_eq(cfg_merge(cfg_root(base), cfg_root(over), true, &m, &e), 0, "%s", e.msg);
    cr_assert_str_eq(cfg_str(cfg_path(cfg_root(m), "gpu.hbm_GBps")), "4800");
    cr_assert_str_eq(cfg_str(cfg_path(cfg_root(m), "gpu.sms")), "100");
    cr_assert_eq(cfg_size(cfg_get(cfg_root(m), "list")), 1);
    cr_assert_str_eq(cfg_str(cfg_get(cfg_root(m), "name")), "h200");
    cfg_free(m);
    cfg_doc_t *bad = parse_ok("gpu: {smz: 1}\n");
    cr_assert_neq(cfg_merge(cfg_root(base), cfg_root(bad), true, &m, &e), 0);
    cr_assert(strstr(e.msg, "key 'gpu.smz'"), "%s", e.msg);
    cr_assert_eq(cfg_merge(cfg_root(base), cfg_root(bad), false, &m, &e), 0);
    cr_assert_str_eq(cfg_str(cfg_path(cfg_root(m), "gpu.smz")), "1");
    cfg_free(m);
    cfg_doc_t *clash = parse_ok("gpu: 3\n");
    cr_assert_neq(cfg_merge(cfg_root(base), cfg_root(clash), false, &m, &e), 0);
    cfg_free(clash);
    cfg_free(bad);
    cfg_free(base);
    cfg_free(over);
}

Test(cfg, set_overrides_and_reports_its_origin)
{
    cfg_doc_t *d = parse_ok("a: {b: 1}\n");
    err_t e;
    cr_assert_eq(cfg_set(d, "a.b=[1, 2, 4]", "--set", &e), 0, "%s", e.msg);
    cr_assert_eq(cfg_kind(cfg_path(cfg_root(d), "a.b")), CFG_SEQ);
    cr_assert_eq(cfg_set(d, "x.y.z=pcie4", "--set", &e), 0, "%s", e.msg);
    cfg_node_t *z = cfg_path(cfg_root(d), "x.y.z");
    cr_assert_str_eq(cfg_str(z), "pcie4");
    cr_assert_str_eq(cfg_keypath(z), "x.y.z");
    cr_assert_str_eq(cfg_file(z), "--set x.y.z");
    cr_assert_neq(cfg_set(d, "novalue", "--set", &e), 0);
    cr_assert_neq(cfg_set(d, "a.b.c=1", "--set", &e), 0); /* through a list */
    cr_assert_neq(cfg_set(d, "a.b={", "--set", &e), 0);
    cfg_free(d);
}

Test(cfg, emit_round_trips)
{
    const char *text = "a: 1\nb:\n  - x\n  - \"quoted: yes\"\n  - {}\nc: {d: \"\", e: '-5', f: -5, g: \"a\\nb\"}\n";
    cfg_doc_t *d = parse_ok(text);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cfg_emit(cfg_root(d), fp, 0);
    fclose(fp);
    cfg_doc_t *d2 = parse_ok(buf);
    char *buf2 = NULL;
    size_t len2 = 0;
    fp = open_memstream(&buf2, &len2);
    cfg_emit(cfg_root(d2), fp, 0);
    fclose(fp);
    cr_assert_str_eq(buf, buf2);
    cr_assert_str_eq(cfg_str(cfg_path(cfg_root(d2), "c.g")), "a\nb");
    cr_assert(cfg_quoted(cfg_path(cfg_root(d2), "c.e")));
    free(buf);
    free(buf2);
    cfg_free(d);
    cfg_free(d2);
}

Test(cfg, check_consumed_finds_unread_keys)
{
    cfg_doc_t *d = parse_ok("a: 1\nb: 2\n");
    err_t e;
    cfg_get(cfg_root(d), "a");
    cr_assert_neq(cfg_check_consumed(cfg_root(d), &e), 0);
    cr_assert(strstr(e.msg, "t.yaml:2:4: key 'b': unknown key 'b'"), "%s", e.msg);
    cfg_get(cfg_root(d), "b");
    cr_assert_eq(cfg_check_consumed(cfg_root(d), &e), 0);
    cfg_free(d);
}

Test(atomicio, nothing_half_written)
{
    char dir[] = "/tmp/odsim_atomicXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    err_t e;
    atomicio_t *f;
    cr_assert_eq(atomicio_open(path, &f, &e), 0);
    fputs("partial", atomicio_file(f));
    cr_assert_neq(access(path, F_OK), 0, "target must not exist before commit");
    atomicio_abort(f);
    cr_assert_neq(access(path, F_OK), 0, "abort must leave nothing");
    cr_assert_eq(atomicio_write(path, "whole", 5, &e), 0);
    char *got;
    size_t n;
    cr_assert_eq(atomicio_read_all(path, 100, &got, &n, &e), 0);
    cr_assert_str_eq(got, "whole");
    free(got);
    cr_assert_eq(atomicio_read_all(path, 3, &got, &n, &e), ERR_RANGE);
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/dir/x", dir);
    cr_assert_eq(atomicio_write(bad, "x", 1, &e), ERR_IO);
    cr_assert(strstr(e.msg, bad));
    unlink(path);
    rmdir(dir);
}

static int64_t int_of(const char *text, int want_rc)
{
    cfg_doc_t *d = parse_ok(text);
    int64_t v = -1;
    err_t e;
    int rc = cfg_int64(cfg_get(cfg_root(d), "n"), &v, &e);
    cr_assert_eq(rc, want_rc, "%s: got %d (%s)", text, rc, rc ? e.msg : "");
    cfg_free(d);
    return v;
}

/* Integers are read exactly: neighbours above 2^53 stay distinct (seeds once collided through a double). */
Test(cfg, integers_are_exact)
{
    cr_assert_eq(int_of("n: 9007199254740993\n", 0), 9007199254740993LL);
    cr_assert_eq(int_of("n: 9007199254740992\n", 0), 9007199254740992LL);
    cr_assert_eq(int_of("n: 9223372036854775807\n", 0), INT64_MAX);
    cr_assert_eq(int_of("n: -9223372036854775808\n", 0), INT64_MIN);
    cr_assert_eq(int_of("n: 8796093022207Mi\n", 0), 8796093022207LL << 20);
    cr_assert_eq(int_of("n: 3 k\n", 0), 3000);
    cr_assert_eq(int_of("n: 1e6\n", 0), 1000000);
    cr_assert_eq(int_of("n: 1.5Ki\n", 0), 1536);
    int_of("n: 9223372036854775808\n", ERR_RANGE);
    int_of("n: 8796093022208Mi\n", ERR_RANGE);
    int_of("n: 1e17\n", ERR_RANGE);
    int_of("n: 2.5\n", ERR_INVAL);
    int_of("n: 12x\n", ERR_INVAL);
}

/* A NUL byte ends libyaml's stream: the reader rejects it with its line instead of dropping the rest. */
Test(cfg, a_nul_byte_is_an_error_with_its_line)
{
    static const char text[] = "a: 1\nb: 2\x00\nc: 3\n";
    cfg_doc_t *d = NULL;
    err_t e;
    cr_assert_eq(cfg_parse_string("p.yaml", text, sizeof text - 1, &d, &e), ERR_PARSE);
    cr_assert_null(d);
    cr_assert(strstr(e.msg, "p.yaml:2: a NUL byte"), "%s", e.msg);
}

/* A duplicate among 80K keys is found (by a hash of the keys: a scan per key once took 31 s) and the
 * message names both lines. */
Test(cfg, a_duplicate_among_many_keys_names_both_lines)
{
    enum { N = 80000 };
    char *text = malloc((size_t)N * 24 + 64), *w = text;
    for (int i = 0; i < N; i++) w += sprintf(w, "k%d: %d\n", i, i);
    w += sprintf(w, "k40000x: 1\nk123: 2\n");
    cfg_doc_t *d = NULL;
    err_t e;
    cr_assert_eq(cfg_parse_string("big.yaml", text, (size_t)(w - text), &d, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, "big.yaml:80002:1: duplicate key 'k123' (first at line 124)"), "%s", e.msg);
    cr_assert_null(d);
    /* without the duplicate every key is there and found */
    w -= strlen("k123: 2\n");
    cr_assert_eq(cfg_parse_string("big.yaml", text, (size_t)(w - text), &d, &e), 0, "%s", e.msg);
    cr_assert_eq(cfg_size(cfg_root(d)), N + 1);
    cr_assert_str_eq(cfg_str(cfg_get(cfg_root(d), "k79999")), "79999");
    cfg_free(d);
    free(text);
}
