/* replay_sess.cu: one session of a replay workload on the GPU (see replay_sess.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cublas_v2.h>
#include "kb.h"
#include "kern.h"
#include "hostmem.h"
#include "misc.h"
#include "replay_sess.h"

#define RP_HBM_FILL 0x5a          /* every byte of an hbm op's buffer */
#define RP_FMA_TOL 1e-3           /* compute check: relative error of a block's sum */
#define RP_BF16_ONE 0x3f80        /* a gemm op's inputs: every element 1.0, so C = k everywhere */

typedef struct {
    const rf_op_t *o;
    uint8_t *dev;                 /* transfers: pieces x piece_bytes, contiguous; hbm: `bytes` */
    uint64_t *hoff;               /* transfers but h2d2d: each piece's offset in the region */
    uint64_t *doff;               /* gather: hoff on the device */
    void **bdst;                  /* h2dbatch: the batch's pointer and size arrays */
    const void **bsrc;
    size_t *bsize;
    void *out;                    /* hbm: unsigned long long per block; compute: float per block;
                                   * gemm: C, m x n BF16 (column-major) */
    uint16_t *ga, *gb;            /* gemm: A (m x k) and B (k x n), BF16, column-major */
    cudaEvent_t done;             /* recorded after the op when a later op waits for it */
} rp_op_t;

struct rp_sess {
    const rf_workload_t *w;
    const rf_session_t *s;
    uint32_t id;
    char tag[RF_NAME_MAX + 32];   /* "NAME session S", for messages */
    kb_hostbuf_t hb;
    uint8_t *region;
    int blocks;                   /* of 256 threads for gathers and kernels: 4 per SM */
    unsigned used;                /* bit k: stream k issued on since the last sync */
    cudaStream_t st[RF_MAX_STREAMS];
    cublasHandle_t blas;          /* made when an op is a gemm; bound to the op's stream per call */
    rp_op_t *ops;
};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

double rp_now_s(void) { return now_ns() * 1e-9; }

void rp_spin_host_us(uint64_t us)
{
    int64_t end = now_ns() + (int64_t)us * 1000;
    while (now_ns() < end)
        ;
}

void rp_idle_us(uint64_t us)
{
    int64_t end = now_ns() + (int64_t)us * 1000, wake = end - 100000;
    if (us > 200) {
        struct timespec t = {(time_t)(wake / 1000000000), (long)(wake % 1000000000)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0)
            ;                     /* EINTR: sleep on */
    }
    while (now_ns() < end)
        ;
}

static int is_gpu_op(int kind) { return kind != RF_OP_SYNC && kind != RF_OP_HOST; }

static int sess_fail(const rp_sess_t *S, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kbench replay: %s: ", S->tag);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

/* cudaMalloc with the op and size named on failure. */
static int dev_alloc(rp_sess_t *S, uint32_t i, void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess)
        return 0;
    *p = NULL;
    return sess_fail(S, "op %u (%s): cudaMalloc of %zu bytes: %s", i, rf_kind_name(S->s->ops[i].kind), bytes,
                     cudaGetErrorString(e));
}

/* Device bytes the session's ops need. */
static uint64_t dev_need(const rp_sess_t *S)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < S->s->n_ops; i++) {
        const rf_op_t *o = &S->s->ops[i];
        if (rf_kind_is_transfer(o->kind))
            n += o->pieces * o->piece_bytes + (o->kind == RF_OP_GATHER ? o->pieces * 8 : 0);
        else if (o->kind == RF_OP_HBM)
            n += o->bytes;
        else if (o->kind == RF_OP_GEMM)
            n += 2 * (o->m * o->k + o->k * o->n + o->m * o->n);
    }
    return n;
}

