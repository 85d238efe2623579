/* kb.h: the kbench harness's shared pieces: error checks, timing, statistics,
 * the CSV writer (DESIGN.md, "kbench CSV") and the suite entry points.
 *
 * kbench is a measurement tool, not a library: a failed CUDA call is fatal
 * (kb_die prints where and exits with status 2); a failed reference check is
 * reported by the suite, which skips that kernel's timings and makes kbench
 * exit with status 1.
 */
#ifndef KB_H
#define KB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cuda_runtime.h>

#define KBENCH_VERSION "0.1.0"
#ifndef KBENCH_COMMIT
#define KBENCH_COMMIT "unknown"
#endif
#ifndef KBENCH_SOURCES
#define KBENCH_SOURCES "unknown"
#endif

#define KB_KIB ((size_t)1 << 10)
#define KB_MIB ((size_t)1 << 20)
#define KB_GIB ((size_t)1 << 30)

/* Abort with a message naming the failed call (fatal CUDA errors only). */
void kb_die(const char *what, const char *file, int line);
#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess)                                                  \
            kb_die(cudaGetErrorString(e_), __FILE__, __LINE__);                 \
    } while (0)
#define CKL() CK(cudaGetLastError())

/* Options common to every suite. */
typedef struct {
    int quick;                 /* --quick: the reduced grid (whole run < 1 min) */
    const char *out_path;      /* -o FILE.csv, or NULL for stdout */
    const char *model;         /* --model, default qwen3-8b */
    size_t max_region;         /* --max-region BYTES for host regions */
    const char *only;          /* --only SECTION: link, that section alone (cudaHostAlloc); kernels:
                                * attn or after_layer, those rows alone */
} kb_opts_t;

/* Percentiles of repeated timings, microseconds. */
typedef struct {
    int reps;
    double med, p10, p90, p99, mean;
} kb_stats_t;

/* Sort t[0..n) in place and summarise it. */
kb_stats_t kb_stats(double *t_us, int n);

/* One timed region: fn enqueues work on stream s; prep (may be NULL) runs
 * before each repetition outside the timed events (e.g. an L2 flush). */
typedef void (*kb_fn)(void *ctx, cudaStream_t s);
typedef struct {
    int warmup, min_reps, max_reps;
    double max_seconds;        /* stop adding repetitions after this much */
} kb_timing_t;

/* Time fn with CUDA events (after warm-up), per repetition. */
kb_stats_t kb_time(kb_fn fn, kb_fn prep, void *ctx, cudaStream_t s, const kb_timing_t *tm);
/* kb_time with post (may be NULL) queued behind each repetition's end event, untimed, as the work
 * that follows a kernel in a decode is queued behind it while it runs. */
kb_stats_t kb_time_around(kb_fn fn, kb_fn prep, kb_fn post, void *ctx, cudaStream_t s, const kb_timing_t *tm);

/* Repetitions for a p99 with three samples above it (interpolated at 0.99 (n - 1)), taken of
 * ops shorter than KB_SHORT_OP_US within the time budget. */
#define KB_P99_REPS 300
#define KB_SHORT_OP_US 1000.0

/* Default timing for a kernel whose one run takes about est_us microseconds. */
kb_timing_t kb_timing_for(double est_us, int quick);

/* Evicts the L2 cache (reads an HBM buffer four times its size; leaves clean lines) on stream s. */
void kb_l2_flush(cudaStream_t s);
/* Reads the first `bytes` (up to 4 GiB) of a device buffer allocated on first use: HBM pages touched. */
void kb_hbm_read(size_t bytes, cudaStream_t s);

/* One CSV row; integer fields < 0 and NULL strings are written empty. */
typedef struct {
    const char *op, *variant;
    long long n_tokens, heads, bits, k, batch, piece_bytes, region_bytes, pieces, blocks;
    const char *allocator;
    int streams, procs;
    const char *policy, *placement, *layout;
    double bytes_moved;
    kb_stats_t st;
    double per_s;              /* operations per second; < 0: empty */
    const char *method;
    int concurrent_id, qheads;
    long long chunk_tokens;
    double ref_gbps;           /* the measured ceiling this row compares with */
    const char *workload_fnv;  /* replay: the workload file's FNV-1a 64, hex */
} kb_row_t;

/* A row with every field unset. */
kb_row_t kb_row(const char *op, const char *variant);

/* The open CSV of one suite. */
typedef struct kb_csv kb_csv_t;

/* Open path (NULL: stdout) and write the first "# key: value" header lines.
 * allocator names the suite's default host allocator. Fatal on I/O error. */
kb_csv_t *kb_csv_open(const char *path, const char *suite, const char *allocator,
                      const kb_opts_t *o);
/* Open path (NULL: stdout) to append rows below the header lines another process wrote with
 * kb_csv_open (a suite whose process must not start CUDA); model fills the model column (NULL:
 * empty). The first row still writes key_sigma2 and the column row. Fatal on I/O error. */
kb_csv_t *kb_csv_append(const char *path, const char *suite, const char *model);
/* Add a "# key: value" line (only before the first row). */
void kb_csv_meta(kb_csv_t *c, const char *key, const char *fmt, ...);
/* Write one row; gbps is bytes_moved / t_med; prints a short line to stderr. The first row
 * ends the header: its last line `# key_sigma2: v0 .. v127` (the synthetic keys' per-channel
 * variances, kref_key_sigma squared), then the column row. */
void kb_csv_row(kb_csv_t *c, const kb_row_t *r);
/* Flush and close (stdout is only flushed). */
void kb_csv_close(kb_csv_t *c);

/* Measured ceilings, set by kb_measure_ceilings. */
typedef struct {
    double hbm_gbps;           /* device-to-device copy, read + write */
    double h2d_gbps;           /* 256 MiB pinned H2D copies, back to back */
    double d2h_gbps;
} kb_ceilings_t;
extern kb_ceilings_t kb_ceil;
/* Measure the ceilings (about 0.5 s) and add them to the CSV header. */
void kb_measure_ceilings(kb_csv_t *c);

/* Model shapes (DESIGN.md, Shapes): the step and concurrency suites take
 * these as parameters. */
typedef struct {
    const char *name;
    int layers, q_heads, kv_heads, hidden, ffn, vocab;
} kb_model_t;
/* The shape named name, or NULL when unknown. */
const kb_model_t *kb_model(const char *name);

/* Number of multiprocessors of device 0. */
int kb_sm_count(void);

/* The whole of n bytes to / from a pipe (processes forked by a suite); 0, or -1 on error or EOF. */
int kb_write_all(int fd, const void *p, size_t n);
int kb_read_all(int fd, void *p, size_t n);
/* Suites; each returns 0, or 1 when a reference check failed. */
int kb_suite_link(const kb_opts_t *o);
int kb_suite_kernels(const kb_opts_t *o);
int kb_suite_step(const kb_opts_t *o);
int kb_suite_concurrency(const kb_opts_t *o);
int kb_suite_host(const kb_opts_t *o);
int kb_suite_whole(const kb_opts_t *o);
int kb_suite_prefill(const kb_opts_t *o);
/* `kbench replay`, given the arguments after the subcommand (suite_replay.cu): 0, 1 when a workload
 * failed (its rows left out), 2 on bad usage, a bad workload file or no device. */
int kb_replay(int argc, char **argv);

#endif
