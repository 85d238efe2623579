/* kb_util.cu: timing, statistics, the CSV writer and the measured ceilings. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/klog.h>
#include <sys/utsname.h>
#include "kb.h"
#include "ref/kref.h"

kb_ceilings_t kb_ceil;

void kb_die(const char *what, const char *file, int line)
{
    fprintf(stderr, "kbench: fatal: %s at %s:%d\n", what, file, line);
    exit(2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *s, int n, double p)
{
    double pos = p * (n - 1);
    int i = (int)pos;
    if (i >= n - 1)
        return s[n - 1];
    return s[i] + (pos - i) * (s[i + 1] - s[i]);
}

kb_stats_t kb_stats(double *t, int n)
{
    kb_stats_t st;
    memset(&st, 0, sizeof st);
    st.reps = n;
    if (n == 0)
        return st;
    qsort(t, n, sizeof *t, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += t[i];
    st.mean = sum / n;
    st.med = pct(t, n, 0.5);
    st.p10 = pct(t, n, 0.1);
    st.p90 = pct(t, n, 0.9);
    st.p99 = pct(t, n, 0.99);
    return st;
}

kb_timing_t kb_timing_for(double est_us, int quick)
{
    kb_timing_t tm;
    tm.warmup = 2;
    tm.min_reps = quick ? 3 : 5;
    /* a p99 needs samples above it: of 30 it is the maximum (one stray event sets it), of 300 the
     * fourth largest. Short ops get 300 (the time budget still bounds them); long ones, whose
     * p99 a stray event moves less, 30 */
    tm.max_reps = quick ? 10 : (est_us < KB_SHORT_OP_US ? KB_P99_REPS : 30);
    tm.max_seconds = quick ? 0.05 : 0.25;
    return tm;
}

kb_stats_t kb_time(kb_fn fn, kb_fn prep, void *ctx, cudaStream_t s, const kb_timing_t *tm)
{
    return kb_time_around(fn, prep, NULL, ctx, s, tm);
}

kb_stats_t kb_time_around(kb_fn fn, kb_fn prep, kb_fn post, void *ctx, cudaStream_t s, const kb_timing_t *tm)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < tm->warmup; i++) {
        if (prep)
            prep(ctx, s);
        fn(ctx, s);
        if (post)
            post(ctx, s);
    }
    CK(cudaStreamSynchronize(s));
    double *t = (double *)malloc(tm->max_reps * sizeof *t);
    double spent = 0;
    int n = 0;
    while (n < tm->max_reps && (n < tm->min_reps || spent < tm->max_seconds * 1e6)) {
        if (prep)
            prep(ctx, s);
        CK(cudaEventRecord(a, s));
        fn(ctx, s);
        CK(cudaEventRecord(b, s));
        if (post)
            post(ctx, s);
        CK(cudaEventSynchronize(b));
        CKL();
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t[n++] = ms * 1e3;
        spent += ms * 1e3;
    }
    kb_stats_t st = kb_stats(t, n);
    free(t);
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return st;
}

/* Reads the buffer (16-byte loads, grid-stride) and keeps one word per block, so the loads stay. */
__global__ void l2_evict_kernel1(const uint4 *__restrict__ buf, size_t n, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = buf[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x5a5a5a5bu)   /* never true for the buffer's bytes; keeps the loads */
        sink[blockIdx.x] = acc;
}

/* Reads the first `bytes` of a device buffer of `size` bytes allocated (and filled) on first use. */
static void read_buffer(void **buf, unsigned **sink, size_t size, size_t bytes, cudaStream_t s)
{
    if (!*buf) {
        CK(cudaMalloc(buf, size));
        CK(cudaMalloc(sink, 4096 * sizeof **sink));
        CK(cudaMemset(*buf, 0x5a, size));
        CK(cudaDeviceSynchronize());
    }
    l2_evict_kernel1<<<4 * kb_sm_count(), 256, 0, s>>>((const uint4 *)*buf, (bytes < size ? bytes : size) / 16, *sink);
    CKL();
}

/* Evicts the L2 by reading a buffer four times its size: the lines it leaves are clean, so a timed
 * kernel after it pays no write-back of the flush's own lines (a memset would leave up to the whole
 * L2 dirty, ~15 us of write-back on an H200 competing with the kernel's reads). */
void kb_l2_flush(cudaStream_t s)
{
    static void *buf;
    static unsigned *sink;
    static size_t size;
    if (!size) {
        int l2;
        CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
        size = 4 * (size_t)l2;
    }
    read_buffer(&buf, &sink, size, size, s);
}

