#include "validation/heldout.h"
#include "common/str.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomicio.h"
#include "common/cfg.h"

typedef struct ho_rule {
    char *group;          /* NULL for fit rules */
    char *suite;          /* NULL: any */
    char *op;             /* NULL: any */
    char *prefix;         /* NULL: any variant; else the variant (a replay workload's name) starts so */
    double min_n, max_n;  /* NAN: none */
    bool single_only;
    int split_by;         /* 0 none, 1 policy, 2 method, 3 op, 4 policy up to its first ':' */
    long key_mod, key_rest; /* key_mod > 0: only cases whose key hash is key_rest modulo key_mod */
    bool sealed;
} ho_rule_t;

struct heldout {
    ho_rule_t *held, *fit;
    size_t n_held, n_fit;
    unsigned long long hash;
};

typedef struct ho_node {
    const char *group, *suite, *op, *prefix;
    double min_n, max_n, key_mod, key_rest;
    bool single_only, sealed;
    int split_by;
} ho_node_t;

static const char *const split_choices[] = {"none", "policy", "method", "op", "policy_kind", NULL};

static const cfg_param_t held_params[] = {
    {"group", CFG_T_STRING, offsetof(ho_node_t, group), NULL, 1, 0, NULL, "group name in reports"},
    {"suite", CFG_T_STRING, offsetof(ho_node_t, suite), "", 1, 0, NULL, "kbench suite ('' any)"},
    {"op", CFG_T_STRING, offsetof(ho_node_t, op), "", 1, 0, NULL, "op kind ('' any)"},
    {"name_prefix", CFG_T_STRING, offsetof(ho_node_t, prefix), "", 1, 0, NULL, "variant starts with ('' any)"},
    {"min_n_tokens", CFG_T_DOUBLE, offsetof(ho_node_t, min_n), "-1", 1, 0, NULL, "n_tokens at least"},
    {"max_n_tokens", CFG_T_DOUBLE, offsetof(ho_node_t, max_n), "-1", 1, 0, NULL, "n_tokens at most"},
    {"single_only", CFG_T_BOOL, offsetof(ho_node_t, single_only), "false", 1, 0, NULL, "no concurrent_id"},
    {"split_by", CFG_T_ENUM, offsetof(ho_node_t, split_by), "none", 1, 0, split_choices, "column splitting the group"},
    {"key_mod", CFG_T_DOUBLE, offsetof(ho_node_t, key_mod), "0", 1, 0, NULL, "case-key hash modulus (0: any case)"},
    {"key_rest", CFG_T_DOUBLE, offsetof(ho_node_t, key_rest), "0", 1, 0, NULL, "case-key hash remainder taken"},
    {"sealed", CFG_T_BOOL, offsetof(ho_node_t, sealed), "false", 1, 0, NULL, "validated only on request"},
};

static const cfg_param_t fit_params[] = {
    {"suite", CFG_T_STRING, offsetof(ho_node_t, suite), "", 1, 0, NULL, "kbench suite ('' any)"},
    {"op", CFG_T_STRING, offsetof(ho_node_t, op), "", 1, 0, NULL, "op kind ('' any)"},
    {"min_n_tokens", CFG_T_DOUBLE, offsetof(ho_node_t, min_n), "-1", 1, 0, NULL, "n_tokens at least"},
    {"max_n_tokens", CFG_T_DOUBLE, offsetof(ho_node_t, max_n), "-1", 1, 0, NULL, "n_tokens at most"},
    {"single_only", CFG_T_BOOL, offsetof(ho_node_t, single_only), "false", 1, 0, NULL, "no concurrent_id"},
};

static void rules_free(ho_rule_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].group);
        free(v[i].suite);
        free(v[i].op);
        free(v[i].prefix);
    }
    free(v);
}

void heldout_free(heldout_t *h)
{
    if (!h) return;
    rules_free(h->held, h->n_held);
    rules_free(h->fit, h->n_fit);
    free(h);
}

static int load_rules(const cfg_node_t *seq, bool held, ho_rule_t **out, size_t *n_out, err_t *e)
{
    *out = NULL;
    *n_out = 0;
    if (!seq) return ERR_OK;
    if (cfg_kind(seq) != CFG_SEQ) return cfg_error(e, ERR_INVAL, seq, "expected a list of rules");
    size_t n = cfg_size(seq);
    ho_rule_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return err_set(e, ERR_NOMEM, "heldout: out of memory");
    for (size_t i = 0; i < n; i++) {
        ho_node_t hn;
        const cfg_param_t *ps = held ? held_params : fit_params;
        size_t np = held ? sizeof held_params / sizeof held_params[0] : sizeof fit_params / sizeof fit_params[0];
        int rc = cfg_bind(cfg_at(seq, i), ps, np, &hn, e);
        if (rc) {
            rules_free(v, i);
            return rc;
        }
        v[i].group = held ? str_dup(hn.group) : NULL;
        v[i].suite = *hn.suite ? str_dup(hn.suite) : NULL;
        v[i].op = *hn.op ? str_dup(hn.op) : NULL;
        v[i].prefix = held && *hn.prefix ? str_dup(hn.prefix) : NULL;
        v[i].min_n = hn.min_n >= 0 ? hn.min_n : NAN;
        v[i].max_n = hn.max_n >= 0 ? hn.max_n : NAN;
        v[i].single_only = hn.single_only;
        v[i].split_by = held ? hn.split_by : 0;
        v[i].sealed = held && hn.sealed;
        v[i].key_mod = held ? (long)hn.key_mod : 0;
        v[i].key_rest = held ? (long)hn.key_rest : 0;
        if (held && (hn.key_mod != floor(hn.key_mod) || hn.key_mod < 0 || hn.key_mod > 1e6 || hn.key_rest != floor(hn.key_rest) ||
                     hn.key_rest < 0 || (hn.key_mod > 0 && hn.key_rest >= hn.key_mod))) {
            rules_free(v, i + 1);
            return cfg_error(e, ERR_INVAL, cfg_at(seq, i), "key_mod wants a whole number in [0, 1e6] and key_rest one below it");
        }
        if ((held && !v[i].group) || (*hn.suite && !v[i].suite) || (*hn.op && !v[i].op) || (held && *hn.prefix && !v[i].prefix)) {
            rules_free(v, i + 1);
            return err_set(e, ERR_NOMEM, "heldout: out of memory");
        }
    }
    *out = v;
    *n_out = n;
    return ERR_OK;
}

