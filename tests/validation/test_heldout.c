/* The held-out rule: the committed file, and classification of rows. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "validation/heldout.h"

static kbrow_t mk(const char *suite, double n, double cid, const char *policy)
{
    kbrow_t r;
    memset(&r, 0, sizeof r);
    r.suite = suite;
    r.n_tokens = n;
    r.concurrent_id = cid;
    r.policy = policy;
    r.method = "fathom";
    r.op_name = "scan";
    return r;
}

Test(heldout, committed_rule_is_the_issue_rule)
{
    heldout_t *h = NULL;
    err_t e;
    cr_assert_eq(heldout_load("validation/heldout.yaml", &h, &e), 0, "%s", e.msg);
    char g[64];
    kbrow_t r = mk("link", NAN, NAN, "alone");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_FIT);
    r = mk("link", NAN, 1, "mix:h2d+d2h");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_FIT);
    r = mk("kernels", 262144, NAN, "alone");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_FIT);
    r = mk("kernels", 262144, 0, "alone");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_UNUSED, "not a single-kernel run");
    r = mk("kernels", 262145, NAN, "alone");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_assert_str_eq(g, "context");
    r = mk("step", 4096, NAN, "in_step;fetch:sm");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_assert_str_eq(g, "step_stage");
    r.op_name = "layer_step";
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_assert_str_eq(g, "step");
    r = mk("concurrency", 131072, 2, "procs:4");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_assert_str_eq(g, "concurrency:procs");
    r = mk("concurrency", 131072, NAN, "streams:16");
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_assert_str_eq(g, "concurrency:streams");
    heldout_free(h);
}

/* The rule file's hash written out here, apart from common/str.c: FNV-1a 64 with str_fnv1a's offset
 * basis 1469598103934665603 (not FNV's published 14695981039346656037). */
static uint64_t fnv1a_here(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Issue 31: the whole suite's cases split by hash of "METHOD|N_TOKENS|SESSIONS" modulo 3 (0:
 * whole_dev, else the sealed whole_model); every row of one configuration lands in one part; the
 * grid kbench measures (kernels/kbench/suite_whole.cu: every method alone at 32K-512K, all but dense
 * as 2 and 4 streams at 32K and 128K) leaves at least 10 sealed cases. */
Test(heldout, whole_split_is_the_committed_hash_rule)
{
    heldout_t *h = NULL;
    err_t e;
    cr_assert_eq(heldout_load("validation/heldout.yaml", &h, &e), 0, "%s", e.msg);
    static const char *const methods[] = {"dense", "fathom", "sparq", "pertoken136"};
    static const double ns[] = {32768, 131072, 524288};
    int sealed = 0, dev = 0;
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < 3; i++)
            for (int s = 1; s <= 4; s *= 2) {
                char key[96], g[64];
                snprintf(key, sizeof key, "%s|%.0f|%d", methods[m], ns[i], s);
                bool is_dev = fnv1a_here(key) % 3 == 0;
                for (int cid = -1; cid < s; cid++) {   /* the aggregate row, then each session's */
                    kbrow_t r = mk("whole", ns[i], cid < 0 ? NAN : cid, "streams");
                    r.method = methods[m];
                    r.op_name = "session_step";
                    r.streams = s;
                    r.procs = 1;
                    cr_assert_eq(heldout_case_key(&r), fnv1a_here(key), "%s", key);
                    heldout_class_t c = heldout_classify(h, &r, g, sizeof g);
                    cr_assert_eq(c, is_dev ? HELDOUT_HELD : HELDOUT_SEALED, "%s", key);
                    cr_assert_str_eq(g, is_dev ? "whole_dev" : "whole_model", "%s", key);
                }
                if (s > 1 && (m == 0 || ns[i] > 131072)) continue;   /* kbench runs no such configuration */
                if (is_dev) dev++;
                else sealed++;
            }
    cr_assert_geq(sealed, 10);
    cr_assert_geq(dev, 3);
    /* a step-suite row at the same context keeps its own group */
    kbrow_t r = mk("step", 524288, NAN, "fetch:sm");
    char g[64];
    r.op_name = "layer_step";
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_assert_str_eq(g, "step");
    heldout_free(h);
}

/* Issue 31: the prefill suite's cases split by hash of "METHOD|N_TOKENS|CHUNK_TOKENS|SESSIONS"
 * modulo 3 (0: prefill_dev, else the sealed prefill group), before the context rule takes the long
 * contexts; the grid kbench measures (kernels/kbench/suite_prefill.cu: exact chunks as dense and
 * sparse ones as pertoken136, 1K, 4K and 16K tokens over 32K and 128K, alone and beside one decode)
 * leaves at least 10 sealed and 3 development cases; a whole-suite row's key ignores its chunk. */
