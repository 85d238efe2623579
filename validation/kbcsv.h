/* kbcsv — the measured kbench CSVs (DESIGN.md, "kbench CSV"): the contract between kernels/ and
 * validation/.
 *
 * A file is `# key: value` header lines (device, driver, virtualisation, ...), then a header row
 * naming at least the columns of KBCSV_REQUIRED (more may follow, in any order), then one row per
 * measured case. Empty cells mean "does not apply": numbers read as NAN, text as "".
 *
 * A set holds every row of the files of one data directory (validation/data/<device>/), all of
 * which must have been measured on that device: the `# device:` header must name it (the directory's
 * basename, case-insensitive, e.g. "h200" in "NVIDIA H200 (sm_90, ...)").
 *
 * Rejected, with FILE:LINE and the column: a missing required column, a duplicated column, a row
 * with the wrong number of cells, a number that does not parse or is NaN or infinite, a negative
 * number (times, bytes, counts), an empty t_med_us, an `op` that is not a models/opkind.h name, a
 * missing or foreign `# device:` header. */
#ifndef ODSIM_VALIDATION_KBCSV_H
#define ODSIM_VALIDATION_KBCSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#define KBCSV_REQUIRED                                                                          \
    "suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,"      \
    "allocator,streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,"       \
    "t_p90_us,t_p99_us,per_s,gbps"

/* One measured case. Numbers are NAN when the cell is empty (or the optional column absent);
 * strings are "" then. Strings live as long as the set. */
typedef struct kbrow {
    const char *file;      /* path of the CSV */
    int line;              /* 1-based line in it */
    size_t file_index;     /* index of the file in the set */
    const char *suite, *op_name, *variant, *allocator, *policy, *placement, *layout;
    const char *method, *model;  /* optional columns */
    const char *workload_fnv;    /* optional: a replay row's workload file's FNV-1a 64, hex */
    int op;                /* models/opkind.h kind */
    double n_tokens, heads, bits, k, batch, piece_bytes, region_bytes, pieces, blocks;
    double streams, procs, bytes_moved, reps;
    double t_med_us, t_p10_us, t_p90_us, t_p99_us, per_s, gbps;
    double concurrent_id, qheads, chunk_tokens, t_mean_us, flops; /* optional columns */
} kbrow_t;

/* One file of a set: its path, FNV-1a 64 hash of its bytes, and its header. */
typedef struct kbfile {
    const char *path;
    uint64_t fnv1a;
    size_t n_rows;
    size_t n_meta;
    const char *const *meta_keys;
    const char *const *meta_values;
} kbfile_t;

typedef struct kbset kbset_t;

/* Reads every *.csv of dir (sorted by name) into a new set (free with kbset_free); every file's
 * `# device:` header must name `device`, or the directory's basename when NULL. A directory
 * without CSVs gives an empty set (callers decide). On error no set is returned and e says
 * FILE:LINE: what. Errors: ERR_IO (no such directory, unreadable file), ERR_PARSE, ERR_INVAL,
 * ERR_NOMEM. */
int kbset_load_dir(const char *dir, const char *device, kbset_t **out, err_t *e);
void kbset_free(kbset_t *s);

size_t kbset_n_rows(const kbset_t *s);
const kbrow_t *kbset_row(const kbset_t *s, size_t i);
size_t kbset_n_files(const kbset_t *s);
const kbfile_t *kbset_file(const kbset_t *s, size_t i);
/* The device the set was checked against ("" when none). */
const char *kbset_device(const kbset_t *s);
/* Header value `key` of file i, or NULL. */
const char *kbset_meta(const kbset_t *s, size_t file, const char *key);

/* The host runtime file `file` of s was measured under, lower case, into buf (n bytes): the first
 * word of its `# runtime:` header (kbench names it since issue 31: firecracker, gvisor), else of
 * its `# virtualisation:` header ("Firecracker microVM" → firecracker); "" when neither is there. */
void kbset_runtime(const kbset_t *s, size_t file, char *buf, size_t n);

/* Whether a and b measure the same case: every column naming it equal (suite, op, variant, the
 * sizes and counts, allocator, streams, procs, policy, placement, layout, method, model,
 * concurrent_id, qheads, chunk_tokens, workload_fnv; empty cells equal empty cells), what was measured (reps,
 * times, rates, bytes moved) aside. */
bool kbrow_same_case(const kbrow_t *a, const kbrow_t *b);
/* The row of `other` that measured the same case as row i of s (the k-th such row of other for
 * the k-th of s: a case kbench measures twice is matched in order); NULL when other has none.
 * Both sets are only read. */
const kbrow_t *kbset_match(const kbset_t *other, const kbset_t *s, size_t i);
/* Number of *.csv files in dir (0 when dir is missing). */
size_t kbcsv_count_dir(const char *dir);

#endif
