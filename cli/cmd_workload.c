/* odsim workload — random replay workloads (validation/wlgen.h) and a check of replay files
 * (docs/replay.md, read by kernels/replay_fmt.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cmd.h"
#include "common/atomicio.h"
#include "validation/wlgen.h"

extern const cmd_t cmd_workload;

static const char usage[] =
    "usage:\n"
    "  odsim workload gen --set random_dev|random [--first I] [--count N] [--stats] -o DIR\n"
    "      writes DIR/NAME.replay (created if absent) for workloads I .. I+N-1 of the set (default: all of\n"
    "      it; random_dev: rdev-0000..0119, seeds 1000000+i; random, sealed: rsealed-0000..0239, seeds\n"
    "      2000000+i), each drawn from its seed alone; the distributions are `odsim params replay`\n"
    "      --stats  print the strata of the workloads written (mode, sessions, short steps with syncs)\n"
    "  odsim workload check FILE... [--json]\n"
    "      parses each replay workload and prints one line: name, mode, sessions, ops, the sessions' host\n"
    "      regions together (GiB), sessions with a sync inside their step, and the sum of the ops' times\n"
    "      at the generator's nominal rates (ms; not odsim's prediction); exits 1 naming FILE:LINE on error\n"
    "      --json  one JSON array instead: [{file, name, mode, sessions, ops, region_bytes,\n"
    "              sessions_sync_inside, nominal_ms}] (files that fail to parse are named on stderr)\n";

/* Counts over the workloads generated, for --stats. */
typedef struct {
    uint32_t n, mode[RF_MODE_COUNT], stratum[WLGEN_STRATA], short_sync, long_sync, sessions, idle, ops, after;
    uint32_t kind[RF_OP_COUNT];
    uint64_t pinned_max;
} gen_stats_t;

static void stats_add(gen_stats_t *st, const rf_workload_t *w, const wlgen_info_t *in)
{
    st->n++;
    st->mode[w->mode]++;
    st->stratum[in->stratum]++;
    uint32_t inside = 0;
    uint64_t pinned = 0;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const rf_session_t *s = &w->sessions[i];
        inside += wlgen_sync_inside(s);
        pinned += s->region_bytes;
        st->idle += s->idle_us > 0;
        st->ops += s->n_ops;
        for (uint32_t j = 0; j < s->n_ops; j++) {
            st->kind[s->ops[j].kind]++;
            st->after += s->ops[j].n_after;
        }
    }
    st->sessions += w->n_sessions;
    if (in->short_step && inside == w->n_sessions) st->short_sync++;
    if (!in->short_step && inside > 0) st->long_sync++;
    if (pinned > st->pinned_max) st->pinned_max = pinned;
}

static void stats_print(const gen_stats_t *st, const wlgen_params_t *p)
{
    printf("workloads %u\n", st->n);
    for (int m = 0; m < RF_MODE_COUNT; m++) printf("mode.%s %u\n", rf_mode_name(m), st->mode[m]);
    printf("sessions.1 %u\nsessions.2-%lld %u\nsessions.%lld-%lld %u\n", st->stratum[0], (long long)p->sessions_mid_max,
           st->stratum[1], (long long)p->sessions_mid_max + 1, (long long)p->sessions_max, st->stratum[2]);
    printf("short_with_sync %u\nlong_with_sync %u\n", st->short_sync, st->long_sync);
    printf("sessions_total %u\nsessions_idle %u\nops %u\nafter_edges %u\n", st->sessions, st->idle, st->ops, st->after);
    for (int k = 0; k < RF_OP_COUNT; k++) printf("ops.%s %u\n", rf_kind_name(k), st->kind[k]);
    printf("pinned_max_gib %.3f\n", (double)st->pinned_max / (1u << 30));
}

/* The output directory: created when absent; anything else there but a directory is refused. */
static int out_dir(const char *dir)
{
    struct stat sb;
    if (mkdir(dir, 0777) && errno != EEXIST) return cmd_fail("workload", "gen: %s: cannot create directory (%s)", dir, strerror(errno));
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) return cmd_fail("workload", "gen: %s: exists and is not a directory", dir);
    return 0;
}

static int write_one(const char *dir, const wlgen_set_t *set, const wlgen_info_t *in, const rf_workload_t *w, err_t *e)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.replay", dir, w->name) >= (int)sizeof path)
        return err_set(e, ERR_INVAL, "%s: path too long", dir);
    atomicio_t *f;
    int rc = atomicio_open(path, &f, e);
    if (rc) return rc;
    if (wlgen_write(atomicio_file(f), set, in, w)) {
        atomicio_abort(f);
        return err_set(e, ERR_IO, "%s: write failed", path);
    }
    return atomicio_commit(f, e);
}