/* Reads the first `bytes` (at most 4 GiB) of a device buffer of its own, as kb_l2_flush does: the
 * pages a step's HBM kernels touch between two of its gathers, whose translations share the GPU's
 * TLBs with the gathers' host pages. */
void kb_hbm_read(size_t bytes, cudaStream_t s)
{
    static void *buf;
    static unsigned *sink;
    read_buffer(&buf, &sink, 4 * KB_GIB, bytes, s);
}

const kb_model_t *kb_model(const char *name)
{
    static const kb_model_t models[] = {
        {"qwen3-8b", 36, 32, 8, 4096, 12288, 151936},
        {"llama-3.1-8b", 32, 32, 8, 4096, 14336, 128256},
        {"qwen2.5-7b", 28, 28, 4, 3584, 18944, 152064},
        {"llama-3.1-70b", 80, 64, 8, 8192, 28672, 128256},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

int kb_sm_count(void)
{
    int n;
    CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return n;
}

kb_row_t kb_row(const char *op, const char *variant)
{
    kb_row_t r;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.variant = variant;
    r.n_tokens = r.heads = r.bits = r.k = r.batch = -1;
    r.piece_bytes = r.region_bytes = r.pieces = r.blocks = -1;
    r.streams = r.procs = -1;
    r.concurrent_id = r.qheads = -1;
    r.chunk_tokens = -1;
    r.per_s = -1;
    r.ref_gbps = -1;
    return r;
}

struct kb_csv {
    FILE *f;
    const char *suite, *model;
    int rows;
};

static void read_line(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(buf, (int)n, f))
        buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

static int file_has(const char *path, const char *needle)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static void meminfo_value(const char *key, char *buf, size_t n)
{
    char line[256];
    buf[0] = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0) {
            const char *v = line + strlen(key);
            while (*v == ' ' || *v == ':')
                v++;
            snprintf(buf, n, "%s", v);
            buf[strcspn(buf, "\n")] = 0;
        }
    fclose(f);
}

/* The host runtime (issue 31: held-out data comes from the primary's runtime) and what names it:
 * Firecracker's guest kernels carry "-fc-" in their release; gVisor reports kernel 4.4.0 and its
 * synthetic kernel log names it; the kernel log and /proc/1/cgroup's first line as read. */
static void write_runtime_meta(kb_csv_t *c, const struct utsname *u)
{
    static char log[1 << 16];
    int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, (int)sizeof log - 1);
    log[n > 0 ? n : 0] = 0;
    int gv = strstr(log, "gVisor") != NULL, fc_log = strstr(log, "Firecracker") != NULL;
    int fc = strstr(u->release, "-fc-") != NULL;
    char cg[256];
    read_line("/proc/1/cgroup", cg, sizeof cg);
    kb_csv_meta(c, "runtime", "%s (kernel %s; release %s -fc-; kernel log %s, names gVisor: %s, Firecracker: %s; "
                "/proc/1/cgroup: %s)", gv ? "gvisor" : (fc || fc_log) ? "firecracker" : "unknown", u->release,
                fc ? "has" : "lacks", n > 0 ? "read" : "unreadable", gv ? "yes" : "no", fc_log ? "yes" : "no",
                cg[0] ? cg : "unreadable");
}

