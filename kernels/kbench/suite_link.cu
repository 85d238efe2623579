/* suite_link.cu: the link suite (copy engine and SM paths between host and GPU).
 *
 * One pinned host buffer per allocator (allocated once, reused by every case,
 * freed before the next allocator), one device buffer. Cases: CE copies by
 * size (single and back to back, H2D and D2H), duplex, 1-16 streams, 2D and
 * batched copies by piece size, SM gathers by piece x region x blocks x
 * allocator, mixes of paths run at once, and pairs of one path over disjoint
 * regions. Concurrent components each get a row with their own completion
 * time from the common start, tied by policy and concurrent_id.
 */
#include <stdlib.h>
#include <string.h>
#include "kb.h"
#include "kern.h"
#include "hostmem.h"
#include "timeslice.h"

#define MAX_STREAMS 16
#define MAX_MIX 16

typedef enum { W_H2D, W_D2H, W_GATHER, W_BATCH, W_2D } wkind_t;

/* One unit of transfer work, enqueued on a stream. */
typedef struct {
    wkind_t kind;
    int times;                 /* back-to-back repetitions inside one timing */
    size_t bytes;              /* per copy (H2D, D2H) */
    size_t piece, region, npieces, spitch;
    int blocks, variant;
    char *host, *dev;
    uint64_t *off;             /* device offsets (gather): nsets sets of npieces, one per enqueue in turn */
    int nsets;
    unsigned cursor;
    void **dsts, **srcs;       /* host arrays (batch) */
    size_t *sizes;
    int failed;                /* an API refused the case */
} work_t;

typedef struct {
    const kb_opts_t *o;
    kb_csv_t *csv;
    cudaStream_t s[MAX_STREAMS];
    char *dev;                 /* device scratch */
    size_t dev_bytes;
    uint64_t *off[2];          /* two offset lists, max_pieces each */
    size_t max_pieces;
    kb_hostbuf_t hb;           /* the current allocator's host buffer */
} link_t;

static void work_enqueue(void *p, cudaStream_t s)
{
    work_t *w = (work_t *)p;
    for (int i = 0; i < w->times && !w->failed; i++) {
        switch (w->kind) {
        case W_H2D:
            CK(cudaMemcpyAsync(w->dev, w->host, w->bytes, cudaMemcpyHostToDevice, s));
            break;
        case W_D2H:
            CK(cudaMemcpyAsync(w->host, w->dev, w->bytes, cudaMemcpyDeviceToHost, s));
            break;
        case W_GATHER: {
            size_t set = w->nsets > 1 ? w->cursor++ % (unsigned)w->nsets : 0;
            kb_gather(w->variant, w->dev, w->host, w->off + set * w->npieces, w->npieces, w->piece,
                      w->blocks, s);
            break;
        }
        case W_2D:
            CK(cudaMemcpy2DAsync(w->dev, w->piece, w->host, w->spitch, w->piece, w->npieces,
                                 cudaMemcpyHostToDevice, s));
            break;
        case W_BATCH: {
            struct cudaMemcpyAttributes at;
            memset(&at, 0, sizeof at);
            at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            size_t idx0 = 0;
            cudaError_t e = cudaMemcpyBatchAsync(w->dsts, (const void *const *)w->srcs, w->sizes,
                                                 w->npieces, &at, &idx0, 1, s);
            if (e != cudaSuccess) {
                fprintf(stderr, "kbench: cudaMemcpyBatchAsync: %s\n", cudaGetErrorString(e));
                w->failed = 1;
            }
            break;
        }
        }
    }
}

static double work_bytes(const work_t *w)
{
    switch (w->kind) {
    case W_H2D:
    case W_D2H:
        return (double)w->bytes * w->times;
    default:
        return (double)w->npieces * w->piece * w->times;
    }
}

static const char *work_op(const work_t *w)
{
    static const char *ops[] = {"h2d_copy", "d2h_copy", "sm_gather", "h2d_batch", "h2d_copy2d"};
    return ops[w->kind];
}

/* A row describing w (timing and policy filled by the caller). */
static kb_row_t work_row(const link_t *L, const work_t *w, const char *variant)
{
    kb_row_t r = kb_row(work_op(w), variant);
    r.allocator = kb_alloc_name(L->hb.kind);
    r.placement = "host";
    r.bytes_moved = work_bytes(w);
    r.streams = 1;
    if (w->kind == W_H2D || w->kind == W_D2H) {
        r.piece_bytes = (long long)w->bytes;
        r.pieces = w->times;
    } else {
        r.piece_bytes = (long long)w->piece;
        r.pieces = (long long)(w->npieces * w->times);
        r.region_bytes = (long long)w->region;
    }
    if (w->kind == W_GATHER)
        r.blocks = w->blocks;
    if (w->kind == W_2D) {
        static char lay[64];
        snprintf(lay, sizeof lay, "spitch=%zu", w->spitch);
        r.layout = lay;
    }
    r.ref_gbps = w->kind == W_D2H ? kb_ceil.d2h_gbps : kb_ceil.h2d_gbps;
    return r;
}