/* The transfer's host arrays: piece offsets and, for h2dbatch, the batch's arrays. */
static int setup_pieces(rp_sess_t *S, uint32_t i)
{
    rp_op_t *x = &S->ops[i];
    const rf_op_t *o = x->o;
    uint64_t P = o->pieces, B = o->piece_bytes;
    x->hoff = (uint64_t *)malloc(P * sizeof *x->hoff);
    if (!x->hoff)
        return sess_fail(S, "op %u: out of host memory", i);
    for (uint64_t p = 0; p < P; p++)
        x->hoff[p] = rf_piece_offset(S->w->seed, S->id, i, p, o->span_bytes, B);
    if (o->kind == RF_OP_GATHER) {
        if (dev_alloc(S, i, (void **)&x->doff, P * sizeof *x->doff))
            return -1;
        CK(cudaMemcpy(x->doff, x->hoff, P * sizeof *x->doff, cudaMemcpyHostToDevice));
    }
    if (o->kind == RF_OP_H2DBATCH) {
        x->bdst = (void **)malloc(P * sizeof *x->bdst);
        x->bsrc = (const void **)malloc(P * sizeof *x->bsrc);
        x->bsize = (size_t *)malloc(P * sizeof *x->bsize);
        if (!x->bdst || !x->bsrc || !x->bsize)
            return sess_fail(S, "op %u: out of host memory", i);
        for (uint64_t p = 0; p < P; p++) {
            x->bdst[p] = x->dev + p * B;
            x->bsrc[p] = S->region + x->hoff[p];
            x->bsize[p] = B;
        }
    }
    return 0;
}

/* Op i's device buffers, host arrays and stream. */
static int setup_op(rp_sess_t *S, uint32_t i, int max_pitch)
{
    rp_op_t *x = &S->ops[i];
    const rf_op_t *o = x->o;
    if (is_gpu_op(o->kind) && !S->st[o->stream])
        CK(cudaStreamCreateWithFlags(&S->st[o->stream], cudaStreamNonBlocking));
    for (uint32_t k = 0; k < o->n_after; k++) {
        rp_op_t *a = &S->ops[o->after[k]];
        if (is_gpu_op(a->o->kind) && !a->done)
            CK(cudaEventCreateWithFlags(&a->done, cudaEventDisableTiming));
    }
    if (rf_kind_is_transfer(o->kind)) {
        if (o->kind == RF_OP_H2D2D && rf_pitch(o) > (uint64_t)max_pitch)
            return sess_fail(S, "op %u (h2d2d): source pitch %llu bytes is above the device's limit for 2D "
                             "copies (cudaDevAttrMaxPitch %d)", i, (unsigned long long)rf_pitch(o), max_pitch);
        if (dev_alloc(S, i, (void **)&x->dev, o->pieces * o->piece_bytes))
            return -1;
        if (o->kind == RF_OP_D2H)   /* distinct bytes per piece: the check sees which piece landed where */
            kb_fill_random(x->dev, o->pieces * o->piece_bytes, ((uint64_t)S->id << 32) + i);
        return o->kind == RF_OP_H2D2D ? 0 : setup_pieces(S, i);
    }
    if (o->kind == RF_OP_HBM) {
        if (dev_alloc(S, i, (void **)&x->dev, o->bytes))
            return -1;
        CK(cudaMemset(x->dev, RP_HBM_FILL, o->bytes));
    }
    if (o->kind == RF_OP_HBM || o->kind == RF_OP_COMPUTE)
        return dev_alloc(S, i, &x->out, (size_t)S->blocks * 8);
    if (o->kind == RF_OP_GEMM) {
        if (!S->blas && cublasCreate(&S->blas) != CUBLAS_STATUS_SUCCESS)
            return sess_fail(S, "op %u (gemm): cublasCreate failed", i);
        if (dev_alloc(S, i, (void **)&x->ga, o->m * o->k * 2) || dev_alloc(S, i, (void **)&x->gb, o->k * o->n * 2) ||
            dev_alloc(S, i, &x->out, o->m * o->n * 2))
            return -1;
        kb_fill_u16(x->ga, o->m * o->k, RP_BF16_ONE, S->blocks, S->st[o->stream]);
        kb_fill_u16(x->gb, o->k * o->n, RP_BF16_ONE, S->blocks, S->st[o->stream]);
    }
    return 0;
}

