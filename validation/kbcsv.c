#include "validation/kbcsv.h"
#include "common/str.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomicio.h"
#include "models/opkind.h"

#define KBCSV_MAX_BYTES ((size_t)256 << 20)
#define KBCSV_MAX_COLS 128

typedef struct kbfile_priv {
    kbfile_t pub;
    char *text;              /* the file's bytes, cells NUL-terminated in place */
    char *path;
    const char **keys, **values;
} kbfile_priv_t;

struct kbset {
    char *device;
    kbfile_priv_t *files;
    size_t n_files;
    kbrow_t *rows;
    size_t n_rows, cap_rows;
};

/* Column ids: the required ones first (in KBCSV_REQUIRED order), then the optional ones. */
enum {
    C_SUITE, C_OP, C_VARIANT, C_N_TOKENS, C_HEADS, C_BITS, C_K, C_BATCH, C_PIECE_BYTES,
    C_REGION_BYTES, C_PIECES, C_BLOCKS, C_ALLOCATOR, C_STREAMS, C_PROCS, C_POLICY, C_PLACEMENT,
    C_LAYOUT, C_BYTES_MOVED, C_REPS, C_T_MED, C_T_P10, C_T_P90, C_T_P99, C_PER_S, C_GBPS,
    C_N_REQUIRED,
    C_METHOD = C_N_REQUIRED, C_MODEL, C_CONCURRENT_ID, C_QHEADS, C_CHUNK_TOKENS, C_T_MEAN, C_FLOPS, C_WORKLOAD_FNV,
    C_N_KNOWN
};

static const char *const col_names[C_N_KNOWN] = {
    "suite", "op", "variant", "n_tokens", "heads", "bits", "k", "batch", "piece_bytes",
    "region_bytes", "pieces", "blocks", "allocator", "streams", "procs", "policy", "placement",
    "layout", "bytes_moved", "reps", "t_med_us", "t_p10_us", "t_p90_us", "t_p99_us", "per_s", "gbps",
    "method", "model", "concurrent_id", "qheads", "chunk_tokens", "t_mean_us", "flops", "workload_fnv"};

static const int text_cols[] = {C_SUITE, C_OP, C_VARIANT, C_ALLOCATOR, C_POLICY, C_PLACEMENT,
                                C_LAYOUT, C_METHOD, C_MODEL, C_WORKLOAD_FNV};

static bool col_is_text(int c)
{
    for (size_t i = 0; i < sizeof text_cols / sizeof text_cols[0]; i++)
        if (text_cols[i] == c) return true;
    return false;
}

static double *num_field(kbrow_t *r, int c)
{
    switch (c) {
    case C_N_TOKENS: return &r->n_tokens;
    case C_HEADS: return &r->heads;
    case C_BITS: return &r->bits;
    case C_K: return &r->k;
    case C_BATCH: return &r->batch;
    case C_PIECE_BYTES: return &r->piece_bytes;
    case C_REGION_BYTES: return &r->region_bytes;
    case C_PIECES: return &r->pieces;
    case C_BLOCKS: return &r->blocks;
    case C_STREAMS: return &r->streams;
    case C_PROCS: return &r->procs;
    case C_BYTES_MOVED: return &r->bytes_moved;
    case C_REPS: return &r->reps;
    case C_T_MED: return &r->t_med_us;
    case C_T_P10: return &r->t_p10_us;
    case C_T_P90: return &r->t_p90_us;
    case C_T_P99: return &r->t_p99_us;
    case C_PER_S: return &r->per_s;
    case C_GBPS: return &r->gbps;
    case C_CONCURRENT_ID: return &r->concurrent_id;
    case C_QHEADS: return &r->qheads;
    case C_CHUNK_TOKENS: return &r->chunk_tokens;
    case C_T_MEAN: return &r->t_mean_us;
    case C_FLOPS: return &r->flops;
    default: return NULL;
    }
}

static const char **text_field(kbrow_t *r, int c)
{
    switch (c) {
    case C_SUITE: return &r->suite;
    case C_OP: return &r->op_name;
    case C_VARIANT: return &r->variant;
    case C_ALLOCATOR: return &r->allocator;
    case C_POLICY: return &r->policy;
    case C_PLACEMENT: return &r->placement;
    case C_LAYOUT: return &r->layout;
    case C_METHOD: return &r->method;
    case C_MODEL: return &r->model;
    case C_WORKLOAD_FNV: return &r->workload_fnv;
    default: return NULL;
    }
}