static void emit(link_t *L, kb_row_t *r, kb_stats_t st)
{
    r->st = st;
    if (r->pieces > 0 && st.med > 0)
        r->per_s = r->pieces / (st.med * 1e-6);
    kb_csv_row(L->csv, r);
}

/* Time w alone and write its row. */
static void run_single(link_t *L, work_t *w, const char *variant)
{
    double est = work_bytes(w) / (kb_ceil.h2d_gbps * 1e3);
    kb_timing_t tm = kb_timing_for(est, L->o->quick);
    kb_stats_t st = kb_time(work_enqueue, NULL, w, L->s[0], &tm);
    if (w->failed)
        return;
    kb_row_t r = work_row(L, w, variant);
    r.policy = "alone";
    emit(L, &r, st);
}

static void l2_flush_prep(void *ctx, cudaStream_t s)
{
    (void)ctx;
    kb_l2_flush(s);
}

/* Time w alone after the work `other` (untimed) each repetition, and then an L2 flush when
 * `flush`: another gather, over other rows of the host buffer, as a step's SM index fetch runs
 * between two of its winner fetches (and the step's HBM kernels between it and the winners). */
static void run_single_after(link_t *L, work_t *w, work_t *other, bool flush, const char *variant)
{
    kb_timing_t tm = kb_timing_for(work_bytes(w) / (kb_ceil.h2d_gbps * 1e3), L->o->quick);
    struct pair {
        work_t *w, *other;
        bool flush;
    } pr = {w, other, flush};
    kb_stats_t st = kb_time([](void *c, cudaStream_t s) { work_enqueue(((struct pair *)c)->w, s); },
                            [](void *c, cudaStream_t s) {
                                work_enqueue(((struct pair *)c)->other, s);
                                if (((struct pair *)c)->flush)
                                    kb_l2_flush(s);
                            },
                            &pr, L->s[0], &tm);
    kb_row_t r = work_row(L, w, variant);
    r.policy = "alone";
    emit(L, &r, st);
}

/* Time w alone after an L2 flush each repetition (rows a gather repeats are not read from L2). */
/* Time w alone after reading `mib` MiB of HBM (untimed) each repetition: variant
 * order_win_hbm<mib>. */
static void run_single_hbm(link_t *L, work_t *w, size_t mib)
{
    kb_timing_t tm = kb_timing_for(work_bytes(w) / (kb_ceil.h2d_gbps * 1e3), L->o->quick);
    struct pair {
        work_t *w;
        size_t bytes;
    } pr = {w, mib * KB_MIB};
    kb_stats_t st = kb_time([](void *c, cudaStream_t s) { work_enqueue(((struct pair *)c)->w, s); },
                            [](void *c, cudaStream_t s) { kb_hbm_read(((struct pair *)c)->bytes, s); }, &pr,
                            L->s[0], &tm);
    char variant[32];
    snprintf(variant, sizeof variant, "order_win_hbm%zu", mib);
    kb_row_t r = work_row(L, w, variant);
    r.policy = "alone";
    emit(L, &r, st);
}

static void run_single_flushed(link_t *L, work_t *w, const char *variant)
{
    kb_timing_t tm = kb_timing_for(work_bytes(w) / (kb_ceil.h2d_gbps * 1e3), L->o->quick);
    kb_stats_t st = kb_time(work_enqueue, l2_flush_prep, w, L->s[0], &tm);
    kb_row_t r = work_row(L, w, variant);
    r.policy = "alone";
    emit(L, &r, st);
}

/* Start n works at once (stream i for work i, released by one event) and
 * write one row per work with its completion time from the common start. */
static void run_mix(link_t *L, work_t *w, int n, const char *policy, const char **variants)
{
    cudaEvent_t start, end[MAX_MIX];
    CK(cudaEventCreate(&start));
    for (int i = 0; i < n; i++)
        CK(cudaEventCreate(&end[i]));
    int reps = L->o->quick ? 3 : 7;
    double *t = (double *)malloc(sizeof(double) * reps * n);
    for (int r = -1; r < reps; r++) {            /* r = -1: warm-up */
        CK(cudaEventRecord(start, L->s[0]));
        for (int i = 1; i < n; i++)
            CK(cudaStreamWaitEvent(L->s[i], start, 0));
        for (int i = 0; i < n; i++) {
            work_enqueue(&w[i], L->s[i]);
            CK(cudaEventRecord(end[i], L->s[i]));
        }
        for (int i = 0; i < n; i++) {
            CK(cudaEventSynchronize(end[i]));
            float ms;
            CK(cudaEventElapsedTime(&ms, start, end[i]));
            if (r >= 0)
                t[i * reps + r] = ms * 1e3;
        }
    }
    for (int i = 0; i < n; i++) {
        if (w[i].failed)
            continue;
        kb_row_t row = work_row(L, &w[i], variants[i]);
        row.policy = policy;
        row.concurrent_id = i;
        row.streams = n;
        emit(L, &row, kb_stats(t + i * reps, reps));
    }
    free(t);
    CK(cudaEventDestroy(start));
    for (int i = 0; i < n; i++)
        CK(cudaEventDestroy(end[i]));
}