rp_sess_t *rp_sess_new(const rf_workload_t *w, uint32_t id)
{
    rp_sess_t *S = (rp_sess_t *)calloc(1, sizeof *S);
    if (!S)
        return NULL;
    S->w = w;
    S->s = &w->sessions[id];
    S->id = id;
    snprintf(S->tag, sizeof S->tag, "%s session %u", w->name, id);
    S->ops = (rp_op_t *)calloc(S->s->n_ops, sizeof *S->ops);
    if (!S->ops) {
        free(S);
        return NULL;
    }
    for (uint32_t i = 0; i < S->s->n_ops; i++)
        S->ops[i].o = &S->s->ops[i];
    S->blocks = 4 * kb_sm_count();
    int max_pitch;
    CK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, 0));
    size_t free_b, total_b;
    CK(cudaMemGetInfo(&free_b, &total_b));
    uint64_t need = dev_need(S);
    if (need > free_b) {
        sess_fail(S, "its ops need %.2f GiB of device memory, %.2f GiB are free", need / (double)KB_GIB,
                  free_b / (double)KB_GIB);
        rp_sess_free(S);
        return NULL;
    }
    if (kb_host_alloc(&S->hb, S->s->region_bytes, KB_HOSTALLOC) != 0) {
        sess_fail(S, "cannot pin its region of %llu bytes", (unsigned long long)S->s->region_bytes);
        rp_sess_free(S);
        return NULL;
    }
    S->region = (uint8_t *)S->hb.ptr;
    for (uint32_t i = 0; i < S->s->n_ops; i++)
        if (setup_op(S, i, max_pitch) != 0) {
            rp_sess_free(S);
            return NULL;
        }
    CK(cudaDeviceSynchronize());
    return S;
}

void rp_sess_free(rp_sess_t *S)
{
    if (!S)
        return;
    CK(cudaDeviceSynchronize());
    for (uint32_t i = 0; S->ops && i < S->s->n_ops; i++) {
        rp_op_t *x = &S->ops[i];
        void *dbufs[] = {x->dev, x->doff, x->out, x->ga, x->gb};
        for (size_t k = 0; k < sizeof dbufs / sizeof dbufs[0]; k++)
            if (dbufs[k])
                CK(cudaFree(dbufs[k]));
        free(x->hoff);
        free(x->bdst);
        free((void *)x->bsrc);
        free(x->bsize);
        if (x->done)
            CK(cudaEventDestroy(x->done));
    }
    if (S->blas)
        cublasDestroy(S->blas);
    for (int k = 0; k < RF_MAX_STREAMS; k++)
        if (S->st[k])
            CK(cudaStreamDestroy(S->st[k]));
    kb_host_free(&S->hb);
    free(S->ops);
    free(S);
}

uint32_t rp_sess_n_ops(const rp_sess_t *S) { return S->s->n_ops; }

