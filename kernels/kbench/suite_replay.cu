/* suite_replay.cu: `kbench replay [-o FILE.csv] [--check] WORKLOAD...`, the generic runner of
 * replay workloads (docs/replay.md, written by `odsim workload gen` and `odsim plan --emit-replay`).
 *
 * Every file is parsed first (kernels/replay_fmt.c), so a bad one stops the run before any GPU
 * time is spent; --check stops there, printing a line per workload, and never starts CUDA. Then
 * this process, which never starts CUDA itself, forks: one child writes the CSV's header lines
 * (kb_csv_open reads the device), then each workload runs in a child of its own (replay_run.h), so
 * that a workload whose CUDA calls fail cannot spoil the next, and procs mode can fork its sessions
 * before CUDA starts. The measurements come back through shared memory; this process writes the
 * rows: one op=session_step row per session and one aggregate row per workload.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "kb.h"
#include "replay_fmt.h"
#include "replay_run.h"

#define RP_MAX_FILE_BYTES (16u << 20)   /* as rf_load */

static int usage(void)
{
    fprintf(stderr, "usage: kbench replay [-o FILE.csv] [--check] WORKLOAD...\n");
    return 2;
}

/* Reads and parses the workload at path; *fnv: the FNV-1a 64 of the bytes parsed. Returns 0, or -1
 * with "PATH:LINE: what" (or "PATH: what") in err. */
static int load(const char *path, rf_workload_t *w, uint64_t *fnv, char *err, size_t errn)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = (char *)malloc(RP_MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, RP_MAX_FILE_BYTES + 1, f) : 0;
    int rc = -1;
    if (!buf)
        snprintf(err, errn, "%s: out of memory", path);
    else if (ferror(f))
        snprintf(err, errn, "%s: read error", path);
    else if (n > RP_MAX_FILE_BYTES)
        snprintf(err, errn, "%s: larger than 16 MiB", path);
    else if ((rc = rf_parse(buf, n, path, w, err, errn)) == 0)
        *fnv = rf_fnv1a(buf, n);
    free(buf);
    fclose(f);
    return rc;
}

static uint64_t region_total(const rf_workload_t *w)
{
    uint64_t b = 0;
    for (uint32_t s = 0; s < w->n_sessions; s++)
        b += w->sessions[s].region_bytes;
    return b;
}

/* Bytes a session's step moves over the link (its transfers' pieces). */
static uint64_t link_bytes(const rf_session_t *s)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < s->n_ops; i++)
        if (rf_kind_is_transfer(s->ops[i].kind))
            b += s->ops[i].pieces * s->ops[i].piece_bytes;
    return b;
}

static void summary(const char *path, const rf_workload_t *w, uint64_t fnv)
{
    uint32_t ops = 0;
    for (uint32_t s = 0; s < w->n_sessions; s++)
        ops += w->sessions[s].n_ops;
    uint64_t region = region_total(w);
    printf("%s: workload %s, mode %s, %u sessions, %u ops, regions %llu bytes (%.2f GiB), fnv %016llx\n", path,
           w->name, rf_mode_name(w->mode), w->n_sessions, ops, (unsigned long long)region,
           region / (double)KB_GIB, (unsigned long long)fnv);
}

/* The CSV's header lines, written by a child (kb_csv_open starts CUDA to read the device). */
static int write_header(const char *out)
{
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        perror("kbench replay: fork");
        return -1;
    }
    if (p == 0) {
        kb_opts_t o;
        memset(&o, 0, sizeof o);
        o.model = "none";
        o.out_path = out;
        kb_csv_t *c = kb_csv_open(out, "replay", "hostalloc (cudaHostAlloc mapped|portable)", &o);
        kb_csv_meta(c, "replay", "steps timed on the host (CLOCK_MONOTONIC, from just before a step's first op to "
                    "the return of its final sync); warmup_steps unmeasured (at least one); windows aligned (a "
                    "common start once every session is warmed up and checked; window_ms and at least min_steps "
                    "measured steps each, at most %d; then unmeasured steps until every window has closed); each "
                    "workload in a process of its own; rows: op=session_step per session (concurrent_id; policy "
                    "MODE:N; procs and streams: processes and host threads a process) and one per workload with "
                    "concurrent_id empty (every session's steps pooled, per_s summed); bytes_moved: a session's "
                    "transfer bytes a step; workload_fnv: FNV-1a 64 of the workload file's bytes, 16 hex digits",
                    RP_MAX_STEPS);
        kb_csv_meta(c, "checks", "after the warm-up each session runs each op alone once: h2d, h2d2d, h2dbatch and "
                    "gather must land the host bytes of their first and last pieces (fresh pseudo-random bytes) "
                    "in their device pieces, d2h its device pieces (random bytes) in the host slots of its first "
                    "and last pieces (memcmp); hbm's per-block sums must add up to the sum of its buffer's words; "
                    "compute's per-block sums must match the host's double-precision value within 1e-3; a "
                    "workload failing any check has no rows");
        kb_csv_close(c);
        fflush(NULL);
        _exit(0);
    }
    int st = 0;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return 0;
}

