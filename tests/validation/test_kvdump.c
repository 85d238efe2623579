/* Tests of the dump reader (validation/kvdump.h) on the committed sample tests/data/kvdump/ and on
 * broken copies of it, and of the synthetic keys' declared statistics (validation/kvsynth.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/npy.h"
#include "models/fathom.h"
#include "validation/kvdump.h"
#include "validation/kvsynth.h"

static const char *sample(void)
{
    static char p[512];
    const char *root = getenv("ODSIM_ROOT");
    snprintf(p, sizeof p, "%s/tests/data/kvdump", root ? root : ".");
    return p;
}

Test(kvdump, reads_the_sample)
{
    kvdump_t d;
    err_t e;
    cr_assert_eq(kvdump_open(sample(), &d, &e), 0, "%s", e.msg);
    cr_assert_eq(d.n_entries, 2);
    cr_assert(d.entries[0].layer == 0 && d.entries[1].layer == 1 && d.entries[0].head == 0);
    cr_assert(d.entries[0].has_values && !d.entries[1].has_values);
    float *k, *q, *v;
    size_t n, steps;
    int dim, group;
    cr_assert_eq(kvdump_load(&d, 0, &k, &n, &dim, &q, &steps, &group, &v, &e), 0, "%s", e.msg);
    cr_assert(n == 64 && dim == 16 && steps == 3 && group == 2 && v);
    /* channel 3 is an outlier (scale 4): its spread is well above channel 0's (scale <= 1.5) */
    double s3 = 0, s0 = 0;
    for (size_t t = 0; t < n; t++) s3 += k[t * dim + 3] * k[t * dim + 3], s0 += k[t * dim] * k[t * dim];
    cr_assert_gt(s3, 2 * s0);
    free(k), free(q), free(v);
    cr_assert_eq(kvdump_load(&d, 1, &k, &n, &dim, &q, &steps, &group, &v, &e), 0, "%s", e.msg);
    cr_assert(n == 64 && dim == 16 && steps == 1 && group == 2 && !v);
    free(k), free(q);
    kvdump_close(&d);
}

/* A copy of the sample's layer-1 files in a fresh directory, with `name` replaced by `dict` + data. */
static char *broken(const char *name, const char *dict, size_t data_bytes)
{
    static char dir[64];
    strcpy(dir, "/tmp/odsim_kvdumpXXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    const char *files[] = {"layer1_kv0_keys.npy", "layer1_kv0_queries.npy"};
    for (int i = 0; i < 2; i++) {
        char src[600], dst[600];
        snprintf(src, sizeof src, "%s/%s", sample(), files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
        cr_assert(in && out);
        char buf[8192];
        size_t m = fread(buf, 1, sizeof buf, in);
        fwrite(buf, 1, m, out);
        fclose(in);
        fclose(out);
    }
    if (name) {
        char dst[600];
        snprintf(dst, sizeof dst, "%s/%s", dir, name);
        FILE *out = fopen(dst, "wb");
        size_t hl = 118;
        char hdr[128];
        memset(hdr, ' ', sizeof hdr);
        memcpy(hdr, "\x93NUMPY\x01\x00", 8);
        hdr[8] = (char)hl;
        hdr[9] = 0;
        memcpy(hdr + 10, dict, strlen(dict));
        hdr[127] = '\n';
        fwrite(hdr, 1, sizeof hdr, out);
        for (size_t i = 0; i < data_bytes; i++) fputc(0, out);
        fclose(out);
    }
    return dir;
}

static void clean(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void load_fails(const char *name, const char *dict, size_t bytes, const char *want)
{
    char *dir = broken(name, dict, bytes);
    kvdump_t d;
    err_t e;
    cr_assert_eq(kvdump_open(dir, &d, &e), 0, "%s", e.msg);
    float *k, *q, *v;
    size_t n, steps;
    int dim, group;
    cr_assert_neq(kvdump_load(&d, 0, &k, &n, &dim, &q, &steps, &group, &v, &e), 0, "loaded; wanted '%s'", want);
    cr_assert(strstr(e.msg, name) && strstr(e.msg, want), "message '%s' lacks %s or '%s'", e.msg, name, want);
    kvdump_close(&d);
    clean(dir);
}

Test(kvdump, rejects_bad_files_naming_them)
{
    const char *kf = "layer1_kv0_keys.npy", *qf = "layer1_kv0_queries.npy";
    load_fails(kf, "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 16), }", 64 * 16 * 4 - 3, "truncated");
    load_fails(kf, "{'descr': '<f8', 'fortran_order': False, 'shape': (64, 16), }", 64 * 16 * 8, "dtype '<f8'");
    load_fails(kf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 64, 16), }", 2 * 64 * 16 * 4,
               "must be (n, d)");
    load_fails(kf, "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 256), }", 64 * 256 * 4,
               "outside 1..128");
    load_fails(qf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 8), }", 2 * 8 * 4,
               "head dimension 8, the keys have 16");
    load_fails(qf, "{'descr': '<f4', 'fortran_order': False, 'shape': (32,), }", 32 * 4, "(G, d) or (m, G, d)");
}

