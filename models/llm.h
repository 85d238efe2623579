/* llm — LLM shapes (models/catalog/llms.yaml) and the sizes derived from them.
 *
 * A shape is data: layers, query and KV heads, head dim, hidden and FFN sizes, vocabulary, whether
 * the embeddings are tied, QK-norm, and whether keys are KLT-rotated before bit planes are built.
 * Weight and K/V sizes are computed from the shape for a given element type. */
#ifndef ODSIM_MODELS_LLM_H
#define ODSIM_MODELS_LLM_H

#include <stdbool.h>
#include "common/cfg.h"
#include "common/err.h"

/* Element types of weights and K/V. */
typedef enum { LLM_BF16 = 0, LLM_FP8 = 1 } llm_dtype_t;
extern const char *const llm_dtype_names[];  /* "bf16", "fp8", NULL */
/* Bytes per element of a dtype (bf16 2, fp8 1). */
double llm_dtype_bytes(llm_dtype_t t);

typedef struct llm {
    char *name;
    char *origin;
    int layers, q_heads, kv_heads, head_dim, hidden, ffn, vocab;
    bool tied_embeddings, qk_norm, klt;
} llm_t;

typedef struct llmcat llmcat_t;

/* Loads an LLM catalog file (map of name → shape). Unknown, duplicate or missing keys and values out
 * of range are errors naming file:line:col and key (ERR_INVAL, ERR_RANGE, ERR_PARSE, ERR_IO). */
int llmcat_load(const char *path, llmcat_t **out, err_t *e);
/* As llmcat_load, from text; `name` stands for the file name in messages. */
int llmcat_load_string(const char *name, const char *text, llmcat_t **out, err_t *e);
void llmcat_free(llmcat_t *cat);
size_t llmcat_count(const llmcat_t *cat);
const char *llmcat_name(const llmcat_t *cat, size_t i);

/* Copies shape `name` into *out (free with llm_free), with `overrides` (a map of the same keys, may be
 * NULL) laid over it. Errors: ERR_NOTFOUND (listing the known names), ERR_INVAL/ERR_RANGE. */
int llm_get(const llmcat_t *cat, const char *name, const cfg_node_t *overrides, llm_t *out, err_t *e);
void llm_free(llm_t *m);

/* Query heads per KV head (G). */
int llm_group(const llm_t *m);
/* Parameters of one layer's projections (q, k, v, o) and of its MLP (gate, up, down). */
double llm_attn_params(const llm_t *m);
double llm_mlp_params(const llm_t *m);
/* Parameters of the LM head (vocab × hidden). */
double llm_head_params(const llm_t *m);
/* Bytes of all weights resident in HBM at dtype (layers, embeddings, LM head unless tied). */
double llm_weight_bytes(const llm_t *m, llm_dtype_t t);
/* K+V bytes per token over all layers at K/V dtype t (Qwen3-8B bf16: 147456). */
double llm_kv_bytes_per_token(const llm_t *m, llm_dtype_t t);

#endif