/* An empty set checked against device ("" : no check). */
static int kbset_new(const char *device, kbset_t **out, err_t *e)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return err_set(e, ERR_NOMEM, "kbcsv: out of memory");
    (*out)->device = str_dup(device ? device : "");
    if (!(*out)->device) {
        free(*out);
        *out = NULL;
        return err_set(e, ERR_NOMEM, "kbcsv: out of memory");
    }
    return ERR_OK;
}

static void file_clear(kbfile_priv_t *f)
{
    free(f->text);
    free(f->path);
    free(f->keys);
    free(f->values);
}

void kbset_free(kbset_t *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) file_clear(&s->files[i]);
    free(s->files);
    free(s->rows);
    free(s->device);
    free(s);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

/* Splits line in place at commas (a cell may be "double-quoted", "" for a quote); returns the
 * number of cells or -1 when there are more than max or a quote is unterminated. */
static int split_cells(char *line, char **cells, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) return -1;
        char *w = p;
        cells[n++] = w;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) return -1;
                if (*p == '"' && p[1] == '"') {
                    *w++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *w++ = *p++;
                }
            }
            if (*p && *p != ',') return -1;
        } else {
            while (*p && *p != ',') *w++ = *p++;
        }
        char c = *p;
        *w = '\0';
        if (c != ',') break;
        p++;
    }
    for (int i = 0; i < n; i++) cells[i] = trim(cells[i]);
    return n;
}

static bool ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (!n) return true;
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return false;
}

static int grow_rows(kbset_t *s, err_t *e)
{
    if (s->n_rows < s->cap_rows) return ERR_OK;
    size_t cap = s->cap_rows ? 2 * s->cap_rows : 256;
    kbrow_t *nr = realloc(s->rows, cap * sizeof *nr);
    if (!nr) return err_set(e, ERR_NOMEM, "kbcsv: out of memory");
    s->rows = nr;
    s->cap_rows = cap;
    return ERR_OK;
}

/* Parses one data row into r. */
static int parse_row(const char *path, int line, char **cells, const int *col_of, int n_cells,
                     kbrow_t *r, err_t *e)
{
    static const char empty[] = "";
    for (int c = 0; c < C_N_KNOWN; c++) {
        int at = col_of[c];
        const char *cell = at >= 0 ? cells[at] : empty;
        if (col_is_text(c)) {
            *text_field(r, c) = cell;
            continue;
        }
        double *dst = num_field(r, c);
        if (!*cell) {
            *dst = NAN;
            continue;
        }
        char *end = NULL;
        double v = strtod(cell, &end);
        if (end == cell || *end)
            return err_set(e, ERR_PARSE, "%s:%d: column '%s': '%s' is not a number", path, line,
                           col_names[c], cell);
        if (isnan(v))
            return err_set(e, ERR_INVAL, "%s:%d: column '%s': NaN", path, line, col_names[c]);
        if (!isfinite(v))
            return err_set(e, ERR_INVAL, "%s:%d: column '%s': '%s' is not finite", path, line,
                           col_names[c], cell);
        if (v < 0)
            return err_set(e, ERR_INVAL, "%s:%d: column '%s': negative %s %s", path, line,
                           col_names[c], c >= C_T_MED && c <= C_T_P99 ? "time" : "value", cell);
        *dst = v;
    }
    (void)n_cells;
    if (isnan(r->t_med_us))
        return err_set(e, ERR_INVAL, "%s:%d: column 't_med_us': empty (every case has a median time)",
                       path, line);
    if (!*r->op_name) return err_set(e, ERR_INVAL, "%s:%d: column 'op': empty", path, line);
    r->op = opkind_find(r->op_name);
    if (r->op < 0)
        return err_set(e, ERR_INVAL, "%s:%d: column 'op': unknown op kind '%s' (models/opkind.h)",
                       path, line, r->op_name);
    if (!*r->suite) return err_set(e, ERR_INVAL, "%s:%d: column 'suite': empty", path, line);
    return ERR_OK;
}

