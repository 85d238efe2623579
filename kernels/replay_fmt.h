/* replay_fmt — the flat replay workload format (docs/replay.md): what `kbench replay` executes and
 * odsim predicts. Plain C with no library (the GPU host has none), compiled into kbench by nvcc's
 * host compiler and into odsim; the parser is the only reader of the format on either side.
 *
 * A workload is 1..RF_MAX_SESSIONS sessions, each a pinned host region and a step of ops. Sizes are
 * exact integers (bytes, FLOPs, microseconds). */
#ifndef KB_REPLAY_FMT_H
#define KB_REPLAY_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_VERSION 1
#define RF_MAX_SESSIONS 16
#define RF_MAX_OPS 2048      /* ops per session (a built-in method's step of 36+ layers) */
#define RF_MAX_STREAMS 8     /* streams per session */
#define RF_MAX_AFTER 8       /* `after` ids per op */
#define RF_MAX_LINE 4095
#define RF_NAME_MAX 63
#define RF_MAX_GEMM_DIM 65536 /* m, n and k of a gemm op */
#define RF_MAX_REGION_BYTES (64ull << 30)
#define RF_MAX_TOTAL_REGION_BYTES (100ull << 30)

typedef enum { RF_MODE_PROCS = 0, RF_MODE_STREAMS, RF_MODE_BATCHED, RF_MODE_COUNT } rf_mode_t;

typedef enum {
    RF_OP_H2D = 0,   /* pieces × piece_bytes, one cudaMemcpyAsync each */
    RF_OP_D2H,
    RF_OP_H2D2D,     /* one cudaMemcpy2DAsync of `pieces` rows */
    RF_OP_H2DBATCH,  /* one cudaMemcpyBatchAsync */
    RF_OP_GATHER,    /* SM kernel reading mapped host memory */
    RF_OP_HBM,       /* kernel streaming `bytes` of HBM */
    RF_OP_COMPUTE,   /* kernel of `flops` FLOPs */
    RF_OP_SPIN,      /* one-block kernel of `us` µs */
    RF_OP_SYNC,      /* host waits for the session's ops so far */
    RF_OP_HOST,      /* host thread busy `us` µs */
    RF_OP_GEMM,      /* one cuBLAS GEMM, BF16 m×k by k×n, FP32 accumulate */
    RF_OP_COUNT
} rf_kind_t;

typedef struct rf_op {
    rf_kind_t kind;
    uint32_t stream;                 /* 0 .. RF_MAX_STREAMS-1 (0 for sync and host) */
    uint32_t n_after;
    uint32_t after[RF_MAX_AFTER];    /* earlier op ids of the same session */
    uint64_t pieces, piece_bytes, span_bytes; /* transfers */
    uint64_t bytes;                  /* hbm */
    uint64_t flops;                  /* compute */
    uint64_t us;                     /* spin, host */
    uint64_t m, n, k;                /* gemm */
} rf_op_t;

typedef struct rf_session {
    uint64_t region_bytes;
    uint64_t idle_us;
    uint32_t n_ops;
    rf_op_t ops[RF_MAX_OPS];
} rf_session_t;

typedef struct rf_workload {
    char name[RF_NAME_MAX + 1];
    rf_mode_t mode;
    uint64_t window_ms, min_steps, warmup_steps, seed;
    uint32_t n_sessions;
    rf_session_t sessions[RF_MAX_SESSIONS];
} rf_workload_t;

/* Names of modes and kinds as the file spells them ("?" out of range), and back (-1: unknown). */
const char *rf_mode_name(int mode);
int rf_mode_find(const char *name);
const char *rf_kind_name(int kind);
int rf_kind_find(const char *name);
/* Whether ops of this kind move pieces (take pieces, piece_bytes and span). */
int rf_kind_is_transfer(int kind);

/* Parses the workload in buf[0..n) (need not be NUL-terminated) into *w (zeroed first). Returns 0,
 * or -1 with a message "PATH:LINE: what" in err (errn bytes; path names the file in messages) for
 * any departure from docs/replay.md: unknown line or key, a key twice, a number out of range or not
 * a plain integer, an id out of order, a forward or self `after`, a missing header or region, a
 * transfer larger than its span or a span larger than the region, regions over 100 GiB together,
 * text after `end`, no `end`. Never reads past buf[n). */
int rf_parse(const char *buf, size_t n, const char *path, rf_workload_t *w, char *err, size_t errn);

/* Reads and parses the file at path (at most 16 MiB). Returns 0, or -1 with err as rf_parse (or
 * "PATH: <errno text>"). */
int rf_load(const char *path, rf_workload_t *w, char *err, size_t errn);

/* Writes *w in the canonical form (header keys in the order of docs/replay.md, every key written,
 * defaults included, one op per line, keys in a fixed order) that rf_parse reads back into an equal
 * workload. Returns 0, or -1 when the stream reports an error. */
int rf_write(FILE *f, const rf_workload_t *w);

/* Whether a and b are the same workload field by field (1) or not (0). */
int rf_equal(const rf_workload_t *a, const rf_workload_t *b);

/* FNV-1a 64 of n bytes (the CSV's workload_fnv of a file's bytes). */
uint64_t rf_fnv1a(const void *p, size_t n);

/* The byte offset within the region of piece i of op `op` of session `sess`: a piece-aligned slot of
 * [0, span) drawn from (seed, sess, op, i) by splitmix64 (uniform, with repetition). kbench and
 * odsim's tests call this one function, so both place pieces alike. h2d2d ops do not use it (row i
 * lies at i·pitch). */
uint64_t rf_piece_offset(uint64_t seed, uint32_t sess, uint32_t op, uint64_t i, uint64_t span_bytes,
                         uint64_t piece_bytes);

/* The source pitch of an h2d2d op: ⌊span/pieces⌋ rounded down to a multiple of piece_bytes. */
uint64_t rf_pitch(const rf_op_t *o);

#ifdef __cplusplus
}
#endif
#endif
