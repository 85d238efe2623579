/* validation/trust: loading validation/trust.yaml (bad files named with line and key) and matching
 * regimes against its groups: covered, beyond a respect (said, with the groups measured along it),
 * on another box. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/validation/synth.h"
#include "validation/trust.h"

static bool calib_yes(const char *g, void *arg) { (void)g; (void)arg; return true; }

static trust_t *committed(void)
{
    trust_t *t = NULL;
    err_t e;
    cr_assert_eq(trust_load("validation/trust.yaml", &t, &e), 0, "%s", e.msg);
    return t;
}

static trust_regime_t decode(double sessions, double lo, double hi, const char *box)
{
    return (trust_regime_t){.measures = "decode_step", .mode = "streams", .sessions = sessions, .context_lo = lo, .context_hi = hi,
                            .model = "qwen3-8b", .box = box, .calibration = "models/calib/h200.yaml"};
}

static bool names(const trust_answer_t *a, const char *group)
{
    for (size_t i = 0; i < a->n_nearest; i++)
        if (!strcmp(a->nearest[i].g->name, group)) return true;
    return false;
}

Test(trust, whole_dev_covers_its_regime)
{
    trust_t *t = committed();
    trust_regime_t r = decode(4, 32768, 524288, "h200-1");
    trust_answer_t a;
    err_t e;
    cr_assert_eq(trust_match(t, &r, calib_yes, NULL, &a, &e), 0);
    cr_assert(a.covered && !strcmp(a.covered->name, "whole_dev"));
    cr_assert_eq(a.n_outside, 0);
    cr_assert(names(&a, "prefill_dev"), "a decode study's TTFT names the prefill group");
    trust_answer_free(&a);
    trust_free(t);
}

Test(trust, beyond_context_and_sessions_says_why_and_names_the_evidence)
{
    trust_t *t = committed();
    trust_regime_t r = decode(8, 786432, 1048576, "h200-1");
    trust_answer_t a;
    err_t e;
    cr_assert_eq(trust_match(t, &r, calib_yes, NULL, &a, &e), 0);
    cr_assert_null(a.covered);
    cr_assert_eq(a.n_outside, 2);
    cr_assert_str_eq(a.outside[0], "8 session(s) per GPU beyond whole_dev's 1-4");
    cr_assert_str_eq(a.outside[1], "context 768Ki-1Mi tokens beyond whole_dev's 32Ki-512Ki");
    cr_assert(names(&a, "step") && names(&a, "context") && names(&a, "concurrency:streams") && names(&a, "random_dev"));
    cr_assert(!names(&a, "concurrency:procs"), "another mode's sessions are no evidence");
    trust_answer_free(&a);
    /* another box: said first; only groups measured on that box are evidence */
    r = decode(2, 65536, 131072, "h100-1");
    cr_assert_eq(trust_match(t, &r, calib_yes, NULL, &a, &e), 0);
    cr_assert_null(a.covered);
    cr_assert_str_eq(a.outside[0], "box h100-1 is not whole_dev's measured h200-1");
    cr_assert_eq(a.n_nearest, 1);
    cr_assert_str_eq(a.nearest[0].g->box, "h100-1");
    trust_answer_free(&a);
    trust_free(t);
}

Test(trust, a_bad_file_names_line_and_key)
{
    char *dir = synth_tmpdir("trust");
    char path[4200];
    snprintf(path, sizeof path, "%s/trust.yaml", dir);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fputs("groups:\n  - {name: g, about: a, measures: op, sessions: [2, 1], box: b, calibration: c, origin: o,\n"
          "     cases: 1, median_pct: 1, max_pct: 2, command: validate x}\n", fp);
    fclose(fp);
    trust_t *t = NULL;
    err_t e;
    cr_assert_neq(trust_load(path, &t, &e), 0);
    cr_assert(strstr(e.msg, "trust.yaml:2") && strstr(e.msg, "sessions"), "%s", e.msg);
    fp = fopen(path, "w");
    fputs("groups:\n  - {name: g, about: a, measures: op, sessions: [1, 1], box: b, calibration: c, origin: o,\n"
          "     cases: 1, median_pct: 1, max_pct: 2, command: validate x, colour: red}\n", fp);
    fclose(fp);
    cr_assert_neq(trust_load(path, &t, &e), 0);
    cr_assert(strstr(e.msg, "colour"), "%s", e.msg);
    unlink(path);
    synth_rmdir(dir);
    free(dir);
}
