#include "models/llm.h"
#include "common/str.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const llm_dtype_names[] = {"bf16", "fp8", NULL};

double llm_dtype_bytes(llm_dtype_t t) { return t == LLM_FP8 ? 1.0 : 2.0; }

struct llmcat {
    cfg_doc_t *doc;
};

typedef struct llm_bind {
    const char *origin;
    int64_t layers, q_heads, kv_heads, head_dim, hidden, ffn, vocab;
    bool tied, qk_norm, klt;
} llm_bind_t;

static const cfg_param_t llm_params[] = {
    {"origin", CFG_T_STRING, offsetof(llm_bind_t, origin), NULL, 1, 0, NULL, "where the shape comes from"},
    {"layers", CFG_T_INT, offsetof(llm_bind_t, layers), NULL, 1, 1024, NULL, "decoder layers"},
    {"q_heads", CFG_T_INT, offsetof(llm_bind_t, q_heads), NULL, 1, 1024, NULL, "query heads"},
    {"kv_heads", CFG_T_INT, offsetof(llm_bind_t, kv_heads), NULL, 1, 1024, NULL, "KV heads"},
    {"head_dim", CFG_T_INT, offsetof(llm_bind_t, head_dim), NULL, 8, 1024, NULL, "head dimension"},
    {"hidden", CFG_T_INT, offsetof(llm_bind_t, hidden), NULL, 1, 1 << 20, NULL, "hidden size"},
    {"ffn", CFG_T_INT, offsetof(llm_bind_t, ffn), NULL, 1, 1 << 22, NULL, "MLP intermediate size"},
    {"vocab", CFG_T_INT, offsetof(llm_bind_t, vocab), NULL, 1, 1 << 24, NULL, "vocabulary size"},
    {"tied_embeddings", CFG_T_BOOL, offsetof(llm_bind_t, tied), NULL, 1, 0, NULL, "LM head shares the embeddings"},
    {"qk_norm", CFG_T_BOOL, offsetof(llm_bind_t, qk_norm), NULL, 1, 0, NULL, "RMS norm on q and k"},
    {"klt", CFG_T_BOOL, offsetof(llm_bind_t, klt), NULL, 1, 0, NULL, "keys KLT-rotated before planes"},
};
#define N_LLM_PARAMS (sizeof llm_params / sizeof llm_params[0])

static int bind_one(const cfg_node_t *node, const char *name, llm_t *out, err_t *e)
{
    llm_bind_t b;
    int rc = cfg_bind(node, llm_params, N_LLM_PARAMS, &b, e);
    if (rc) return rc;
    if (b.q_heads % b.kv_heads)
        return cfg_error(e, ERR_INVAL, cfg_get(node, "kv_heads"), "q_heads (%lld) must be a multiple of kv_heads (%lld)",
                         (long long)b.q_heads, (long long)b.kv_heads);
    if (!out) return ERR_OK;
    memset(out, 0, sizeof *out);
    out->name = str_dup(name);
    out->origin = str_dup(b.origin);
    if (!out->name || !out->origin) {
        llm_free(out);
        return err_set(e, ERR_NOMEM, "llm: out of memory");
    }
    out->layers = (int)b.layers;
    out->q_heads = (int)b.q_heads;
    out->kv_heads = (int)b.kv_heads;
    out->head_dim = (int)b.head_dim;
    out->hidden = (int)b.hidden;
    out->ffn = (int)b.ffn;
    out->vocab = (int)b.vocab;
    out->tied_embeddings = b.tied;
    out->qk_norm = b.qk_norm;
    out->klt = b.klt;
    return ERR_OK;
}

static int check_doc(cfg_doc_t *doc, err_t *e)
{
    const cfg_node_t *root = cfg_root(doc);
    if (cfg_kind(root) != CFG_MAP) return cfg_error(e, ERR_INVAL, root, "expected a map of LLM shapes");
    for (size_t i = 0; i < cfg_size(root); i++) {
        int rc = bind_one(cfg_at(root, i), cfg_key_at(root, i), NULL, e);
        if (rc) return rc;
    }
    return ERR_OK;
}

static int finish_load(cfg_doc_t *doc, int rc, llmcat_t **out, err_t *e)
{
    if (!rc) rc = check_doc(doc, e);
    if (!rc && !(*out = calloc(1, sizeof **out))) rc = err_set(e, ERR_NOMEM, "llm: out of memory");
    if (rc) {
        cfg_free(doc);
        *out = NULL;
        return rc;
    }
    (*out)->doc = doc;
    return ERR_OK;
}

int llmcat_load(const char *path, llmcat_t **out, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_file(path, &doc, e);
    return finish_load(doc, rc, out, e);
}

int llmcat_load_string(const char *name, const char *text, llmcat_t **out, err_t *e)
{
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_string(name, text, strlen(text), &doc, e);
    return finish_load(doc, rc, out, e);
}

void llmcat_free(llmcat_t *cat)
{
    if (!cat) return;
    cfg_free(cat->doc);
    free(cat);
}

size_t llmcat_count(const llmcat_t *cat) { return cfg_size(cfg_root(cat->doc)); }

const char *llmcat_name(const llmcat_t *cat, size_t i) { return cfg_key_at(cfg_root(cat->doc), i); }

int llm_get(const llmcat_t *cat, const char *name, const cfg_node_t *overrides, llm_t *out, err_t *e)
{
    const cfg_node_t *node = cfg_get(cfg_root(cat->doc), name);
    if (!node) {
        char list[1024] = "";
        for (size_t i = 0; i < llmcat_count(cat); i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", llmcat_name(cat, i));
        return err_set(e, ERR_NOTFOUND, "no LLM shape '%s' (known: %s)", name, list);
    }
    if (!overrides) return bind_one(node, name, out, e);
    cfg_doc_t *merged = NULL;
    int rc = cfg_merge(node, overrides, true, &merged, e);
    if (!rc) rc = bind_one(cfg_root(merged), name, out, e);
    cfg_free(merged);
    return rc;
}

void llm_free(llm_t *m)
{
    if (!m) return;
    free(m->name);
    free(m->origin);
    m->name = m->origin = NULL;
}

int llm_group(const llm_t *m) { return m->q_heads / m->kv_heads; }

double llm_attn_params(const llm_t *m)
{
    double qo = 2.0 * m->hidden * (double)m->q_heads * m->head_dim;
    double kv = 2.0 * m->hidden * (double)m->kv_heads * m->head_dim;
    return qo + kv;
}

double llm_mlp_params(const llm_t *m) { return 3.0 * m->hidden * (double)m->ffn; }

double llm_head_params(const llm_t *m) { return (double)m->vocab * m->hidden; }

double llm_weight_bytes(const llm_t *m, llm_dtype_t t)
{
    double layers = m->layers * (llm_attn_params(m) + llm_mlp_params(m));
    double emb = llm_head_params(m) * (m->tied_embeddings ? 1.0 : 2.0);
    return (layers + emb) * llm_dtype_bytes(t);
}

double llm_kv_bytes_per_token(const llm_t *m, llm_dtype_t t)
{
    return 2.0 * m->layers * m->kv_heads * (double)m->head_dim * llm_dtype_bytes(t);
}