/* Enqueues op x's work on st (GPU ops only). */
static void launch(rp_sess_t *S, rp_op_t *x, cudaStream_t st)
{
    const rf_op_t *o = x->o;
    uint64_t P = o->pieces, B = o->piece_bytes;
    switch (o->kind) {
    case RF_OP_H2D:
        for (uint64_t p = 0; p < P; p++)
            CK(cudaMemcpyAsync(x->dev + p * B, S->region + x->hoff[p], B, cudaMemcpyHostToDevice, st));
        break;
    case RF_OP_D2H:
        for (uint64_t p = 0; p < P; p++)
            CK(cudaMemcpyAsync(S->region + x->hoff[p], x->dev + p * B, B, cudaMemcpyDeviceToHost, st));
        break;
    case RF_OP_H2D2D:
        CK(cudaMemcpy2DAsync(x->dev, B, S->region, rf_pitch(o), B, P, cudaMemcpyHostToDevice, st));
        break;
    case RF_OP_H2DBATCH: {
        struct cudaMemcpyAttributes at;
        memset(&at, 0, sizeof at);
        at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;   /* a d2h may have written the source */
        size_t idx0 = 0;
        CK(cudaMemcpyBatchAsync(x->bdst, x->bsrc, x->bsize, P, &at, &idx0, 1, st));
        break;
    }
    case RF_OP_GATHER:
        kb_gather(2, x->dev, S->region, x->doff, P, B, S->blocks, st);
        break;
    case RF_OP_HBM:
        kb_hbm_reduce(x->dev, o->bytes, (unsigned long long *)x->out, S->blocks, st);
        break;
    case RF_OP_COMPUTE:
        kb_fma(o->flops, S->blocks, (float *)x->out, st);
        break;
    case RF_OP_SPIN:
        kb_spin((double)o->us, st);
        break;
    case RF_OP_GEMM: {
        /* C (m x n) = A (m x k) B (k x n), BF16 in and out, FP32 accumulate, as kbench's gemm suite */
        float alpha = 1.0f, beta = 0.0f;
        int m = (int)o->m, n = (int)o->n, k = (int)o->k;
        if (cublasSetStream(S->blas, st) != CUBLAS_STATUS_SUCCESS ||
            cublasGemmEx(S->blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, x->ga, CUDA_R_16BF, m, x->gb,
                         CUDA_R_16BF, k, &beta, x->out, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            kb_die("cublasGemmEx failed", __FILE__, __LINE__);
        break;
    }
    default:
        break;
    }
}

void rp_sess_sync(rp_sess_t *S)
{
    for (int k = 0; k < RF_MAX_STREAMS; k++)
        if (S->used & (1u << k))
            CK(cudaStreamSynchronize(S->st[k]));
    S->used = 0;
}

void rp_sess_issue(rp_sess_t *S, uint32_t i)
{
    rp_op_t *x = &S->ops[i];
    const rf_op_t *o = x->o;
    if (o->kind == RF_OP_SYNC) {
        rp_sess_sync(S);
        return;
    }
    if (o->kind == RF_OP_HOST) {
        rp_spin_host_us(o->us);
        return;
    }
    cudaStream_t st = S->st[o->stream];
    for (uint32_t k = 0; k < o->n_after; k++)
        if (S->ops[o->after[k]].done)    /* none for sync and host ops: done on the host already */
            CK(cudaStreamWaitEvent(st, S->ops[o->after[k]].done, 0));
    S->used |= 1u << o->stream;
    launch(S, x, st);
    if (x->done)
        CK(cudaEventRecord(x->done, st));
}

double rp_sess_step(rp_sess_t *S)
{
    int64_t t0 = now_ns();
    for (uint32_t i = 0; i < S->s->n_ops; i++)
        rp_sess_issue(S, i);
    rp_sess_sync(S);
    return (now_ns() - t0) * 1e-3;
}

/* ---- checks ---------------------------------------------------------------------------------- */

static int check_fail(const rp_sess_t *S, uint32_t i, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sess_fail(S, "op %u (%s): check failed: %s", i, rf_kind_name(S->s->ops[i].kind), msg);
}

/* Runs op x alone on its stream and waits for it. */
static void run_alone(rp_sess_t *S, rp_op_t *x)
{
    cudaStream_t st = S->st[x->o->stream];
    launch(S, x, st);
    CK(cudaStreamSynchronize(st));
}

/* Region offset of piece q of a transfer. */
static uint64_t src_off(const rp_op_t *x, uint64_t q)
{
    return x->o->kind == RF_OP_H2D2D ? q * rf_pitch(x->o) : x->hoff[q];
}

/* Pseudo-random 8-byte words from seed into p[0..bytes) (bytes a multiple of 8). */
static void fill_pattern(uint8_t *p, uint64_t bytes, uint64_t seed)
{
    uint64_t *q = (uint64_t *)p;
    for (uint64_t k = 0; k < bytes / 8; k++) {
        uint64_t z = seed + (k + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        q[k] = z ^ (z >> 31);
    }
}

/* Whether device piece dq of op i holds the host bytes at region offset off; tmp holds B bytes. */
static int same_piece(rp_sess_t *S, uint32_t i, uint64_t dq, uint64_t off, uint8_t *tmp)
{
    rp_op_t *x = &S->ops[i];
    uint64_t B = x->o->piece_bytes;
    CK(cudaMemcpy(tmp, x->dev + dq * B, B, cudaMemcpyDeviceToHost));
    if (memcmp(tmp, S->region + off, B) == 0)
        return 0;
    return check_fail(S, i, "device piece %llu differs from the host's %llu bytes at region offset %llu",
                      (unsigned long long)dq, (unsigned long long)B, (unsigned long long)off);
}

/* h2d, h2d2d, h2dbatch, gather: the first and last pieces' slots get fresh host bytes, their device
 * pieces zeros; after the op they must be equal. */
static int check_to_device(rp_sess_t *S, uint32_t i, uint8_t *tmp)
{
    rp_op_t *x = &S->ops[i];
    uint64_t B = x->o->piece_bytes, q[2] = {0, x->o->pieces - 1};
    cudaStream_t st = S->st[x->o->stream];
    for (int k = 0; k < 2; k++) {
        fill_pattern(S->region + src_off(x, q[k]), B, ((uint64_t)S->id << 40) ^ ((uint64_t)i << 20) ^ (uint64_t)k);
        CK(cudaMemsetAsync(x->dev + q[k] * B, 0, B, st));
    }
    run_alone(S, x);
    for (int k = 0; k < 2; k++)
        if (same_piece(S, i, q[k], src_off(x, q[k]), tmp))
            return -1;
    return 0;
}

/* d2h: the first and last pieces' host slots get zeros; after the op each slot holds the device
 * piece written to it last (pieces may share a slot: the last of them, in issue order). */
static int check_to_host(rp_sess_t *S, uint32_t i, uint8_t *tmp)
{
    rp_op_t *x = &S->ops[i];
    uint64_t B = x->o->piece_bytes, last = x->o->pieces - 1, q0 = 0;
    for (uint64_t q = 1; q <= last; q++)
        if (x->hoff[q] == x->hoff[0])
            q0 = q;
    memset(S->region + x->hoff[0], 0, B);
    memset(S->region + x->hoff[last], 0, B);
    run_alone(S, x);
    if (same_piece(S, i, q0, x->hoff[0], tmp) || same_piece(S, i, last, x->hoff[last], tmp))
        return -1;
    return 0;
}

static int check_hbm(rp_sess_t *S, uint32_t i)
{
    rp_op_t *x = &S->ops[i];
    run_alone(S, x);
    unsigned long long *part = (unsigned long long *)malloc(S->blocks * sizeof *part), sum = 0;
    CK(cudaMemcpy(part, x->out, S->blocks * sizeof *part, cudaMemcpyDeviceToHost));
    for (int b = 0; b < S->blocks; b++)
        sum += part[b];
    free(part);
    unsigned long long want = kb_hbm_reduce_expect(x->o->bytes, RP_HBM_FILL);
    return sum == want ? 0 : check_fail(S, i, "sum of the buffer's words %llu, expected %llu", sum, want);
}

static int check_compute(rp_sess_t *S, uint32_t i)
{
    rp_op_t *x = &S->ops[i];
    run_alone(S, x);
    float *part = (float *)malloc(S->blocks * sizeof *part);
    CK(cudaMemcpy(part, x->out, S->blocks * sizeof *part, cudaMemcpyDeviceToHost));
    int rc = 0;
    for (int b = 0; b < S->blocks && rc == 0; b++) {
        double want = kb_fma_expect(x->o->flops, S->blocks, b);
        if (!(fabs(part[b] - want) <= RP_FMA_TOL * want))
            rc = check_fail(S, i, "block %d's sum %.7g, expected %.7g", b, (double)part[b], want);
    }
    free(part);
    return rc;
}

/* The BF16 bits of k, rounded to nearest even from FP32 (exact: k ≤ 65536 < 2^24). */
static uint16_t bf16_of(uint64_t k)
{
    float f = (float)k;
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

/* gemm: inputs all 1.0, so every element of C is k (in BF16); the first and last are read back. */
static int check_gemm(rp_sess_t *S, uint32_t i)
{
    rp_op_t *x = &S->ops[i];
    const rf_op_t *o = x->o;
    CK(cudaMemsetAsync(x->out, 0, o->m * o->n * 2, S->st[o->stream]));
    run_alone(S, x);
    uint16_t c[2], want = bf16_of(o->k);
    CK(cudaMemcpy(&c[0], x->out, 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&c[1], (uint16_t *)x->out + (o->m * o->n - 1), 2, cudaMemcpyDeviceToHost));
    for (int q = 0; q < 2; q++)
        if (c[q] != want)
            return check_fail(S, i, "C's %s element has BF16 bits 0x%04x, expected 0x%04x (k = %llu)",
                              q ? "last" : "first", c[q], want, (unsigned long long)o->k);
    return 0;
}

int rp_sess_check(rp_sess_t *S)
{
    uint64_t max_b = 0;
    for (uint32_t i = 0; i < S->s->n_ops; i++)
        if (rf_kind_is_transfer(S->s->ops[i].kind) && S->s->ops[i].piece_bytes > max_b)
            max_b = S->s->ops[i].piece_bytes;
    uint8_t *tmp = (uint8_t *)malloc(max_b ? max_b : 1);
    if (!tmp)
        return sess_fail(S, "checks: out of host memory");
    int rc = 0;
    for (uint32_t i = 0; i < S->s->n_ops && rc == 0; i++) {
        switch (S->s->ops[i].kind) {
        case RF_OP_H2D:
        case RF_OP_H2D2D:
        case RF_OP_H2DBATCH:
        case RF_OP_GATHER:
            rc = check_to_device(S, i, tmp);
            break;
        case RF_OP_D2H:
            rc = check_to_host(S, i, tmp);
            break;
        case RF_OP_HBM:
            rc = check_hbm(S, i);
            break;
        case RF_OP_COMPUTE:
            rc = check_compute(S, i);
            break;
        case RF_OP_GEMM:
            rc = check_gemm(S, i);
            break;
        default:
            break;
        }
    }
    free(tmp);
    return rc;
}