Test(kvdump, keys_without_queries)
{
    char *dir = broken(NULL, NULL, 0);
    char p[600];
    snprintf(p, sizeof p, "%s/layer1_kv0_queries.npy", dir);
    remove(p);
    kvdump_t d;
    err_t e;
    cr_assert_eq(kvdump_open(dir, &d, &e), ERR_INVAL);
    cr_assert(strstr(e.msg, "layer1_kv0_queries.npy is missing"), "%s", e.msg);
    snprintf(p, sizeof p, "%s/layer1_kv0_keys.npy", dir);
    remove(p);
    cr_assert_eq(kvdump_open(dir, &d, &e), ERR_NOTFOUND);
    clean(dir);
}

/* ---- synthetic keys ---------------------------------------------------------------------------- */

static kvsynth_params_t params(const char *sets)
{
    cfg_doc_t *doc;
    err_t e;
    cr_assert_eq(cfg_parse_string("t", sets, strlen(sets), &doc, &e), 0, "%s", e.msg);
    kvsynth_params_t p;
    cr_assert_eq(kvsynth_bind(cfg_root(doc), &p, &e), 0, "%s", e.msg);
    cfg_free(doc);
    return p;
}

Test(kvsynth, deterministic_per_layer_and_head)
{
    kvsynth_params_t p = params("{tokens: 64, layers: 2, kv_heads: 2, steps: 2}");
    size_t kn = 64 * 128, qn = 2 * 4 * 128;
    float *a = malloc(4 * (2 * kn + qn)), *b = malloc(4 * (2 * kn + qn));
    err_t e;
    cr_assert_eq(kvsynth_head(&p, 1, 1, a, a + kn, a + kn + qn, &e), 0);
    cr_assert_eq(kvsynth_head(&p, 0, 0, b, b + kn, b + kn + qn, &e), 0);
    cr_assert_neq(memcmp(a, b, 4 * (2 * kn + qn)), 0);
    cr_assert_eq(kvsynth_head(&p, 1, 1, b, b + kn, b + kn + qn, &e), 0);
    cr_assert_eq(memcmp(a, b, 4 * (2 * kn + qn)), 0);
    cr_assert_eq(kvsynth_head(&p, 2, 0, b, b + kn, b + kn + qn, &e), ERR_INVAL);
    free(a), free(b);
}

Test(kvsynth, bad_parameters)
{
    cfg_doc_t *doc;
    err_t e;
    kvsynth_params_t p;
    const char *bad[] = {"{head_dim: 63}", "{tokens: 3}", "{group_corr: 2}", "{ropebase: 1}"};
    const char *want[] = {"odd", "tokens", "group_corr", "ropebase"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(cfg_parse_string("t.yaml", bad[i], strlen(bad[i]), &doc, &e), 0);
        cr_assert_neq(kvsynth_bind(cfg_root(doc), &p, &e), 0);
        cr_assert(strstr(e.msg, want[i]), "%s", e.msg);
        cfg_free(doc);
    }
}

