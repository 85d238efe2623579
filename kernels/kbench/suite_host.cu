/* suite_host.cu: the host suite — host DRAM bandwidth as the CPU cores see it, alone and beside the
 * GPU's copy-engine traffic over PCIe.
 *
 * Why: every GPU of a box reads its sessions' K/V and index from one host DRAM. odsim models host
 * DRAM as a constraint that all link flows cross; its capacity must be measured, not taken from a
 * datasheet. Two things are measured here:
 *   - CPU streaming alone (read, write, copy) with 1..N threads, each over its own first-touched
 *     buffer larger than the last-level cache: the sustained bandwidth the cores can draw;
 *   - a pinned-memory H2D (or D2H) copy loop beside CPU threads reading or writing: how much each
 *     side keeps when both draw on host DRAM at once (the interference the model's shared
 *     constraint predicts).
 *
 * Method: every worker (CPU thread or GPU copy loop) runs until told to stop and adds the bytes it
 * finished to its own counter; after a warm-up the main thread samples the counters at the
 * boundaries of `reps` equal windows. A window's rate is its bytes over its wall time; each row
 * summarises the windows (t_*_us are microseconds per GiB moved, so gbps = 1 GiB / t_med).
 * Rows: op host_stream (variant read|write|copy, `streams` = CPU threads), op h2d_copy / d2h_copy
 * (variant alone, or beside_read|beside_write with `streams` = CPU threads beside it), and
 * host_stream rows with variant read_beside_h2d etc. for the CPU side of the same windows.
 */
#include <pthread.h>
#include <atomic>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kb.h"

#define HOST_THREAD_BYTES (512 * KB_MIB)  /* per CPU thread: far beyond any last-level cache */
#define HOST_CHUNK_BYTES (16 * KB_MIB)    /* counters advance per chunk */
#define HOST_COPY_BYTES (64 * KB_MIB)     /* one GPU copy */
#define HOST_MAX_THREADS 64

typedef enum { HS_READ, HS_WRITE, HS_COPY } hs_kind_t;
static const char *const hs_names[] = {"read", "write", "copy"};

typedef struct {
    hs_kind_t kind;
    uint64_t *buf;            /* HOST_THREAD_BYTES, first-touched by this thread */
    std::atomic<int> *stop;
    std::atomic<unsigned long long> bytes;
    volatile uint64_t sink;
} hs_worker_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Bytes counted for a pass: a copy reads one half and writes the other (both count). */
static void *hs_run(void *p)
{
    hs_worker_t *w = (hs_worker_t *)p;
    size_t words = HOST_CHUNK_BYTES / sizeof(uint64_t), nchunks = HOST_THREAD_BYTES / HOST_CHUNK_BYTES;
    uint64_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0, pass = 1;
    while (!w->stop->load(std::memory_order_relaxed)) {
        for (size_t c = 0; c < nchunks && !w->stop->load(std::memory_order_relaxed); c++) {
            uint64_t *b = w->buf + c * words;
            if (w->kind == HS_READ) {
                for (size_t i = 0; i < words; i += 4) {
                    acc0 += b[i];
                    acc1 += b[i + 1];
                    acc2 += b[i + 2];
                    acc3 += b[i + 3];
                }
            } else if (w->kind == HS_WRITE) {
                for (size_t i = 0; i < words; i++)
                    b[i] = pass + i;
            } else if (c % 2 == 0) {
                memcpy(b + words, b, HOST_CHUNK_BYTES);   /* chunk c → c+1: read + write */
                c++;
            }
            w->bytes += w->kind == HS_COPY ? 2 * HOST_CHUNK_BYTES : HOST_CHUNK_BYTES;
        }
        pass++;
    }
    w->sink = acc0 + acc1 + acc2 + acc3;
    return NULL;
}

/* First touch by the thread that streams it, so the pages sit on that thread's NUMA node. */
static void *hs_touch(void *p)
{
    hs_worker_t *w = (hs_worker_t *)p;
    memset(w->buf, 0x5a, HOST_THREAD_BYTES);
    return NULL;
}