static work_t copy_work(link_t *L, wkind_t kind, size_t bytes, int times, size_t host_off,
                        size_t dev_off)
{
    work_t w;
    memset(&w, 0, sizeof w);
    w.kind = kind;
    w.bytes = bytes;
    w.times = times;
    w.host = (char *)L->hb.ptr + host_off;
    w.dev = L->dev + dev_off;
    return w;
}

/* A gather of payload bytes in piece-sized random pieces of [base, base + region). */
static work_t gather_work(link_t *L, int list, size_t piece, size_t region, size_t base,
                          size_t payload, int blocks, size_t dev_off)
{
    work_t w;
    memset(&w, 0, sizeof w);
    w.kind = W_GATHER;
    w.times = 1;
    w.piece = piece;
    w.region = region;
    w.npieces = payload / piece;
    if (w.npieces > L->max_pieces)
        w.npieces = L->max_pieces;
    w.blocks = blocks;
    w.variant = 2;
    w.host = (char *)L->hb.ptr;
    w.dev = L->dev + dev_off;
    w.off = L->off[list];
    kb_rand_offsets(w.off, w.npieces, region, piece, base, 1000 + piece + region + list, L->s[0]);
    CK(cudaStreamSynchronize(L->s[0]));
    return w;
}

/* A batched copy of count random pieces of [base, base + region); owns host arrays. */
static work_t batch_work(link_t *L, size_t piece, size_t count, size_t region, size_t base,
                         size_t dev_off)
{
    work_t w;
    memset(&w, 0, sizeof w);
    w.kind = W_BATCH;
    w.times = 1;
    w.piece = piece;
    w.region = region;
    w.npieces = count;
    w.dsts = (void **)malloc(count * sizeof(void *));
    w.srcs = (void **)malloc(count * sizeof(void *));
    w.sizes = (size_t *)malloc(count * sizeof(size_t));
    for (size_t i = 0; i < count; i++) {
        w.srcs[i] = (char *)L->hb.ptr + base + kref_mix64(77 + i + piece) % (region / piece) * piece;
        w.dsts[i] = L->dev + dev_off + i * piece;
        w.sizes[i] = piece;
    }
    return w;
}

static void batch_free(work_t *w)
{
    free(w->dsts);
    free(w->srcs);
    free(w->sizes);
}

static work_t copy2d_work(link_t *L, size_t width, size_t rows, size_t host_off, size_t dev_off)
{
    work_t w;
    memset(&w, 0, sizeof w);
    w.kind = W_2D;
    w.times = 1;
    w.piece = width;
    w.npieces = rows;
    w.spitch = 4 * width;
    w.region = w.spitch * rows;
    w.host = (char *)L->hb.ptr + host_off;
    w.dev = L->dev + dev_off;
    return w;
}

static void section_ce_sizes(link_t *L)
{
    size_t lo = 4 * KB_KIB, hi = L->o->quick ? 256 * KB_MIB : KB_GIB;
    for (int dir = 0; dir < 2; dir++)
        for (size_t sz = lo; sz <= hi; sz *= L->o->quick ? 16 : 2) {
            wkind_t k = dir ? W_D2H : W_H2D;
            work_t w = copy_work(L, k, sz, 1, 0, 0);
            run_single(L, &w, "single");
            size_t times = (256 * KB_MIB) / sz;
            w.times = (int)(times < 2 ? 2 : (times > 16 ? 16 : times));
            run_single(L, &w, "b2b");
        }
}

static void section_duplex_streams(link_t *L)
{
    size_t sizes[] = {4 * KB_MIB, 64 * KB_MIB, 256 * KB_MIB};
    for (int i = 0; i < 3; i++) {
        work_t w[2] = {copy_work(L, W_H2D, sizes[i], 1, 0, 0),
                       copy_work(L, W_D2H, sizes[i], 1, 512 * KB_MIB, 512 * KB_MIB)};
        const char *v[2] = {"duplex", "duplex"};
        run_mix(L, w, 2, "mix:h2d+d2h", v);
    }
    int ns[] = {1, 2, 4, 8, 16};
    for (int i = 0; i < 5; i++) {
        if (L->o->quick && ns[i] > 4)
            break;
        work_t w[MAX_STREAMS];
        const char *v[MAX_STREAMS];
        size_t each = 64 * KB_MIB;
        for (int j = 0; j < ns[i]; j++) {
            w[j] = copy_work(L, W_H2D, each, 1, j * each, (j * each) % (L->dev_bytes / 2));
            v[j] = "streams";
        }
        run_mix(L, w, ns[i], "mix:h2d_streams", v);
    }
}