/* Undoing RoPE (pair j, j + 64 rotated back by t * base^(-2j/d)) gives keys whose channel variances
 * are the planner's profile (layer_log_sd 0); the logits' spread is score_sd; the group's query
 * heads correlate by group_corr. */
Test(kvsynth, declared_statistics)
{
    kvsynth_params_t p = params("{tokens: 8192, layer_log_sd: 0, steps: 64, group: 4, group_corr: 0.6}");
    int d = 128, G = 4;
    size_t n = 8192, S = 64;
    float *k = malloc(4 * n * d), *v = malloc(4 * n * d), *q = malloc(4 * S * G * d);
    err_t e;
    cr_assert_eq(kvsynth_head(&p, 0, 0, k, q, v, &e), 0, "%s", e.msg);
    double s2[128], var[128] = {0};
    fathom_profile_default(d, s2, &e);
    for (size_t t = 0; t < n; t++)
        for (int j = 0; j < d / 2; j++) {
            double a = -(double)t * pow(1e6, -2.0 * j / d), c = cos(a), s = sin(a);
            double x0 = k[t * d + j], x1 = k[t * d + j + d / 2];
            double y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
            var[j] += y0 * y0 / n;
            var[j + d / 2] += y1 * y1 / n;
        }
    for (int j = 0; j < d; j++)   /* se of a variance estimate: sqrt(2/n) relative */
        cr_assert_float_eq(var[j] / s2[j], 1.0, 5 * sqrt(2.0 / n), "channel %d: %g vs %g", j, var[j], s2[j]);
    double sd_sum = 0, cross = 0, self = 0;
    for (size_t r = 0; r < S * G; r++) {
        double m = 0, m2 = 0;
        for (size_t t = 0; t < n; t++) {
            double l = 0;
            for (int j = 0; j < d; j++) l += (double)q[r * d + j] * k[t * d + j];
            l /= sqrt((double)d);
            m += l / n;
            m2 += l * l / n;
        }
        sd_sum += sqrt(m2 - m * m) / (S * G);
    }
    cr_assert_float_eq(sd_sum, p.score_sd, 0.1 * p.score_sd, "logit sd %g, declared %g", sd_sum, p.score_sd);
    for (size_t s = 0; s < S; s++)   /* heads 0 and 1 of each step; rotation keeps dot products */
        for (int j = 0; j < d; j++) {
            cross += (double)q[(s * G) * d + j] * q[(s * G + 1) * d + j];
            self += (double)q[(s * G) * d + j] * q[(s * G) * d + j];
        }
    cr_assert_float_eq(cross / self, 0.6, 0.08, "group correlation %g", cross / self);
    free(k), free(v), free(q);
}

/* token_corr: neighbouring tokens' un-rotated keys correlate by it, each channel keeping its variance. */
Test(kvsynth, token_locality)
{
    kvsynth_params_t p = params("{tokens: 4096, layer_log_sd: 0, steps: 1, token_corr: 0.8, head_dim: 8, rope_base: 1}");
    int d = 8;
    size_t n = 4096;
    float *k = malloc(4 * n * d), *v = malloc(4 * n * d), q[4 * 8];
    err_t e;
    cr_assert_eq(kvsynth_head(&p, 0, 0, k, q, v, &e), 0, "%s", e.msg);
    double s2[8];
    fathom_profile_default(d, s2, &e);
    for (int j = 0; j < d / 2; j++) {   /* rope_base 1: every pair turns by t radians; undo it */
        double var = 0, lag = 0, prev = 0;
        for (size_t t = 0; t < n; t++) {
            double y = k[t * d + j] * cos((double)t) + k[t * d + j + d / 2] * sin((double)t);
            var += y * y / n;
            lag += t ? y * prev / (n - 1) : 0;
            prev = y;
        }
        cr_assert_float_eq(var / s2[j], 1.0, 0.15, "channel %d variance %g vs %g", j, var, s2[j]);
        cr_assert_float_eq(lag / var, 0.8, 0.05, "channel %d lag-1 correlation %g", j, lag / var);
    }
    free(k), free(v);
}