typedef struct {
    cudaMemcpyKind kind;
    void *dev, *host;
    std::atomic<int> *stop;
    std::atomic<unsigned long long> bytes;
} gpu_worker_t;

static void *gpu_run(void *p)
{
    gpu_worker_t *g = (gpu_worker_t *)p;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    while (!g->stop->load(std::memory_order_relaxed)) {
        if (g->kind == cudaMemcpyHostToDevice)
            CK(cudaMemcpyAsync(g->dev, g->host, HOST_COPY_BYTES, g->kind, s));
        else
            CK(cudaMemcpyAsync(g->host, g->dev, HOST_COPY_BYTES, g->kind, s));
        CK(cudaStreamSynchronize(s));
        g->bytes += HOST_COPY_BYTES;
    }
    CK(cudaStreamDestroy(s));
    return NULL;
}

typedef struct {
    hs_worker_t *w;           /* the CPU workers, allocated once */
    int max_threads;
    void *dev, *pinned;
    int reps;
    double window_s, warm_s;
} host_ctx_t;

/* The per-window rates of a set of workers, as kb_stats over microseconds per GiB. */
static kb_stats_t window_stats(const unsigned long long *b0, const unsigned long long *b1, double dt_s,
                               int reps, double *t_us)
{
    for (int r = 0; r < reps; r++) {
        double bytes = (double)(b1[r] - b0[r]);
        t_us[r] = bytes > 0 ? dt_s * 1e6 * (double)KB_GIB / bytes : 1e12;
    }
    return kb_stats(t_us, reps);
}

/* Runs `threads` CPU workers of kind k (threads may be 0) and, when gpu_kind is not cudaMemcpyDefault,
 * one GPU copy loop, and writes a row for each side. */
static void host_measure(kb_csv_t *csv, host_ctx_t *h, int threads, hs_kind_t k, cudaMemcpyKind gpu_kind,
                         const char *cpu_variant, const char *gpu_variant)
{
    std::atomic<int> stop(0);
    pthread_t tid[HOST_MAX_THREADS + 1];
    for (int i = 0; i < threads; i++) {
        h->w[i].kind = k;
        h->w[i].stop = &stop;
        h->w[i].bytes = 0;
        if (pthread_create(&tid[i], NULL, hs_run, &h->w[i]))
            kb_die("pthread_create", __FILE__, __LINE__);
    }
    gpu_worker_t g;
    g.kind = gpu_kind;
    g.dev = h->dev;
    g.host = h->pinned;
    g.stop = &stop;
    g.bytes = 0;
    int with_gpu = gpu_kind != cudaMemcpyDefault;
    if (with_gpu && pthread_create(&tid[threads], NULL, gpu_run, &g))
        kb_die("pthread_create", __FILE__, __LINE__);

    usleep((useconds_t)(h->warm_s * 1e6));
    unsigned long long cb[65], gb[65];
    int reps = h->reps > 64 ? 64 : h->reps;
    double t0 = now_s(), t_end;
    for (int r = 0; r <= reps; r++) {
        if (r)
            usleep((useconds_t)(h->window_s * 1e6));
        unsigned long long c = 0;
        for (int i = 0; i < threads; i++)
            c += h->w[i].bytes;
        cb[r] = c;
        gb[r] = g.bytes;
    }
    t_end = now_s();
    stop.store(1);
    for (int i = 0; i < threads + with_gpu; i++)
        pthread_join(tid[i], NULL);

    double dt_s = (t_end - t0) / reps, t_us[64];
    if (threads > 0) {
        kb_row_t r = kb_row("host_stream", cpu_variant);
        r.streams = threads;
        r.region_bytes = (long long)threads * HOST_THREAD_BYTES;
        r.bytes_moved = (double)KB_GIB;
        r.allocator = "malloc_first_touch";
        r.st = window_stats(cb, cb + 1, dt_s, reps, t_us);
        kb_csv_row(csv, &r);
    }
    if (with_gpu) {
        kb_row_t r = kb_row(gpu_kind == cudaMemcpyHostToDevice ? "h2d_copy" : "d2h_copy", gpu_variant);
        r.streams = threads;
        r.piece_bytes = (long long)HOST_COPY_BYTES;
        r.bytes_moved = (double)KB_GIB;
        r.st = window_stats(gb, gb + 1, dt_s, reps, t_us);
        r.ref_gbps = gpu_kind == cudaMemcpyHostToDevice ? kb_ceil.h2d_gbps : kb_ceil.d2h_gbps;
        kb_csv_row(csv, &r);
    }
}