Test(heldout, prefill_split_is_the_committed_hash_rule)
{
    heldout_t *h = NULL;
    err_t e;
    cr_assert_eq(heldout_load("validation/heldout.yaml", &h, &e), 0, "%s", e.msg);
    static const char *const methods[] = {"dense", "pertoken136"};
    static const double ns[] = {32768, 131072, 524288}, chunks[] = {1024, 4096, 16384, 32768};
    int sealed = 0, dev = 0;
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < 4; c++)
                for (int s = 1; s <= 2; s++) {
                    char key[96], g[64];
                    snprintf(key, sizeof key, "%s|%.0f|%.0f|%d", methods[m], ns[i], chunks[c], s);
                    bool is_dev = fnv1a_here(key) % 3 == 0;
                    kbrow_t r = mk("prefill", ns[i], s > 1 ? 0 : NAN, "streams");
                    r.method = methods[m];
                    r.op_name = "prefill_chunk";
                    r.chunk_tokens = chunks[c];
                    r.batch = chunks[c];
                    r.streams = s;
                    r.procs = 1;
                    cr_assert_eq(heldout_case_key(&r), fnv1a_here(key), "%s", key);
                    heldout_class_t cl = heldout_classify(h, &r, g, sizeof g);
                    cr_assert_eq(cl, is_dev ? HELDOUT_HELD : HELDOUT_SEALED, "%s", key);
                    cr_assert_str_eq(g, is_dev ? "prefill_dev" : "prefill", "%s", key);
                    if (ns[i] > 131072 || chunks[c] > 16384) continue;   /* the grid measured surely */
                    if (is_dev) dev++;
                    else sealed++;
                }
    cr_assert_geq(sealed, 10);
    cr_assert_geq(dev, 3);
    kbrow_t r = mk("whole", 32768, NAN, "streams");
    r.method = "dense";
    r.chunk_tokens = 1024;
    r.streams = 1;
    cr_assert_eq(heldout_case_key(&r), fnv1a_here("dense|32768|1"));
    heldout_free(h);
}

/* Unknown keys, and key rules out of range, are errors naming the file and line. */
/* Issue 34: replay rows split by their workload's name alone (the variant): rdev- is random_dev,
 * rsealed- the sealed random, any other name unused; other suites never match a name rule. */
Test(heldout, replay_split_is_the_name_prefix_rule)
{
    heldout_t *h = NULL;
    err_t e;
    cr_assert_eq(heldout_load("validation/heldout.yaml", &h, &e), 0, "%s", e.msg);
    char g[64];
    kbrow_t r = mk("replay", NAN, 0, "streams:3");
    r.op_name = "session_step";
    r.variant = "rdev-0007";
    cr_expect_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    cr_expect_str_eq(g, "random_dev");
    r.variant = "rsealed-0101";
    cr_expect_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_SEALED);
    cr_expect_str_eq(g, "random");
    r.variant = "rdev";
    cr_expect_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_UNUSED, "a name without the prefix's dash");
    heldout_free(h);
    cr_assert_eq(heldout_load_string("t.yaml", "heldout:\n  - {group: g, name_prefix: ab}\nfit:\n  - {suite: link}\n", &h, &e),
                 0, "%s", e.msg);
    r = mk("kernels", 1, NAN, "alone");
    r.variant = "abc";
    cr_expect_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_HELD);
    r.variant = "xab";
    cr_expect_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_UNUSED);
    heldout_free(h);
}

Test(heldout, unknown_keys_are_errors)
{
    heldout_t *h = NULL;
    err_t e;
    cr_assert_neq(heldout_load_string("h.yaml", "fit:\n  - {suite: link, max_ntokens: 5}\n", &h, &e), 0);
    cr_assert(strstr(e.msg, "h.yaml:2:") && strstr(e.msg, "max_ntokens"), "%s", e.msg);
    cr_assert_neq(heldout_load_string("h.yaml", "heldout: []\n", &h, &e), 0);
    cr_assert(strstr(e.msg, "no `fit` rules"), "%s", e.msg);
    cr_assert_neq(heldout_load_string("h.yaml", "fit: [{suite: link}]\nextra: 1\n", &h, &e), 0);
    cr_assert_neq(heldout_load_string("h.yaml", "heldout:\n  - {group: a, key_mod: 3, key_rest: 3}\nfit: [{suite: link}]\n", &h, &e), 0);
    cr_assert(strstr(e.msg, "h.yaml:2:") && strstr(e.msg, "key_mod"), "%s", e.msg);
    cr_assert_neq(heldout_load_string("h.yaml", "heldout:\n  - {group: a, key_mod: 2.5}\nfit: [{suite: link}]\n", &h, &e), 0);
    /* modulus 1 takes every case; a sealed rule's rows are HELDOUT_SEALED */
    cr_assert_eq(heldout_load_string("h.yaml", "heldout:\n  - {group: a, key_mod: 1, key_rest: 0, sealed: true}\nfit: [{suite: link}]\n", &h, &e),
                 0, "%s", e.msg);
    kbrow_t r = mk("whole", 32768, NAN, "streams:1");
    char g[16];
    cr_assert_eq(heldout_classify(h, &r, g, sizeof g), HELDOUT_SEALED);
    heldout_free(h);
}