/* Reads one CSV into s; on error nothing of the file is kept. */
static int kbset_load_file(kbset_t *s, const char *path, err_t *e)
{
    char *text = NULL;
    size_t len = 0;
    int rc = atomicio_read_all(path, KBCSV_MAX_BYTES, &text, &len, e);
    if (rc) return rc;
    kbfile_priv_t f = {.text = text, .path = str_dup(path)};
    if (!f.path) {
        free(text);
        return err_set(e, ERR_NOMEM, "kbcsv: out of memory");
    }
    f.pub.fnv1a = str_fnv1a(text, len);
    size_t rows0 = s->n_rows, cap_meta = 0, n_meta = 0;
    int col_of[C_N_KNOWN];
    for (int c = 0; c < C_N_KNOWN; c++) col_of[c] = -1;
    int n_cols = 0, line_no = 0;
    bool have_header = false;
    const char *device = NULL;
    char *cells[KBCSV_MAX_COLS];
    char *p = text;
    while (!rc && *p) {
        char *line = p;
        char *nl = strchr(p, '\n');
        if (nl) {
            *nl = '\0';
            p = nl + 1;
        } else {
            p += strlen(p);
        }
        line_no++;
        char *t = trim(line);
        if (!*t) continue;
        if (*t == '#') {
            if (have_header) continue;    /* a comment after the header row */
            char *kv = trim(t + 1);
            char *colon = strchr(kv, ':');
            if (!colon) continue;         /* a free comment */
            *colon = '\0';
            if (n_meta == cap_meta) {
                cap_meta = cap_meta ? 2 * cap_meta : 16;
                const char **nk = realloc(f.keys, cap_meta * sizeof *nk);
                if (nk) f.keys = nk;
                const char **nv = realloc(f.values, cap_meta * sizeof *nv);
                if (nv) f.values = nv;
                if (!nk || !nv) {
                    rc = err_set(e, ERR_NOMEM, "kbcsv: out of memory");
                    break;
                }
            }
            f.keys[n_meta] = trim(kv);
            f.values[n_meta] = trim(colon + 1);
            if (!strcmp(f.keys[n_meta], "device")) device = f.values[n_meta];
            n_meta++;
            continue;
        }
        int n = split_cells(t, cells, KBCSV_MAX_COLS);
        if (n < 0) {
            rc = err_set(e, ERR_PARSE, "%s:%d: malformed row (unterminated quote or over %d cells)",
                         path, line_no, KBCSV_MAX_COLS);
            break;
        }
        if (!have_header) {
            have_header = true;
            n_cols = n;
            for (int i = 0; i < n && !rc; i++)
                for (int c = 0; c < C_N_KNOWN; c++) {
                    if (strcmp(cells[i], col_names[c])) continue;
                    if (col_of[c] >= 0)
                        rc = err_set(e, ERR_PARSE, "%s:%d: column '%s' appears twice", path, line_no,
                                     cells[i]);
                    col_of[c] = i;
                }
            for (int c = 0; c < C_N_REQUIRED && !rc; c++)
                if (col_of[c] < 0)
                    rc = err_set(e, ERR_PARSE, "%s:%d: missing column '%s' (required: %s)", path,
                                 line_no, col_names[c], KBCSV_REQUIRED);
            if (rc) break;
            if (!device) {
                rc = err_set(e, ERR_INVAL, "%s:%d: no '# device:' header line before the column row",
                             path, line_no);
                break;
            }
            if (*s->device && !ci_contains(device, s->device)) {
                rc = err_set(e, ERR_INVAL, "%s:%d: device '%s' is not this directory's device '%s'",
                             path, line_no, device, s->device);
                break;
            }
            continue;
        }
        if (n != n_cols) {
            rc = err_set(e, ERR_PARSE, "%s:%d: %d cells, the header has %d", path, line_no, n, n_cols);
            break;
        }
        rc = grow_rows(s, e);
        if (rc) break;
        kbrow_t *r = &s->rows[s->n_rows];
        memset(r, 0, sizeof *r);
        r->file = f.path;
        r->line = line_no;
        r->file_index = s->n_files;
        rc = parse_row(f.path, line_no, cells, col_of, n, r, e);
        if (!rc) s->n_rows++;
    }
    if (!rc && !have_header) rc = err_set(e, ERR_PARSE, "%s:%d: no column header row", path, line_no);
    if (!rc) {
        kbfile_priv_t *nf = realloc(s->files, (s->n_files + 1) * sizeof *nf);
        if (!nf) rc = err_set(e, ERR_NOMEM, "kbcsv: out of memory");
        else s->files = nf;
    }
    if (rc) {
        s->n_rows = rows0;
        file_clear(&f);
        return rc;
    }
    f.pub.path = f.path;
    f.pub.n_rows = s->n_rows - rows0;
    f.pub.n_meta = n_meta;
    f.pub.meta_keys = f.keys;
    f.pub.meta_values = f.values;
    s->files[s->n_files++] = f;
    return ERR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_csv(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ".csv") && name[0] != '.';
}