static void write_platform_meta(kb_csv_t *c)
{
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    int drv, rt, clk, mclk, bus;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
    CK(cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, 0));
    CK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0));
    char buf[512], path[256], w[64];
    kb_csv_meta(c, "device", "%s (sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB)", p.name, p.major,
                p.minor, p.multiProcessorCount, p.totalGlobalMem / (double)KB_GIB,
                p.l2CacheSize >> 20);
    read_line("/proc/driver/nvidia/version", buf, sizeof buf);
    kb_csv_meta(c, "driver", "%d.%d (%s)", drv / 1000, drv % 1000 / 10, buf[0] ? buf : "n/a");
    kb_csv_meta(c, "cuda", "runtime %d.%d", rt / 1000, rt % 1000 / 10);
    kb_csv_meta(c, "clocks", "sm max %d MHz, memory %d MHz, bus %d bit", clk / 1000, mclk / 1000,
                bus);
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.0/current_link_speed",
             p.pciDomainID, p.pciBusID, p.pciDeviceID);
    read_line(path, buf, sizeof buf);
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.0/current_link_width",
             p.pciDomainID, p.pciBusID, p.pciDeviceID);
    read_line(path, w, sizeof w);
    kb_csv_meta(c, "pcie", "%s x%s (sysfs of %04x:%02x:%02x.0)", buf[0] ? buf : "unknown",
                w[0] ? w : "?", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    struct utsname u;
    uname(&u);
    int hyp = file_has("/proc/cpuinfo", "hypervisor");
    const char *virt = strstr(u.release, "-fc-") ? "Firecracker microVM"
                       : hyp                     ? "virtual machine"
                                                 : "bare metal";
    kb_csv_meta(c, "virtualisation", "%s (kernel %s, cpu hypervisor flag %s)", virt, u.release,
                hyp ? "set" : "clear");
    write_runtime_meta(c, &u);
    kb_csv_meta(c, "iommu", "%s", file_has("/proc/cmdline", "iommu") ? "named on kernel cmdline"
                                                                   : "not visible in guest");
    read_line("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
    char hp[64], mt[64];
    meminfo_value("HugePages_Total", hp, sizeof hp);
    meminfo_value("MemTotal", mt, sizeof mt);
    kb_csv_meta(c, "host_memory", "MemTotal %s; THP %s; HugePages_Total %s", mt,
                buf[0] ? buf : "n/a", hp[0] ? hp : "n/a");
}

kb_csv_t *kb_csv_open(const char *path, const char *suite, const char *allocator,
                      const kb_opts_t *o)
{
    kb_csv_t *c = (kb_csv_t *)calloc(1, sizeof *c);
    c->f = path ? fopen(path, "w") : stdout;
    if (!c->f)
        kb_die("cannot open the output CSV", __FILE__, __LINE__);
    c->suite = suite;
    c->model = o->model;
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    kb_csv_meta(c, "suite", "%s%s", suite, o->quick ? " (quick)" : "");
    write_platform_meta(c);
    kb_csv_meta(c, "kbench", "%s", KBENCH_VERSION);
    kb_csv_meta(c, "commit", "%s", KBENCH_COMMIT);
    kb_csv_meta(c, "sources", "%s (sha256 of kernels/*.cu, *.c, *.h, ref/*, kbench/*, Makefile: the same kbench, whatever the commit line says)", KBENCH_SOURCES);
    kb_csv_meta(c, "date", "%s", date);
    kb_csv_meta(c, "allocator", "%s", allocator);
    kb_csv_meta(c, "model", "%s", o->model);
    return c;
}

kb_csv_t *kb_csv_append(const char *path, const char *suite, const char *model)
{
    kb_csv_t *c = (kb_csv_t *)calloc(1, sizeof *c);
    c->f = path ? fopen(path, "a") : stdout;
    if (!c->f)
        kb_die("cannot open the output CSV", __FILE__, __LINE__);
    c->suite = suite;
    c->model = model;
    return c;
}

void kb_csv_meta(kb_csv_t *c, const char *key, const char *fmt, ...)
{
    va_list ap;
    fprintf(c->f, "# %s: ", key);
    va_start(ap, fmt);
    vfprintf(c->f, fmt, ap);
    va_end(ap);
    fputc('\n', c->f);
}

static void put_ll(FILE *f, long long v)
{
    if (v >= 0)
        fprintf(f, "%lld", v);
    fputc(',', f);
}

static void put_s(FILE *f, const char *s)
{
    if (s)
        fputs(s, f);
    fputc(',', f);
}

static void put_d(FILE *f, double v, const char *fmt)
{
    if (v >= 0)
        fprintf(f, fmt, v);
    fputc(',', f);
}

static const char *COLUMNS =
    "suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,"
    "allocator,streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,"
    "t_p90_us,t_p99_us,per_s,gbps,method,model,concurrent_id,qheads,chunk_tokens,t_mean_us,"
    "ref_gbps,workload_fnv\n";

/* The header's last line, `# key_sigma2: v0 .. v127`: the variance of each synthetic key channel
 * (kref_key_sigma squared, as a float, %.9g each), written as data so a reader of the CSV need not
 * link kref.h. Last, because its ~1.5 KB line outgrows the line buffers of simple header readers. */
static void write_key_sigma2(FILE *f)
{
    fputs("# key_sigma2:", f);
    for (int j = 0; j < KREF_D; j++) {
        float s = kref_key_sigma(j);
        fprintf(f, " %.9g", (double)(s * s));
    }
    fputc('\n', f);
}

void kb_csv_row(kb_csv_t *c, const kb_row_t *r)
{
    FILE *f = c->f;
    if (c->rows++ == 0) {
        write_key_sigma2(f);
        fputs(COLUMNS, f);
    }
    double gbps = r->st.med > 0 && r->bytes_moved > 0 ? r->bytes_moved / (r->st.med * 1e3) : -1;
    put_s(f, c->suite);
    put_s(f, r->op);
    put_s(f, r->variant);
    put_ll(f, r->n_tokens);
    put_ll(f, r->heads);
    put_ll(f, r->bits);
    put_ll(f, r->k);
    put_ll(f, r->batch);
    put_ll(f, r->piece_bytes);
    put_ll(f, r->region_bytes);
    put_ll(f, r->pieces);
    put_ll(f, r->blocks);
    put_s(f, r->allocator);
    put_ll(f, r->streams);
    put_ll(f, r->procs);
    put_s(f, r->policy);
    put_s(f, r->placement);
    put_s(f, r->layout);
    put_d(f, r->bytes_moved > 0 ? r->bytes_moved : -1, "%.0f");
    put_ll(f, r->st.reps);
    put_d(f, r->st.med, "%.3f");
    put_d(f, r->st.p10, "%.3f");
    put_d(f, r->st.p90, "%.3f");
    put_d(f, r->st.p99, "%.3f");
    put_d(f, r->per_s, "%.6g");
    put_d(f, gbps, "%.3f");
    put_s(f, r->method);
    put_s(f, c->model);
    put_ll(f, r->concurrent_id);
    put_ll(f, r->qheads);
    put_ll(f, r->chunk_tokens);
    put_d(f, r->st.mean, "%.3f");
    put_d(f, r->ref_gbps > 0 ? r->ref_gbps : -1, "%.1f");
    if (r->workload_fnv)
        fputs(r->workload_fnv, f);
    fputc('\n', f);
    fflush(f);                  /* a suite stopped by its time limit keeps its rows */
    fprintf(stderr, "%-7s %-12s %-16s n=%-8lld piece=%-7lld t=%10.2f us %8.2f GB/s", c->suite,
            r->op, r->variant ? r->variant : "", r->n_tokens, r->piece_bytes, r->st.med,
            gbps > 0 ? gbps : 0.0);
    if (r->ref_gbps > 0 && gbps > 0)
        fprintf(stderr, " = %5.1f%% of %.1f", 100.0 * gbps / r->ref_gbps, r->ref_gbps);
    fputc('\n', stderr);
}

void kb_csv_close(kb_csv_t *c)
{
    fflush(c->f);
    if (c->f != stdout)
        fclose(c->f);
    free(c);
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    cudaMemcpyKind kind;
    int times;
} copy_ctx_t;

static void copy_fn(void *p, cudaStream_t s)
{
    copy_ctx_t *c = (copy_ctx_t *)p;
    for (int i = 0; i < c->times; i++)
        CK(cudaMemcpyAsync(c->dst, c->src, c->bytes, c->kind, s));
}

void kb_measure_ceilings(kb_csv_t *csv)
{
    size_t big = KB_GIB, link = 256 * KB_MIB;
    void *d0, *d1, *h;
    CK(cudaMalloc(&d0, big));
    CK(cudaMalloc(&d1, big));
    CK(cudaHostAlloc(&h, link, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaMemset(d0, 0x3c, big));
    memset(h, 0x3c, link);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    kb_timing_t tm = {2, 5, 10, 0.2};
    copy_ctx_t dd = {d1, d0, big, cudaMemcpyDeviceToDevice, 1};
    kb_stats_t st = kb_time(copy_fn, NULL, &dd, s, &tm);
    kb_ceil.hbm_gbps = 2.0 * big / (st.med * 1e3);
    copy_ctx_t hd = {d0, h, link, cudaMemcpyHostToDevice, 4};
    st = kb_time(copy_fn, NULL, &hd, s, &tm);
    kb_ceil.h2d_gbps = 4.0 * link / (st.med * 1e3);
    copy_ctx_t dh = {h, d0, link, cudaMemcpyDeviceToHost, 4};
    st = kb_time(copy_fn, NULL, &dh, s, &tm);
    kb_ceil.d2h_gbps = 4.0 * link / (st.med * 1e3);
    kb_csv_meta(csv, "ceiling_hbm_gbps", "%.1f (1 GiB device-to-device copy, read + write)",
                kb_ceil.hbm_gbps);
    kb_csv_meta(csv, "ceiling_h2d_gbps", "%.2f (4 x 256 MiB cudaHostAlloc H2D back to back)",
                kb_ceil.h2d_gbps);
    kb_csv_meta(csv, "ceiling_d2h_gbps", "%.2f (4 x 256 MiB D2H back to back)", kb_ceil.d2h_gbps);
    fprintf(stderr, "ceilings: HBM %.1f GB/s, H2D %.2f GB/s, D2H %.2f GB/s\n", kb_ceil.hbm_gbps,
            kb_ceil.h2d_gbps, kb_ceil.d2h_gbps);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d0));
    CK(cudaFree(d1));
    CK(cudaFreeHost(h));
}

int kb_write_all(int fd, const void *p, size_t n)
{
    const char *c = (const char *)p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int kb_read_all(int fd, void *p, size_t n)
{
    char *c = (char *)p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}
