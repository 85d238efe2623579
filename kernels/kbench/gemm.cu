/* gemm.cu: a layer's projections and MLP, and the LM head, through cuBLAS
 * (bf16 in and out, fp32 accumulation), as a serving stack runs them.
 * Two numbers per GEMM of batch b: bytes = 2 (N K + b K + b N), flops =
 * 2 b N K; weight-read-bound for small b, matrix-unit-bound for large b.
 */
#include <string.h>
#include <cublas_v2.h>
#include "kb.h"
#include "gemm.h"

struct kb_gemm {
    cublasHandle_t h;
    int n[KB_GEMM_N], k[KB_GEMM_N];
    uint16_t *w[KB_GEMM_N];
    uint16_t *x, *y;
    int max_batch;
    int owns;                  /* the weights are this object's (not another's, shared) */
};

static const char *NAMES[KB_GEMM_N] = {"qkv", "o", "mlp_up", "mlp_down", "lm_head"};

const char *kb_gemm_name(int which) { return NAMES[which]; }

__global__ void bf16_normal_kernel(uint16_t *p, size_t n, uint64_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = kref_f32_to_bf16(scale * kref_normal(seed, i));
}

static uint16_t *bf16_buffer(size_t n, uint64_t seed, float scale)
{
    uint16_t *p;
    CK(cudaMalloc(&p, n * 2));
    bf16_normal_kernel<<<4 * kb_sm_count(), 256>>>(p, n, seed, scale);
    CKL();
    return p;
}

kb_gemm_t *kb_gemm_new(const kb_model_t *m, int max_batch)
{
    return kb_gemm_new_opt(m, max_batch, 1);
}

/* The activations, the output and the cuBLAS handle of g for up to max_batch tokens. */
static void gemm_buffers(kb_gemm_t *g, int max_batch)
{
    size_t maxk = 0, maxn = 0;
    for (int i = 0; i < KB_GEMM_N; i++) {
        maxk = (size_t)g->k[i] > maxk ? g->k[i] : maxk;
        maxn = (size_t)g->n[i] > maxn ? g->n[i] : maxn;
    }
    g->max_batch = max_batch;
    g->x = bf16_buffer(maxk * max_batch, 310, 1.0f);
    CK(cudaMalloc(&g->y, maxn * max_batch * 2));
    if (cublasCreate(&g->h) != CUBLAS_STATUS_SUCCESS)
        kb_die("cublasCreate failed", __FILE__, __LINE__);
    CK(cudaDeviceSynchronize());
}

kb_gemm_t *kb_gemm_share(const kb_gemm_t *w, int max_batch)
{
    kb_gemm_t *g = (kb_gemm_t *)calloc(1, sizeof *g);
    memcpy(g->n, w->n, sizeof g->n);
    memcpy(g->k, w->k, sizeof g->k);
    memcpy(g->w, w->w, sizeof g->w);
    gemm_buffers(g, max_batch);
    return g;
}

kb_gemm_t *kb_gemm_new_opt(const kb_model_t *m, int max_batch, int lm_head)
{
    kb_gemm_t *g = (kb_gemm_t *)calloc(1, sizeof *g);
    int hd = 128;
    g->n[KB_GEMM_QKV] = (m->q_heads + 2 * m->kv_heads) * hd;
    g->k[KB_GEMM_QKV] = m->hidden;
    g->n[KB_GEMM_O] = m->hidden;
    g->k[KB_GEMM_O] = m->q_heads * hd;
    g->n[KB_GEMM_UP] = 2 * m->ffn;                 /* gate and up projections together */
    g->k[KB_GEMM_UP] = m->hidden;
    g->n[KB_GEMM_DOWN] = m->hidden;
    g->k[KB_GEMM_DOWN] = m->ffn;
    g->n[KB_GEMM_LM] = m->vocab;
    g->k[KB_GEMM_LM] = m->hidden;
    for (int i = 0; i < KB_GEMM_N; i++)
        if (i != KB_GEMM_LM || lm_head)
            g->w[i] = bf16_buffer((size_t)g->n[i] * g->k[i], 300 + i, 0.02f);
    g->owns = 1;
    gemm_buffers(g, max_batch);
    return g;
}

void kb_gemm_free(kb_gemm_t *g)
{
    for (int i = 0; i < KB_GEMM_N && g->owns; i++)
        if (g->w[i])
            CK(cudaFree(g->w[i]));
    CK(cudaFree(g->x));
    CK(cudaFree(g->y));
    cublasDestroy(g->h);
    free(g);
}

void kb_gemm_run(kb_gemm_t *g, int which, int batch, cudaStream_t s)
{
    float alpha = 1.0f, beta = 0.0f;
    int n = g->n[which], k = g->k[which];
    if (!g->w[which])
        kb_die("a GEMM built without these weights", __FILE__, __LINE__);
    cublasSetStream(g->h, s);
    cublasStatus_t st = cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, n, batch, k, &alpha, g->w[which],
                                     CUDA_R_16BF, k, g->x, CUDA_R_16BF, k, &beta, g->y, CUDA_R_16BF,
                                     n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        kb_die("cublasGemmEx failed", __FILE__, __LINE__);
}

void kb_gemm_layer(kb_gemm_t *g, int batch, cudaStream_t s)
{
    for (int i = KB_GEMM_QKV; i <= KB_GEMM_DOWN; i++)
        kb_gemm_run(g, i, batch, s);
}

double kb_gemm_bytes(const kb_gemm_t *g, int which, int batch)
{
    double n = g->n[which], k = g->k[which];
    return 2.0 * (n * k + batch * k + batch * n);
}

double kb_gemm_flops(const kb_gemm_t *g, int which, int batch)
{
    return 2.0 * batch * (double)g->n[which] * g->k[which];
}
