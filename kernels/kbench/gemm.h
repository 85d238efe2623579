/* gemm.h: the dense work of a layer through cuBLAS (see gemm.cu). */
#ifndef KB_GEMM_H
#define KB_GEMM_H

#include <cuda_runtime.h>
#include "kb.h"
#include "ref/kref.h"

enum { KB_GEMM_QKV, KB_GEMM_O, KB_GEMM_UP, KB_GEMM_DOWN, KB_GEMM_LM, KB_GEMM_N };

typedef struct kb_gemm kb_gemm_t;

/* Weights of one layer and the LM head of model m (random bf16 in HBM) and
 * activations for up to max_batch tokens. Fatal on allocation failure. */
kb_gemm_t *kb_gemm_new(const kb_model_t *m, int max_batch);
/* kb_gemm_new, with the LM head's weights only when lm_head (a decode's other layers have none). */
kb_gemm_t *kb_gemm_new_opt(const kb_model_t *m, int max_batch, int lm_head);
/* w's weights (shared, not copied; w must outlive it) with activations and a cuBLAS handle of its
 * own, for a second host thread: another session's view of the same layer. */
kb_gemm_t *kb_gemm_share(const kb_gemm_t *w, int max_batch);
/* Frees g, and its weights unless shared from another (kb_gemm_share). */
void kb_gemm_free(kb_gemm_t *g);
/* The variant name of GEMM which (qkv, o, mlp_up, mlp_down, lm_head). */
const char *kb_gemm_name(int which);
/* Enqueue GEMM which at batch (<= max_batch) on s. */
void kb_gemm_run(kb_gemm_t *g, int which, int batch, cudaStream_t s);
/* The four GEMMs of one layer (qkv, o, mlp_up, mlp_down). */
void kb_gemm_layer(kb_gemm_t *g, int batch, cudaStream_t s);
/* Fewest bytes moved and flops of GEMM which at batch. */
double kb_gemm_bytes(const kb_gemm_t *g, int which, int batch);
double kb_gemm_flops(const kb_gemm_t *g, int which, int batch);

#endif