int heldout_load_string(const char *name, const char *text, heldout_t **out, err_t *e)
{
    *out = NULL;
    cfg_doc_t *doc = NULL;
    int rc = cfg_parse_string(name, text, strlen(text), &doc, e);
    if (rc) return rc;
    heldout_t *h = calloc(1, sizeof *h);
    if (!h) {
        cfg_free(doc);
        return err_set(e, ERR_NOMEM, "heldout: out of memory");
    }
    const cfg_node_t *root = cfg_root(doc);
    rc = load_rules(cfg_get(root, "heldout"), true, &h->held, &h->n_held, e);
    if (!rc) rc = load_rules(cfg_get(root, "fit"), false, &h->fit, &h->n_fit, e);
    if (!rc) rc = cfg_check_consumed(root, e);
    if (!rc && !h->n_fit) rc = err_set(e, ERR_INVAL, "%s: no `fit` rules", name);
    cfg_free(doc);
    if (rc) {
        heldout_free(h);
        return rc;
    }
    uint64_t x = 1469598103934665603ULL;
    for (const char *p = text; *p; p++) {
        x ^= (unsigned char)*p;
        x *= 1099511628211ULL;
    }
    h->hash = x;
    *out = h;
    return ERR_OK;
}

int heldout_load(const char *path, heldout_t **out, err_t *e)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = atomicio_read_all(path, (size_t)1 << 20, &text, &len, e);
    if (rc) return rc;
    rc = heldout_load_string(path, text, out, e);
    free(text);
    return rc;
}

uint64_t heldout_case_key(const kbrow_t *r)
{
    double sessions = fmax(isnan(r->streams) ? 1 : r->streams, isnan(r->procs) ? 1 : r->procs);
    char key[256];
    long long n_tokens = isnan(r->n_tokens) ? -1LL : (long long)r->n_tokens;
    /* a prefill chunk's case is also its chunk size (the whole suite's chunk_tokens is its flush T,
     * the same in every case: its keys stay as they were committed) */
    int n = !strcmp(r->suite, "prefill")
                ? snprintf(key, sizeof key, "%s|%lld|%lld|%lld", r->method, n_tokens,
                           isnan(r->chunk_tokens) ? -1LL : (long long)r->chunk_tokens, (long long)sessions)
                : snprintf(key, sizeof key, "%s|%lld|%lld", r->method, n_tokens, (long long)sessions);
    return str_fnv1a(key, (size_t)(n < (int)sizeof key ? n : (int)sizeof key - 1));
}

static bool rule_matches(const ho_rule_t *r, const kbrow_t *row)
{
    if (r->suite && strcmp(r->suite, row->suite)) return false;
    if (r->op && strcmp(r->op, row->op_name)) return false;
    if (r->prefix && strncmp(r->prefix, row->variant, strlen(r->prefix))) return false;
    if (!isnan(r->min_n) && !(row->n_tokens >= r->min_n)) return false;
    if (!isnan(r->max_n) && row->n_tokens > r->max_n) return false;
    if (r->single_only && !isnan(row->concurrent_id)) return false;
    if (r->key_mod > 0 && heldout_case_key(row) % (uint64_t)r->key_mod != (uint64_t)r->key_rest) return false;
    return true;
}

heldout_class_t heldout_classify(const heldout_t *h, const kbrow_t *r, char *group, size_t group_len)
{
    for (size_t i = 0; i < h->n_held; i++) {
        const ho_rule_t *ru = &h->held[i];
        if (!rule_matches(ru, r)) continue;
        const char *by = ru->split_by == 1 || ru->split_by == 4 ? r->policy : ru->split_by == 2 ? r->method
                         : ru->split_by == 3 ? r->op_name : NULL;
        int by_len = by ? (int)(ru->split_by == 4 ? strcspn(by, ":") : strlen(by)) : 0;
        if (group_len) {
            if (by) snprintf(group, group_len, "%s:%.*s", ru->group, by_len ? by_len : 1, by_len ? by : "-");
            else snprintf(group, group_len, "%s", ru->group);
        }
        return ru->sealed ? HELDOUT_SEALED : HELDOUT_HELD;
    }
    for (size_t i = 0; i < h->n_fit; i++)
        if (rule_matches(&h->fit[i], r)) return HELDOUT_FIT;
    return HELDOUT_UNUSED;
}

unsigned long long heldout_hash(const heldout_t *h) { return h->hash; }