/* The sorted *.csv names of dir (*out, each and the array heap-allocated). */
static int list_csv(const char *dir, char ***out, size_t *n_out, err_t *e)
{
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return err_set(e, ERR_IO, "%s: cannot open directory", dir);
    char **v = NULL;
    size_t n = 0;
    int rc = ERR_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_csv(de->d_name)) continue;
        char **nv = realloc(v, (n + 1) * sizeof *nv);
        char *name = str_dup(de->d_name);
        if (nv) v = nv;
        if (!nv || !name) {
            free(name);
            rc = err_set(e, ERR_NOMEM, "kbcsv: out of memory");
            break;
        }
        v[n++] = name;
    }
    closedir(d);
    if (rc) {
        for (size_t i = 0; i < n; i++) free(v[i]);
        free(v);
        return rc;
    }
    if (n) qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return ERR_OK;
}

size_t kbcsv_count_dir(const char *dir)
{
    char **v;
    size_t n;
    if (list_csv(dir, &v, &n, NULL)) return 0;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
    return n;
}

int kbset_load_dir(const char *dir, const char *device, kbset_t **out, err_t *e)
{
    *out = NULL;
    char base[256];
    if (!device) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/') b--;
        if (n - b >= sizeof base || n == b)
            return err_set(e, ERR_INVAL, "%s: cannot tell the device from the directory name", dir);
        memcpy(base, dir + b, n - b);
        base[n - b] = '\0';
        device = base;
    }
    char **names;
    size_t n;
    int rc = list_csv(dir, &names, &n, e);
    if (rc) return rc;
    kbset_t *s = NULL;
    rc = kbset_new(device, &s, e);
    for (size_t i = 0; i < n && !rc; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            rc = err_set(e, ERR_NOMEM, "kbcsv: out of memory");
            break;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        rc = kbset_load_file(s, path, e);
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) {
        kbset_free(s);
        return rc;
    }
    *out = s;
    return ERR_OK;
}

size_t kbset_n_rows(const kbset_t *s) { return s->n_rows; }
const kbrow_t *kbset_row(const kbset_t *s, size_t i) { return i < s->n_rows ? &s->rows[i] : NULL; }
size_t kbset_n_files(const kbset_t *s) { return s->n_files; }
const kbfile_t *kbset_file(const kbset_t *s, size_t i) { return i < s->n_files ? &s->files[i].pub : NULL; }
const char *kbset_device(const kbset_t *s) { return s->device; }

static bool same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

bool kbrow_same_case(const kbrow_t *a, const kbrow_t *b)
{
    const char *ta[] = {a->suite, a->op_name, a->variant, a->allocator, a->policy, a->placement, a->layout, a->method, a->model,
                        a->workload_fnv};
    const char *tb[] = {b->suite, b->op_name, b->variant, b->allocator, b->policy, b->placement, b->layout, b->method, b->model,
                        b->workload_fnv};
    double na[] = {a->n_tokens, a->heads, a->bits, a->k, a->batch, a->piece_bytes, a->region_bytes, a->pieces, a->blocks,
                   a->streams, a->procs, a->concurrent_id, a->qheads, a->chunk_tokens};
    double nb[] = {b->n_tokens, b->heads, b->bits, b->k, b->batch, b->piece_bytes, b->region_bytes, b->pieces, b->blocks,
                   b->streams, b->procs, b->concurrent_id, b->qheads, b->chunk_tokens};
    for (size_t i = 0; i < sizeof ta / sizeof ta[0]; i++)
        if (strcmp(ta[i], tb[i])) return false;
    for (size_t i = 0; i < sizeof na / sizeof na[0]; i++)
        if (!same_num(na[i], nb[i])) return false;
    return true;
}

const kbrow_t *kbset_match(const kbset_t *other, const kbset_t *s, size_t i)
{
    if (i >= s->n_rows) return NULL;
    const kbrow_t *r = &s->rows[i];
    size_t k = 0;   /* rows of s before i measuring the same case */
    for (size_t j = 0; j < i; j++) k += kbrow_same_case(&s->rows[j], r);
    for (size_t j = 0; j < other->n_rows; j++)
        if (kbrow_same_case(&other->rows[j], r) && k-- == 0) return &other->rows[j];
    return NULL;
}

const char *kbset_meta(const kbset_t *s, size_t file, const char *key)
{
    if (file >= s->n_files) return NULL;
    const kbfile_t *f = &s->files[file].pub;
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return NULL;
}

void kbset_runtime(const kbset_t *s, size_t file, char *buf, size_t n)
{
    if (!n) return;
    buf[0] = 0;
    const char *v = kbset_meta(s, file, "runtime");
    if (!v) v = kbset_meta(s, file, "virtualisation");
    if (!v) return;
    size_t i = 0;
    for (; v[i] && !isspace((unsigned char)v[i]) && v[i] != '(' && i + 1 < n; i++) buf[i] = (char)tolower((unsigned char)v[i]);
    buf[i] = 0;
}