static void section_2d_batch(link_t *L)
{
    size_t step = L->o->quick ? 8 : 2;
    for (size_t wdt = 64; wdt <= 128 * KB_KIB; wdt *= step) {
        size_t rows = (64 * KB_MIB) / wdt;
        work_t w = copy2d_work(L, wdt, rows, 0, 0);
        run_single(L, &w, "spitch4");
    }
    size_t regions[] = {256 * KB_MIB, 4 * KB_GIB};
    for (int ri = 0; ri < 2; ri++) {
        if (regions[ri] > L->hb.bytes || (L->o->quick && ri))
            continue;
        for (size_t p = 64; p <= 128 * KB_KIB; p *= step) {
            size_t count = (64 * KB_MIB) / p;
            size_t cap = L->o->quick ? 2048 : 8192;
            work_t w = batch_work(L, p, count < cap ? count : cap, regions[ri], 0, 0);
            run_single(L, &w, "random");
            batch_free(&w);
        }
    }
}

/* Gathers by piece x region at enough blocks; the caller's allocator. */
static void section_gather_grid(link_t *L)
{
    int blocks = 4 * kb_sm_count();
    size_t payload = L->o->quick ? 16 * KB_MIB : 64 * KB_MIB;
    size_t step = L->o->quick ? 8 : 2;
    for (size_t region = 256 * KB_MIB; region <= L->hb.bytes; region *= 4)
        for (size_t p = 64; p <= 128 * KB_KIB; p *= step) {
            work_t w = gather_work(L, 0, p, region, 0, payload, blocks, 0);
            run_single(L, &w, "v2");
        }
}

/* 4 KiB pieces over 256 MiB (neither the row rate nor the blocks bind) at payloads of 64 KiB to
 * 64 MiB: a gather's fixed time and its rate apart (the grid's rows all move one payload). */
static void section_gather_payloads(link_t *L)
{
    for (size_t payload = 64 * KB_KIB; payload <= 64 * KB_MIB; payload *= 4) {
        work_t w = gather_work(L, 0, 4 * KB_KIB, 256 * KB_MIB, 0, payload, 4 * kb_sm_count(), 0);
        run_single(L, &w, "v2_payload");
    }
}

/* 256 B rows by count and region, after an L2 flush: the row rate depends on how many rows a
 * gather touches (the address translations it needs) as well as on the region they spread over.
 * v2_rows repeats one set of rows every repetition, as a decode step re-reading the winners it
 * read before and as kbench's other gathers do; v2_fresh takes a new set each time (64 in turn). */
static void section_gather_rows(link_t *L)
{
    const size_t rows[] = {4096, 16384, 32768, 65536, 131072, 262144}, fresh_max = 65536;
    const int nsets = 64;
    uint64_t *sets;
    CK(cudaMalloc(&sets, nsets * fresh_max * sizeof(uint64_t)));
    for (size_t region = 256 * KB_MIB; region <= L->hb.bytes; region *= 4)
        for (int ri = 0; ri < 6; ri++) {
            if (L->o->quick && ri % 2)
                continue;
            work_t w = gather_work(L, 0, 256, region, 0, rows[ri] * 256, 4 * kb_sm_count(), 0);
            run_single_flushed(L, &w, "v2_rows");
            if (rows[ri] > fresh_max)
                continue;
            for (int k = 0; k < nsets; k++)
                kb_rand_offsets(sets + k * rows[ri], rows[ri], region, 256, 0, 5000 + k + region, L->s[0]);
            CK(cudaStreamSynchronize(L->s[0]));
            w.off = sets;
            w.nsets = nsets;
            run_single_flushed(L, &w, "v2_fresh");
        }
    CK(cudaFree(sets));
}

/* One set of kbench's "apart" winner fetch (kernels suite): 8 heads of k = rows/16 winners, the K
 * piece of each at head*region/16 + idx*256 and its V piece region/2 further, K and V in turn. */
