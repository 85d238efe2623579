/* The held-out rule: the committed file, and classification of rows. */
#include <criterion/criterion.h>
#include <math.h>
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

Test(heldout, unknown_keys_are_errors)
{
    heldout_t *h = NULL;
    err_t e;
    cr_assert_neq(heldout_load_string("h.yaml", "fit:\n  - {suite: link, max_ntokens: 5}\n", &h, &e), 0);
    cr_assert(strstr(e.msg, "h.yaml:2:") && strstr(e.msg, "max_ntokens"), "%s", e.msg);
    cr_assert_neq(heldout_load_string("h.yaml", "heldout: []\n", &h, &e), 0);
    cr_assert(strstr(e.msg, "no `fit` rules"), "%s", e.msg);
    cr_assert_neq(heldout_load_string("h.yaml", "fit: [{suite: link}]\nextra: 1\n", &h, &e), 0);
}