int kb_suite_host(const kb_opts_t *o)
{
    kb_csv_t *csv = kb_csv_open(o->out_path, "host", "cudaHostAlloc", o);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    host_ctx_t h;
    memset(&h, 0, sizeof h);
    h.max_threads = ncpu < 1 ? 1 : ncpu > HOST_MAX_THREADS ? HOST_MAX_THREADS : (int)ncpu;
    h.reps = o->quick ? 3 : 9;
    h.window_s = o->quick ? 0.1 : 0.25;
    h.warm_s = o->quick ? 0.1 : 0.3;
    kb_csv_meta(csv, "host_cpus", "%ld online; threads up to %d, %zu MiB each (first-touched by the thread)",
                ncpu, h.max_threads, HOST_THREAD_BYTES / KB_MIB);
    kb_csv_meta(csv, "host_method", "rates over %d windows of %.2f s after %.2f s warm-up; t_*_us per GiB moved; "
                "a copy counts read + write", h.reps, h.window_s, h.warm_s);
    kb_measure_ceilings(csv);

    h.w = new hs_worker_t[h.max_threads]();
    pthread_t tid[HOST_MAX_THREADS];
    for (int i = 0; i < h.max_threads; i++) {
        if (posix_memalign((void **)&h.w[i].buf, 2 * KB_MIB, HOST_THREAD_BYTES))
            kb_die("posix_memalign", __FILE__, __LINE__);
        if (pthread_create(&tid[i], NULL, hs_touch, &h.w[i]))
            kb_die("pthread_create", __FILE__, __LINE__);
    }
    for (int i = 0; i < h.max_threads; i++)
        pthread_join(tid[i], NULL);
    CK(cudaMalloc(&h.dev, HOST_COPY_BYTES));
    CK(cudaHostAlloc(&h.pinned, HOST_COPY_BYTES, cudaHostAllocPortable));
    memset(h.pinned, 0x3c, HOST_COPY_BYTES);

    int counts[8], nc = 0;
    for (int t = 1; t < h.max_threads; t *= 2)
        counts[nc++] = t;
    counts[nc++] = h.max_threads;

    for (int k = HS_READ; k <= HS_COPY; k++)
        for (int i = 0; i < nc; i++)
            host_measure(csv, &h, counts[i], (hs_kind_t)k, cudaMemcpyDefault, hs_names[k], NULL);
    host_measure(csv, &h, 0, HS_READ, cudaMemcpyHostToDevice, NULL, "alone");
    host_measure(csv, &h, 0, HS_READ, cudaMemcpyDeviceToHost, NULL, "alone");
    for (int i = 0; i < nc; i++)
        host_measure(csv, &h, counts[i], HS_READ, cudaMemcpyHostToDevice, "read_beside_h2d", "beside_read");
    for (int i = 0; i < nc; i++)
        host_measure(csv, &h, counts[i], HS_WRITE, cudaMemcpyHostToDevice, "write_beside_h2d", "beside_write");
    for (int i = 0; i < nc; i++)
        host_measure(csv, &h, counts[i], HS_READ, cudaMemcpyDeviceToHost, "read_beside_d2h", "beside_read");

    CK(cudaFree(h.dev));
    CK(cudaFreeHost(h.pinned));
    for (int i = 0; i < h.max_threads; i++)
        free(h.w[i].buf);
    delete[] h.w;
    kb_csv_close(csv);
    return 0;
}