static void kv_pair_offsets(uint64_t *d_off, size_t rows, size_t region, uint64_t seed, cudaStream_t s)
{
    const size_t heads = 8, k = rows / (2 * heads), span = region / (2 * heads);
    uint64_t *h = (uint64_t *)malloc(rows * sizeof *h);
    for (size_t j = 0; j < heads; j++)
        for (size_t w = 0; w < k; w++) {
            uint64_t at = j * span + kref_mix64(seed + j * k + w) % (span / 256) * 256;
            h[2 * (j * k + w)] = at;
            h[2 * (j * k + w) + 1] = region / 2 + at;
        }
    CK(cudaMemcpyAsync(d_off, h, rows * sizeof *h, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    free(h);
}

/* One set of a step's winner fetch (step suite), on the host: heads x k pieces of `piece` bytes (a
 * token's K and V side by side), head j's drawn from its 1/heads of the region, in no order. */
static uint64_t *win_host(size_t heads, size_t k, size_t piece, size_t region, uint64_t seed)
{
    size_t span = region / heads;
    uint64_t *h = (uint64_t *)malloc(heads * k * sizeof *h);
    for (size_t j = 0; j < heads; j++)
        for (size_t w = 0; w < k; w++)
            h[j * k + w] = j * span + kref_mix64(seed + j * k + w) % (span / piece) * piece;
    return h;
}

/* win_host's set to the device. */
static void win_offsets(uint64_t *d_off, size_t heads, size_t k, size_t piece, size_t region, uint64_t seed,
                        cudaStream_t s)
{
    uint64_t *h = win_host(heads, k, piece, region, seed);
    CK(cudaMemcpyAsync(d_off, h, heads * k * sizeof *h, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    free(h);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* win_host's set to the device, each head's pieces in address order (as top-k hands over the
 * ties it takes by index). */
static void win_offsets_sorted(uint64_t *d_off, size_t heads, size_t k, size_t piece, size_t region,
                               uint64_t seed, cudaStream_t s)
{
    uint64_t *h = win_host(heads, k, piece, region, seed);
    for (size_t j = 0; j < heads; j++)
        qsort(h + j * k, k, sizeof *h, cmp_u64);
    CK(cudaMemcpyAsync(d_off, h, heads * k * sizeof *h, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    free(h);
}

/* nsets sets of win_host's pieces, each head's in a new order in each set (as top-k hands a step's
 * winners over in the order its atomics come), sets `stride` offsets apart. */
static void win_offsets_shuffled(uint64_t *d_off, size_t heads, size_t k, size_t piece, size_t region,
                                 uint64_t seed, int nsets, size_t stride, cudaStream_t s)
{
    uint64_t *h = win_host(heads, k, piece, region, seed);
    for (int set = 0; set < nsets; set++) {
        for (size_t j = 0; j < heads; j++)
            for (size_t w = k - 1; w > 0; w--) {   /* Fisher-Yates within the head */
                size_t o = kref_mix64(seed ^ (0x9e37u + set * heads * k + j * k + w)) % (w + 1);
                uint64_t t = h[j * k + w];
                h[j * k + w] = h[j * k + o];
                h[j * k + o] = t;
            }
        CK(cudaMemcpyAsync(d_off + set * stride, h, heads * k * sizeof *h, cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));
    }
    free(h);
}

/* Where a gather's translations go: 65536 rows of 256 B at regions a doubling apart (256 MiB to
 * 16 GiB), their offsets drawn over the whole region (order_global) or in 16 sub-regions read one
 * after another (order_heads: a step's winner fetch goes head by head, K then V), each from a new
 * set every repetition (64 in turn) and from one set read again (_reread), both after an L2 flush;
 * one set read again back to back with no flush between (_warm: the kernels suite times its winner
 * fetches so); and the kernels suite's "apart" winner fetch itself (order_kv: 8 heads, K and V in
 * turn from the two halves), re-read after a flush and back to back; and both re-read with
 * another gather between repetitions (_after: 262144 rows of 256 B over the whole host buffer, as
 * a step's SM index fetch between two of its winner fetches); and the step suite's winner fetch
 * (order_win: 8 heads x 2048 pieces of 512 B) back to back, after the other gather and an L2
 * flush (as in a step: its HBM kernels between the index fetch and the winners), and after an L2
 * flush alone (a step whose index is not gathered by the SMs: its GEMMs and scans stream hundreds
 * of MiB of HBM between two winner fetches), and after reading 512 MiB to 4 GiB of HBM (the
 * GPU's TLBs hold both kinds of pages: how many HBM pages between two fetches evict the winners');
 * and HashAttention's (8 heads x 4 x 2048) after an L2 flush, in no order and each head's in
 * address order (as top-k hands over the ties it takes by index); and the step's winners in a new
 * order each repetition (each head's shuffled: top-k hands them over as its atomics come), after a
 * flush and back to back. */
static void section_gather_order(link_t *L)
{
    const size_t rows = 65536, parts = 16;
    const int nsets = 64;
    uint64_t *sets;
    CK(cudaMalloc(&sets, nsets * rows * sizeof(uint64_t)));
    work_t other = gather_work(L, 1, 256, L->hb.bytes, 0, 262144 * 256, 4 * kb_sm_count(), 32 * KB_MIB);
    for (size_t region = 256 * KB_MIB; region <= L->hb.bytes; region *= 2) {
        if (L->o->quick && region % (1024 * KB_MIB))
            continue;
        for (int heads = 0; heads < 2; heads++) {
            for (int k = 0; k < nsets; k++)
                for (size_t h = 0; h < (heads ? parts : 1); h++) {
                    size_t n = heads ? rows / parts : rows, span = heads ? region / parts : region;
                    kb_rand_offsets(sets + k * rows + h * n, n, span, 256, h * span, 7000 + k + h + region, L->s[0]);
                }
            CK(cudaStreamSynchronize(L->s[0]));
            work_t w = gather_work(L, 0, 256, region, 0, rows * 256, 4 * kb_sm_count(), 0);
            w.off = sets;
            run_single_flushed(L, &w, heads ? "order_heads_reread" : "order_global_reread");
            run_single(L, &w, heads ? "order_heads_warm" : "order_global_warm");
            if (!heads)
                run_single_after(L, &w, &other, false, "order_global_after");
            w.nsets = nsets;
            run_single_flushed(L, &w, heads ? "order_heads" : "order_global");
        }
        kv_pair_offsets(sets, rows, region, 9000 + region, L->s[0]);
        work_t w = gather_work(L, 0, 256, region, 0, rows * 256, 4 * kb_sm_count(), 0);
        w.off = sets;
        run_single_flushed(L, &w, "order_kv_reread");
        run_single(L, &w, "order_kv_warm");
        run_single_after(L, &w, &other, false, "order_kv_after");
        /* the step suite's winner fetch: 8 heads x 2048 tokens of 512 B; its translations stay
         * when nothing else is gathered, and go with the step's SM index fetch */
        win_offsets(sets, 8, 2048, 512, region, 9500 + region, L->s[0]);
        work_t wf = gather_work(L, 0, 512, region, 0, 16384 * 512, 4 * kb_sm_count(), 0);
        wf.off = sets;
        run_single(L, &wf, "order_win_warm");
        run_single_after(L, &wf, &other, true, "order_win_after");
        run_single_flushed(L, &wf, "order_win_flush");
        for (size_t mib = 512; mib <= 4096; mib *= 2)
            run_single_hbm(L, &wf, mib);
        /* HashAttention's: each of a KV head's 4 query heads picks its own 2048 */
        win_offsets(sets, 8, 4 * 2048, 512, region, 9700 + region, L->s[0]);
        work_t w4 = gather_work(L, 0, 512, region, 0, 4 * 16384 * 512, 4 * kb_sm_count(), 0);
        w4.off = sets;
        run_single_flushed(L, &w4, "order_win4_flush");
        win_offsets_sorted(sets, 8, 4 * 2048, 512, region, 9700 + region, L->s[0]);
        run_single_flushed(L, &w4, "order_win4_sorted");
        /* the step's winners, each head's in a new order every repetition (64 in turn) */
        win_offsets_shuffled(sets, 8, 2048, 512, region, 9500 + region, nsets, 8 * 2048, L->s[0]);
        wf.off = sets;
        wf.nsets = nsets;
        run_single_flushed(L, &wf, "order_win_shuffle");
        run_single(L, &wf, "order_win_shuffle_warm");
    }
    CK(cudaFree(sets));
}

/* Offsets of a sweep (section_plane_sweep) of `heads` parts of `region`, each in `passes` passes over
 * its units of `unit` bytes, a pass unit/passes into the unit after the one before; the heads' pieces
 * where kb_gather's blocks (`blocks` of 256 threads, 16-byte segments) take them, block b reading
 * only head b mod heads's, each head's in its own order. Returns a malloc'd array of `rows` offsets. */
static uint64_t *sweep_offsets(size_t region, size_t heads, size_t unit, size_t passes, size_t piece,
                               size_t rows, int blocks)
{
    const size_t units = region / heads / unit, per_block = 256 * 16 / piece, spacing = unit / passes;
    uint64_t *h = (uint64_t *)malloc(rows * sizeof *h);
    size_t next[64] = {0};
    for (size_t q = 0; q < rows; q++) {
        size_t head = q / per_block % (size_t)blocks % heads;
        size_t idx = next[head]++;
        size_t p = idx / units % passes, i = idx % units;
        h[q] = head * (region / heads) + i * unit + p * spacing;
    }
    return h;
}

/* Time one sweep of 8 heads over `mib` MiB (sweep_offsets) after an L2 flush, as `variant`; none
 * where the host buffer, the offset lists or the device scratch are too small, or in a quick run
 * off the GiB steps. */
static void run_sweep(link_t *L, size_t mib, size_t unit, size_t passes, size_t piece, const char *variant)
{
    const size_t heads = 8, region = mib * KB_MIB, rows = region / heads / unit * heads * passes;
    const int blocks = 4 * kb_sm_count();
    if (region > L->hb.bytes || rows > L->max_pieces || rows * piece > L->dev_bytes || (L->o->quick && mib % 1024))
        return;
    uint64_t *h = sweep_offsets(region, heads, unit, passes, piece, rows, blocks);
    work_t w = gather_work(L, 0, piece, region, 0, rows * piece, blocks, 0);
    CK(cudaMemcpy(w.off, h, rows * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
    run_single_flushed(L, &w, variant);
}

/* The row rate of a plane index's fetch, for the fit (gather_plane<piece>_rows_Mps_<region>): a
 * sweep as the SM index fetch reads a plane index, 8 heads each over its eighth of the region in
 * units of 68 KiB (a chunk of 1024 tokens' planes), 32 passes (Fathom's ~35 channels a chunk), of
 * 128 B pieces (plane_sweep_p128; Fathom's prefixes are 160-544 B) and of 512 B (plane_sweep_p512;
 * SparQ's 544), at regions up to 4 GiB in finer steps than a doubling around the cliff between
 * 640 MiB and 1.25 GiB where a sweep's translations stop holding; after an L2 flush, as in a step. */
static void section_plane_sweep(link_t *L)
{
    static const size_t mib[] = {256, 512, 640, 768, 832, 896, 960, 1024, 1152, 1280, 1536, 2048, 3072, 4096};
    for (size_t ri = 0; ri < sizeof mib / sizeof mib[0]; ri++) {
        run_sweep(L, mib[ri], 68 * KB_KIB, 32, 128, "plane_sweep_p128");
        run_sweep(L, mib[ri], 68 * KB_KIB, 32, 512, "plane_sweep_p512");
    }
}

static void section_gather_blocks(link_t *L)
{
    int blocks[] = {4, 8, 16, 33, 66, 132, 264, 528, 1056};
    size_t pieces[] = {256, 512, 2048, 16384};
    size_t regions[] = {256 * KB_MIB, 4 * KB_GIB};
    size_t payload = L->o->quick ? 16 * KB_MIB : 64 * KB_MIB;
    for (int ri = 0; ri < 2; ri++)
        for (int pi = 0; pi < 4; pi++)
            for (int bi = 0; bi < 9; bi++) {
                if (regions[ri] > L->hb.bytes)
                    continue;
                if (L->o->quick && (pi != 1 || bi % 3 != 1))
                    continue;
                work_t w = gather_work(L, 0, pieces[pi], regions[ri], 0, payload, blocks[bi], 0);
                run_single(L, &w, "v2");
                if (ri == 0 && bi == 7) {            /* the unrolled variant vs the plain one */
                    w.variant = 1;
                    run_single(L, &w, "v1");
                }
            }
}

static void section_mixes(link_t *L)
{
    size_t big = (L->o->quick ? 64 : 256) * KB_MIB;
    int blocks = 4 * kb_sm_count();
    struct {
        size_t piece, region;
    } g[2] = {{512, 256 * KB_MIB}, {256, KB_GIB}};
    for (int gi = 0; gi < 2; gi++) {
        if (g[gi].region > L->hb.bytes / 2)
            continue;
        size_t hoff = L->hb.bytes / 2;              /* copies use the upper half */
        work_t gw = gather_work(L, 0, g[gi].piece, g[gi].region, 0, big, blocks, 0);
        work_t h2d = copy_work(L, W_H2D, big, 1, hoff, big);
        work_t d2h = copy_work(L, W_D2H, big, 1, hoff + big, 2 * big);
        work_t a[2] = {h2d, gw};
        const char *va[2] = {"mix_copy_gather", "mix_copy_gather"};
        run_mix(L, a, 2, "mix:copy+gather", va);
        work_t b[2] = {gw, d2h};
        const char *vb[2] = {"mix_gather_d2h", "mix_gather_d2h"};
        run_mix(L, b, 2, "mix:gather+d2h", vb);
        work_t c[3] = {h2d, gw, d2h};
        const char *vc[3] = {"mix_all3", "mix_all3", "mix_all3"};
        run_mix(L, c, 3, "mix:copy+gather+d2h", vc);
    }
}

/* Every per-piece path twice at once over disjoint regions. */
static void section_pairs(link_t *L)
{
    size_t payload = L->o->quick ? 16 * KB_MIB : 64 * KB_MIB;
    int blocks = 4 * kb_sm_count();
    size_t pieces[] = {256, 512, 2048, 16384};
    size_t regions[] = {256 * KB_MIB, 4 * KB_GIB};
    const char *v[2] = {"pair", "pair"};
    for (int ri = 0; ri < 2; ri++)
        for (int pi = 0; pi < 4; pi++) {
            if (2 * regions[ri] > L->hb.bytes || (L->o->quick && pi != 1))
                continue;
            work_t w[2] = {gather_work(L, 0, pieces[pi], regions[ri], 0, payload, blocks, 0),
                           gather_work(L, 1, pieces[pi], regions[ri], regions[ri], payload, blocks,
                                       L->dev_bytes / 2)};
            run_mix(L, w, 2, "mix:gather+gather", v);
        }
    size_t bp[] = {512, 4096, 32768};
    for (int pi = 0; pi < 3; pi++) {
        if (L->o->quick && pi != 1)
            continue;
        size_t count = 4096;
        work_t w[2] = {batch_work(L, bp[pi], count, 256 * KB_MIB, 0, 0),
                       batch_work(L, bp[pi], count, 256 * KB_MIB, 256 * KB_MIB, L->dev_bytes / 2)};
        run_mix(L, w, 2, "mix:batch+batch", v);
        batch_free(&w[0]);
        batch_free(&w[1]);
    }
    size_t widths[] = {512, 4096};
    for (int i = 0; i < 2; i++) {
        size_t rows = (64 * KB_MIB) / widths[i];
        work_t w[2] = {copy2d_work(L, widths[i], rows, 0, 0),
                       copy2d_work(L, widths[i], rows, 4 * widths[i] * rows, L->dev_bytes / 2)};
        run_mix(L, w, 2, "mix:copy2d+copy2d", v);
    }
}

/* Reference check: a gather reads exactly the bytes at its offsets. */
static int check_gather(link_t *L)
{
    size_t piece = 512, n = 4096;
    work_t w = gather_work(L, 0, piece, 64 * KB_MIB, 0, n * piece, 64, 0);
    CK(cudaMemset(L->dev, 0xee, n * piece));
    work_enqueue(&w, L->s[0]);
    CK(cudaStreamSynchronize(L->s[0]));
    uint64_t *off = (uint64_t *)malloc(n * sizeof *off);
    char *got = (char *)malloc(n * piece);
    CK(cudaMemcpy(off, w.off, n * sizeof *off, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got, L->dev, n * piece, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad = memcmp(got + i * piece, (char *)L->hb.ptr + off[i], piece) != 0;
    free(off);
    free(got);
    fprintf(stderr, "check sm_gather (%s): %s\n", kb_alloc_name(L->hb.kind), bad ? "FAILED" : "ok");
    return bad;
}

/* The sections run over cudaHostAlloc memory, in order; --only names one to run alone. */
static const struct {
    const char *name;
    void (*run)(link_t *);
} host_sections[] = {{"ce_sizes", section_ce_sizes},         {"duplex_streams", section_duplex_streams},
                     {"2d_batch", section_2d_batch},         {"gather_blocks", section_gather_blocks},
                     {"gather_payloads", section_gather_payloads}, {"gather_rows", section_gather_rows},
                     {"gather_order", section_gather_order}, {"plane_sweep", section_plane_sweep},
                     {"mixes", section_mixes},
                     {"pairs", section_pairs},               {"gather_grid", section_gather_grid}};

/* The section named `name`, or NULL. */
static void (*section_named(const char *name))(link_t *)
{
    for (size_t i = 0; i < sizeof host_sections / sizeof host_sections[0]; i++)
        if (!strcmp(host_sections[i].name, name))
            return host_sections[i].run;
    return NULL;
}

/* --only: that section alone over cudaHostAlloc memory (no time slices, no other allocator). */
static int run_only(link_t *L, const char *name)
{
    void (*run)(link_t *) = section_named(name);
    if (!run) {
        fprintf(stderr, "kbench: link: no section '%s'\n", name);
        return 2;
    }
    if (kb_host_alloc(&L->hb, L->o->max_region, KB_HOSTALLOC) != 0)
        return fprintf(stderr, "kbench: link: cudaHostAlloc of the host buffer failed\n"), 2;
    kb_fill_random(L->hb.ptr, L->o->max_region, 42);
    int bad = check_gather(L);
    if (!bad)
        run(L);
    kb_host_free(&L->hb);
    return bad;
}

int kb_suite_link(const kb_opts_t *o)
{
    static kb_ts_result_t ts[KB_TS_MAX_RESULTS];
    int n_ts = o->only ? 0 : kb_timeslice_measure(ts, KB_TS_MAX_RESULTS);   /* forks: before this process starts CUDA */
    link_t L;
    memset(&L, 0, sizeof L);
    L.o = o;
    L.csv = kb_csv_open(o->out_path, "link", "per row (allocator column)", o);
    kb_measure_ceilings(L.csv);
    for (int i = 0; i < MAX_STREAMS; i++)
        CK(cudaStreamCreateWithFlags(&L.s[i], cudaStreamNonBlocking));
    L.dev_bytes = 2 * KB_GIB;
    CK(cudaMalloc(&L.dev, L.dev_bytes));
    L.max_pieces = 2 * 1024 * 1024;
    for (int i = 0; i < 2; i++)
        CK(cudaMalloc(&L.off[i], L.max_pieces * sizeof(uint64_t)));
    int fail = o->only ? run_only(&L, o->only) : 0;
    for (int a = 0; a < KB_N_ALLOC && !o->only; a++) {
        size_t bytes = o->max_region;
        if (kb_host_alloc(&L.hb, bytes, (kb_alloc_t)a) != 0) {
            fprintf(stderr, "kbench: link: allocator %s unavailable, skipped\n",
                    kb_alloc_name((kb_alloc_t)a));
            continue;
        }
        kb_fill_random(L.hb.ptr, bytes, 42 + a);
        if (check_gather(&L)) {
            fail = 1;
            kb_host_free(&L.hb);
            continue;
        }
        if (a == KB_HOSTALLOC) {
            for (size_t i = 0; i < sizeof host_sections / sizeof host_sections[0]; i++)
                host_sections[i].run(&L);
        } else {                                      /* the allocator's effect on each path */
            work_t w = copy_work(&L, W_H2D, 64 * KB_MIB, 4, 0, 0);
            run_single(&L, &w, "b2b");
            section_gather_grid(&L);
        }
        kb_host_free(&L.hb);
    }
    for (int i = 0; i < MAX_STREAMS; i++)
        CK(cudaStreamDestroy(L.s[i]));
    CK(cudaFree(L.dev));
    CK(cudaFree(L.off[0]));
    CK(cudaFree(L.off[1]));
    kb_timeslice_rows(L.csv, ts, n_ts);
    if (!o->only && n_ts < KB_TS_MAX_RESULTS)
        fprintf(stderr, "kbench: link: %d of %d time-slice measurements failed\n", KB_TS_MAX_RESULTS - n_ts,
                KB_TS_MAX_RESULTS);
    kb_csv_close(L.csv);
    return fail;
}