static int workload_gen(int argc, char **argv)
{
    const char *set_name = NULL, *dir = NULL;
    long first = 0, count = -1;
    int stats = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc) set_name = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--first") && i + 1 < argc) {
            if (cmd_parse_long(argv[++i], 0, 1000000, &first))
                return cmd_usage_error(&cmd_workload, "gen: --first '%s': not an index", argv[i]);
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            if (cmd_parse_long(argv[++i], 1, 1000000, &count))
                return cmd_usage_error(&cmd_workload, "gen: --count '%s': not a positive count", argv[i]);
        } else if (!strcmp(argv[i], "--stats")) stats = 1;
        else return cmd_usage_error(&cmd_workload, "gen: unexpected argument '%s'", argv[i]);
    }
    if (!set_name || !dir) return cmd_usage_error(&cmd_workload, "gen: --set and -o DIR are required");
    const wlgen_set_t *set = wlgen_set_find(set_name);
    if (!set) return cmd_usage_error(&cmd_workload, "gen: unknown set '%s' (random_dev, random)", set_name);
    if (count < 0) count = first < (long)set->count ? (long)set->count - first : 1;
    if (first + count > (long)set->count)
        return cmd_usage_error(&cmd_workload, "gen: set %s has %u workloads (indices 0..%u), not %ld..%ld", set->name,
                               set->count, set->count - 1, first, first + count - 1);
    err_t e;
    err_clear(&e);
    wlgen_params_t p;
    if (wlgen_params_default(&p, &e)) return cmd_fail("workload", "gen: %s", e.msg);
    if (out_dir(dir)) return 1;
    rf_workload_t *w = malloc(sizeof *w);
    if (!w) return cmd_fail("workload", "gen: out of memory");
    gen_stats_t st = {0};
    int rc = 0;
    for (long i = first; !rc && i < first + count; i++) {
        wlgen_info_t in;
        rc = wlgen_make(&p, set, (uint32_t)i, w, &in, &e);
        if (!rc) rc = write_one(dir, set, &in, w, &e);
        if (!rc) stats_add(&st, w, &in);
    }
    free(w);
    if (rc) return cmd_fail("workload", "gen: %s", e.msg);
    if (stats) stats_print(&st, &p);
    else printf("wrote %ld workloads of set %s to %s\n", count, set->name, dir);
    return 0;
}

static int workload_check(int argc, char **argv)
{
    bool json = false;
    int nf = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--json")) json = true;
        else argv[++nf] = argv[a];   /* the files, in order, after argv[0] */
    }
    argc = nf + 1;
    if (argc < 2) return cmd_usage_error(&cmd_workload, "check: FILE... is required");
    json_t *arr = json ? json_array() : NULL;
    err_t e;
    err_clear(&e);
    wlgen_params_t p;
    if (wlgen_params_default(&p, &e)) return cmd_fail("workload", "check: %s", e.msg);
    rf_workload_t *w = malloc(sizeof *w);
    if (!w) return cmd_fail("workload", "check: out of memory");
    int rc = 0;
    for (int a = 1; a < argc; a++) {
        char err[512];
        if (rf_load(argv[a], w, err, sizeof err)) {
            cmd_fail("workload", "check: %s", err);
            rc = 1;
            continue;
        }
        uint32_t ops = 0, inside = 0;
        uint64_t region = 0;
        double nominal_s = 0;
        for (uint32_t i = 0; i < w->n_sessions; i++) {
            const rf_session_t *s = &w->sessions[i];
            ops += s->n_ops;
            region += s->region_bytes;
            inside += wlgen_sync_inside(s);
            for (uint32_t j = 0; j < s->n_ops; j++) nominal_s += wlgen_op_nominal_s(&p, &s->ops[j]);
        }
        if (arr)
            json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:i,s:i,s:I,s:i,s:f}", "file", argv[a], "name", w->name,
                                                 "mode", rf_mode_name(w->mode), "sessions", (int)w->n_sessions, "ops",
                                                 (int)ops, "region_bytes", (json_int_t)region, "sessions_sync_inside",
                                                 (int)inside, "nominal_ms", nominal_s * 1e3));
        else
            printf("%s mode=%s sessions=%u ops=%u region_gib=%.3f sync_inside=%u/%u nominal_ms=%.3f\n", w->name,
                   rf_mode_name(w->mode), w->n_sessions, ops, (double)region / (1u << 30), inside, w->n_sessions,
                   nominal_s * 1e3);
    }
    free(w);
    if (json && cmd_put_json("workload", arr)) rc = 1;
    return rc;
}

static int workload_main(int argc, char **argv)
{
    if (argc < 2) return cmd_usage_error(&cmd_workload, "a sub-command is required (gen, check)");
    const char *sub = argv[1];
    if (!strcmp(sub, "gen")) return workload_gen(argc - 1, argv + 1);
    if (!strcmp(sub, "check")) return workload_check(argc - 1, argv + 1);
    if (cmd_is_help(sub)) {
        fputs(usage, stdout);
        return 0;
    }
    return cmd_usage_error(&cmd_workload, "unknown sub-command '%s' (gen, check)", sub);
}

const cmd_t cmd_workload = {"workload", "random replay workloads and a check of replay files (gen, check)", usage,
                            workload_main};
