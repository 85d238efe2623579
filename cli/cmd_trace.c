/* odsim trace — generate, import, inspect and dump session traces (traces/). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "common/cfg.h"
#include "traces/import.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"
#include "traces/tracegen.h"

extern const cmd_t cmd_trace;

static const char usage[] =
    "usage:\n"
    "  odsim trace gen [--config FILE] [--seed S] -o OUT.pb\n"
    "      synthetic agent sessions; every parameter has a documented default (see --params)\n"
    "  odsim trace gen --params\n"
    "      print the generator's parameters: key, type, default, range, meaning\n"
    "  odsim trace import FORMAT FILE -o OUT.pb [--scale K | --scale-to TOKENS] [--min-shared-blocks M]\n"
    "      FORMAT: mooncake (JSONL), azure (CSV), tracelab (JSONL); rules in traces/import.h\n"
    "      --scale K          stretch every context by K >= 1, keeping arrivals and turn structure\n"
    "      --scale-to TOKENS  stretch so the largest context is TOKENS (suffixes k, M, Ki, Mi allowed)\n"
    "      --min-shared-blocks M  mooncake: full 512-token blocks a continuation must share (default 2)\n"
    "  odsim trace info FILE [--json] [--prefill-tps P] [--decode-tps D]\n"
    "      sessions, turns, time span, percentiles of context, prefill, decode and think time, peak\n"
    "      concurrency (sessions alive at once; a turn's service time counts only under assumed per-session\n"
    "      rates P and D in tokens/s)\n"
    "  odsim trace dump FILE\n"
    "      the header and every session as JSON lines\n";

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    unsigned long long mul = 1;
    if (!strcmp(end, "k") || !strcmp(end, "K")) mul = 1000ull;
    else if (!strcmp(end, "M")) mul = 1000000ull;
    else if (!strcmp(end, "G")) mul = 1000000000ull;
    else if (!strcmp(end, "Ki")) mul = 1ull << 10;
    else if (!strcmp(end, "Mi")) mul = 1ull << 20;
    else if (!strcmp(end, "Gi")) mul = 1ull << 30;
    else if (*end) return -1;
    if (v > UINT64_MAX / mul) return -1;
    *out = v * mul;
    return 0;
}

static int trace_gen(int argc, char **argv)
{
    const char *config = NULL, *out = NULL;
    uint64_t seed = 0;
    int have_seed = 0, params = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            if (parse_u64(argv[++i], &seed)) return cmd_usage_error(&cmd_trace, "gen: --seed '%s': not a number", argv[i]);
            have_seed = 1;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--params")) params = 1;
        else return cmd_usage_error(&cmd_trace, "gen: unexpected argument '%s'", argv[i]);
    }
    if (params) {
        tracegen_params_describe(stdout);
        return 0;
    }
    if (!out) return cmd_usage_error(&cmd_trace, "gen: -o OUT.pb is required");
    err_t e;
    err_clear(&e);
    cfg_doc_t *doc = NULL;
    if (config && cfg_parse_file(config, &doc, &e)) return cmd_fail("trace", "%s", e.msg);
    uint64_t ns = 0, nt = 0;
    int rc = tracegen_write_file(doc ? cfg_root(doc) : NULL, have_seed ? &seed : NULL, out, &ns, &nt, &e);
    cfg_free(doc);
    if (rc) return cmd_fail("trace", "gen: %s", e.msg);
    printf("wrote %s: %llu sessions, %llu turns\n", out, (unsigned long long)ns, (unsigned long long)nt);
    return 0;
}

static int trace_import(int argc, char **argv)
{
    const char *fmt = NULL, *file = NULL, *out = NULL;
    trace_import_opts_t o;
    trace_import_opts_default(&o);
    int have_scale = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc) {
            char *end;
            errno = 0;
            o.scale = strtod(argv[++i], &end);
            if (errno || end == argv[i] || *end) return cmd_usage_error(&cmd_trace, "import: --scale '%s': not a number", argv[i]);
            have_scale = 1;
        } else if (!strcmp(argv[i], "--scale-to") && i + 1 < argc) {
            if (parse_u64(argv[++i], &o.scale_to_tokens) || o.scale_to_tokens == 0)
                return cmd_usage_error(&cmd_trace, "import: --scale-to '%s': not a positive token count", argv[i]);
        } else if (!strcmp(argv[i], "--min-shared-blocks") && i + 1 < argc) {
            uint64_t m;
            if (parse_u64(argv[++i], &m) || m < 1 || m > 1000000)
                return cmd_usage_error(&cmd_trace, "import: --min-shared-blocks '%s': not an integer in [1, 1000000]", argv[i]);
            o.min_shared_blocks = (int)m;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cmd_usage_error(&cmd_trace, "import: unexpected option '%s'", argv[i]);
        } else if (!fmt) fmt = argv[i];
        else if (!file) file = argv[i];
        else return cmd_usage_error(&cmd_trace, "import: unexpected argument '%s'", argv[i]);
    }
    if (!fmt || !file || !out) return cmd_usage_error(&cmd_trace, "import: FORMAT FILE -o OUT.pb are required");
    if (have_scale && o.scale_to_tokens) return cmd_usage_error(&cmd_trace, "import: --scale and --scale-to exclude each other");
    err_t e;
    err_clear(&e);
    trace_format_t f;
    if (trace_format_parse(fmt, &f, &e)) return cmd_usage_error(&cmd_trace, "import: %s", e.msg);
    trace_t t;
    int rc = trace_import_file(f, file, &o, &t, &e);
    if (!rc) rc = trace_write_file(out, &t, &e);
    if (rc) {
        trace_free(&t);
        return cmd_fail("trace", "import %s: %s", fmt, e.msg);
    }
    const trace_header_t *h = &t.hdr;
    const char *forks = trace_header_get(h, true, "forks");
    printf("imported %s (%s rows): %s sessions, %s turns, %s one-turn sessions%s%s%s -> %s\n", file,
           trace_header_get(h, true, "rows"), trace_header_get(h, true, "sessions"), trace_header_get(h, true, "turns"),
           trace_header_get(h, true, "one_turn_sessions"), forks ? ", " : "", forks ? forks : "", forks ? " forks" : "", out);
    if (h->scale_factor != 1.0)
        printf("contexts stretched x%.6g: largest input %llu -> %llu tokens\n", h->scale_factor,
               (unsigned long long)h->unscaled_max_input_tokens, (unsigned long long)trace_max_input(&t));
    trace_free(&t);
    return 0;
}

static int trace_info(int argc, char **argv)
{
    const char *file = NULL;
    int json = 0;
    double ptps = 0, dtps = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if ((!strcmp(argv[i], "--prefill-tps") || !strcmp(argv[i], "--decode-tps")) && i + 1 < argc) {
            char *end;
            double v = strtod(argv[i + 1], &end);
            if (end == argv[i + 1] || *end || !(v > 0) || v > 1e12)
                return cmd_usage_error(&cmd_trace, "info: %s '%s': not a positive rate", argv[i], argv[i + 1]);
            if (argv[i][2] == 'p') ptps = v;
            else dtps = v;
            i++;
        }
        else if (argv[i][0] == '-' && argv[i][1]) return cmd_usage_error(&cmd_trace, "info: unexpected option '%s'", argv[i]);
        else if (!file) file = argv[i];
        else return cmd_usage_error(&cmd_trace, "info: unexpected argument '%s'", argv[i]);
    }
    if (!file) return cmd_usage_error(&cmd_trace, "info: FILE is required");
    err_t e;
    err_clear(&e);
    trace_summary_t s;
    trace_header_t h;
    if (trace_stats_file(file, ptps, dtps, &s, &h, &e)) return cmd_fail("trace", "info: %s", e.msg);
    if (json) {
        json_t *o = trace_summary_json(file, &h, &s);
        char *txt = o ? json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(o);
        if (!txt) {
            trace_header_free(&h);
            return cmd_fail("trace", "info: out of memory");
        }
        printf("%s\n", txt);
        free(txt);
    } else {
        trace_summary_print(stdout, file, &h, &s);
    }
    trace_header_free(&h);
    return 0;
}

static json_t *jtime(int64_t t) { return t == TRACE_NONE ? json_null() : json_integer((json_int_t)t); }

static int trace_dump(int argc, char **argv)
{
    if (argc != 2) return cmd_usage_error(&cmd_trace, "dump: FILE is required");
    err_t e;
    err_clear(&e);
    trace_reader_t *r;
    if (trace_reader_open(argv[1], &r, &e)) return cmd_fail("trace", "dump: %s", e.msg);
    const trace_header_t *h = trace_reader_header(r);
    json_t *hj = json_pack("{s:s,s:s,s:b,s:b,s:f}", "source", h->source, "made_by", h->made_by, "open_loop", h->open_loop,
                           "closed_loop", h->closed_loop, "scale_factor", h->scale_factor);
    char *txt = json_dumps(hj, JSON_COMPACT);
    printf("%s\n", txt);
    free(txt);
    json_decref(hj);
    trace_session_t s;
    trace_session_init(&s);
    int rc;
    while ((rc = trace_reader_next_session(r, &s, &e)) == 1) {
        json_t *turns = json_array();
        for (size_t i = 0; i < s.n_turns; i++) {
            const trace_turn_t *t = &s.turns[i];
            json_array_append_new(turns, json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:i}", "arrival_ns", jtime(t->arrival_ns),
                                                   "think_ns", jtime(t->think_ns), "input", (json_int_t)t->input_tokens,
                                                   "prefill", (json_int_t)t->prefill_tokens, "decode",
                                                   (json_int_t)t->decode_tokens, "shared_prefix",
                                                   (json_int_t)t->shared_prefix_tokens, "shared_prefix_id",
                                                   (json_int_t)t->shared_prefix_id, "kind", (int)t->kind));
        }
        json_t *sj = json_pack("{s:I,s:o,s:o,s:o,s:o,s:I,s:o}", "id", (json_int_t)s.id, "arrival_ns", jtime(s.arrival_ns),
                               "user", jtime(s.user), "start_think_ns", jtime(s.start_think_ns), "forked_from",
                               jtime(s.forked_from), "fork_tokens", (json_int_t)s.fork_tokens, "turns", turns);
        if (s.key) json_object_set_new(sj, "key", json_string(s.key));
        txt = json_dumps(sj, JSON_COMPACT);
        printf("%s\n", txt);
        free(txt);
        json_decref(sj);
    }
    trace_session_free(&s);
    trace_reader_close(r);
    if (rc < 0) return cmd_fail("trace", "dump: %s", e.msg);
    return 0;
}

static int trace_main(int argc, char **argv)
{
    if (argc < 2) return cmd_usage_error(&cmd_trace, "a sub-command is required (gen, import, info, dump)");
    const char *sub = argv[1];
    if (!strcmp(sub, "gen")) return trace_gen(argc - 1, argv + 1);
    if (!strcmp(sub, "import")) return trace_import(argc - 1, argv + 1);
    if (!strcmp(sub, "info")) return trace_info(argc - 1, argv + 1);
    if (!strcmp(sub, "dump")) return trace_dump(argc - 1, argv + 1);
    if (cmd_is_help(sub)) {
        fputs(usage, stdout);
        return 0;
    }
    return cmd_usage_error(&cmd_trace, "unknown sub-command '%s' (gen, import, info, dump)", sub);
}

const cmd_t cmd_trace = {"trace", "generate, import, inspect session traces (gen, import, info, dump)", usage, trace_main};