/* One row per session and the workload's aggregate row. */
static void emit(kb_csv_t *csv, const rf_workload_t *w, uint64_t fnv, rp_shared_t *sh)
{
    uint32_t n = w->n_sessions;
    char pol[32], hex[17];
    snprintf(pol, sizeof pol, "%s:%u", rf_mode_name(w->mode), n);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv);
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += (size_t)sh->res[i].steps;
    double *all = (double *)malloc((total ? total : 1) * sizeof(double)), rate = 0;
    if (!all)
        kb_die("out of host memory", __FILE__, __LINE__);
    size_t na = 0;
    for (uint32_t i = 0; i <= n; i++) {
        kb_row_t r = kb_row("session_step", w->name);
        r.method = "replay";
        r.allocator = "hostalloc";
        r.policy = pol;
        r.procs = w->mode == RF_MODE_PROCS ? (int)n : 1;
        r.streams = w->mode == RF_MODE_STREAMS ? (int)n : 1;
        r.workload_fnv = hex;
        if (i < n) {
            rp_result_t *s = &sh->res[i];
            if (s->capped)
                fprintf(stderr, "kbench replay: %s session %u: window closed at %d steps (the cap)\n", w->name,
                        i, RP_MAX_STEPS);
            memcpy(all + na, s->lat_us, s->steps * sizeof(double));
            na += (size_t)s->steps;
            r.concurrent_id = (int)i;
            r.region_bytes = (long long)w->sessions[i].region_bytes;
            r.bytes_moved = (double)link_bytes(&w->sessions[i]);
            r.st = kb_stats(s->lat_us, s->steps);
            r.per_s = s->wall_s > 0 ? s->steps / s->wall_s : 0;
            rate += r.per_s;
        } else {
            r.region_bytes = (long long)region_total(w);
            r.st = kb_stats(all, (int)na);
            r.per_s = rate;
        }
        kb_csv_row(csv, &r);
    }
    free(all);
}

/* Runs the workload at path in a child; its rows when it succeeded. Returns 0, or 1 when it failed. */
static int run_one(kb_csv_t *csv, const char *path, rf_workload_t *w, rp_shared_t *sh)
{
    char err[512];
    uint64_t fnv = 0;
    if (load(path, w, &fnv, err, sizeof err) != 0) {
        fprintf(stderr, "kbench replay: %s\n", err);
        return 1;
    }
    fprintf(stderr, "replay: %s (%s, %s, %u sessions)\n", w->name, path, rf_mode_name(w->mode), w->n_sessions);
    pid_t self = getpid();
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        perror("kbench replay: fork");
        return 1;
    }
    if (p == 0) {
        rp_die_with_parent(self);
        int rc = rp_run(w, sh);
        fflush(NULL);
        _exit(rc ? 1 : 0);
    }
    int st = 0;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "kbench replay: %s: killed by signal %d (%s)\n", w->name, WTERMSIG(st),
                    strsignal(WTERMSIG(st)));
        fprintf(stderr, "kbench replay: %s (%s) failed: no rows\n", w->name, path);
        return 1;
    }
    emit(csv, w, fnv, sh);
    fflush(NULL);   /* a run stopped by a time limit keeps every workload it finished */
    return 0;
}

int kb_replay(int argc, char **argv)
{
    const char *out = NULL;
    int check = 0, nf = 0;
    const char **files = (const char **)malloc((argc + 1) * sizeof *files);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--check"))
            check = 1;
        else if (argv[i][0] == '-')
            return usage();
        else
            files[nf++] = argv[i];
    }
    if (nf == 0)
        return usage();
    rf_workload_t *w = (rf_workload_t *)malloc(sizeof *w);
    char err[512];
    uint64_t fnv;
    for (int i = 0; i < nf; i++) {
        if (load(files[i], w, &fnv, err, sizeof err) != 0) {
            fprintf(stderr, "kbench replay: %s\n", err);
            return 2;
        }
        if (check)
            summary(files[i], w, fnv);
    }
    if (check)
        return 0;
    if (write_header(out) != 0) {
        fprintf(stderr, "kbench replay: could not write the CSV's header (is there a GPU? see above)\n");
        if (out)
            unlink(out);          /* no half-written header left behind */
        return 2;
    }
    kb_csv_t *csv = kb_csv_append(out, "replay", NULL);
    rp_shared_t *sh = rp_shared_new();
    if (!sh)
        return 2;
    int fail = 0;
    for (int i = 0; i < nf; i++)
        fail |= run_one(csv, files[i], w, sh);
    kb_csv_close(csv);
    rp_shared_free(sh);
    free(w);
    free(files);
    return fail;
}
