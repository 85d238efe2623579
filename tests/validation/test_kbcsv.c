/* The kbench CSV reader: good files, and every bad input named by file and line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/ref/kref.h"
#include "tests/validation/synth.h"
#include "validation/kbcsv.h"

static const char head[] =
    "# suite: link\n# device: NVIDIA H200 (sm_90, 132 SMs)\n# driver: 580.65\n"
    "suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,allocator,"
    "streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,t_p90_us,t_p99_us,per_s,gbps,"
    "method,t_mean_us\n";

static char *write_file(const char *dir, const char *name, const char *text)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    FILE *fp = fopen(p, "w");
    cr_assert_not_null(fp);
    fputs(text, fp);
    fclose(fp);
    return p;
}

/* Loads text as DIR/h200/x.csv; returns the status and the message. */
static int load_text(const char *text, char *msg, size_t msg_len, kbset_t **out)
{
    char *dir = synth_tmpdir("h200");
    cr_assert_not_null(dir);
    char *path = write_file(dir, "x.csv", text);
    err_t e;
    err_clear(&e);
    kbset_t *s = NULL;
    int rc = kbset_load_dir(dir, NULL, &s, &e);
    snprintf(msg, msg_len, "%s", e.msg);
    if (out) *out = s;
    else kbset_free(s);
    free(path);
    synth_rmdir(dir);
    free(dir);
    return rc;
}

static void expect_error(const char *text, const char *want1, const char *want2)
{
    char msg[ERR_MSG_MAX];
    kbset_t *s = NULL;
    int rc = load_text(text, msg, sizeof msg, &s);
    cr_assert_neq(rc, 0, "accepted a bad CSV (wanted '%s')", want1);
    cr_assert_null(s, "a failed load returned a set");
    cr_assert(strstr(msg, "x.csv:"), "message '%s' does not name the file", msg);
    cr_assert(strstr(msg, want1), "message '%s' lacks '%s'", msg, want1);
    if (want2) cr_assert(strstr(msg, want2), "message '%s' lacks '%s'", msg, want2);
}

static char *with_row(const char *row)
{
    size_t n = strlen(head) + strlen(row) + 1;
    char *t = malloc(n);
    snprintf(t, n, "%s%s", head, row);
    return t;
}

Test(kbcsv, reads_rows_meta_and_empty_cells)
{
    char *t = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.6,5.5,5.8,6.1,178571,0.73,,5.7\n"
                       "kernels,scan,,131072,8,56,,,,,,,,,,alone,host,,1000000,20,30.5,30,31,32,,,fathom,30.6\n");
    char msg[ERR_MSG_MAX];
    kbset_t *s = NULL;
    cr_assert_eq(load_text(t, msg, sizeof msg, &s), 0, "%s", msg);
    cr_assert_eq(kbset_n_rows(s), 2);
    cr_assert_eq(kbset_n_files(s), 1);
    cr_assert_str_eq(kbset_meta(s, 0, "driver"), "580.65");
    const kbrow_t *r = kbset_row(s, 0);
    cr_assert_str_eq(r->op_name, "h2d_copy");
    cr_assert_eq(r->line, 5);
    cr_assert_float_eq(r->piece_bytes, 4096, 0);
    cr_assert(isnan(r->n_tokens) && isnan(r->concurrent_id) && isnan(r->flops));
    cr_assert_float_eq(r->t_mean_us, 5.7, 1e-12);
    r = kbset_row(s, 1);
    cr_assert_str_eq(r->method, "fathom");
    cr_assert_float_eq(r->n_tokens, 131072, 0);
    cr_assert_str_eq(r->allocator, "");
    kbset_free(s);
    free(t);
}

Test(kbcsv, columns_in_any_order_and_extra_columns)
{
    const char *t = "# device: H200\n"
                    "extra,gbps,per_s,t_p99_us,t_p90_us,t_p10_us,t_med_us,reps,bytes_moved,layout,placement,policy,procs,"
                    "streams,allocator,blocks,pieces,region_bytes,piece_bytes,batch,k,bits,heads,n_tokens,variant,op,suite\n"
                    "zz,,,,,,12.5,3,,,,,,,,,,,,,,,,,,launch,kernels\n";
    char msg[ERR_MSG_MAX];
    kbset_t *s = NULL;
    cr_assert_eq(load_text(t, msg, sizeof msg, &s), 0, "%s", msg);
    cr_assert_float_eq(kbset_row(s, 0)->t_med_us, 12.5, 0);
    cr_assert_str_eq(kbset_row(s, 0)->suite, "kernels");
    kbset_free(s);
}

Test(kbcsv, missing_column)
{
    const char *t = "# device: NVIDIA H200\nsuite,op,variant\nlink,h2d_copy,single\n";
    expect_error(t, ":2: missing column 'n_tokens'", NULL);
}

Test(kbcsv, nan_is_rejected)
{
    char *t = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,nan,5.5,5.8,6.1,,,,\n");
    expect_error(t, "x.csv:5: column 't_med_us': NaN", NULL);
    free(t);
}

Test(kbcsv, negative_time_is_rejected)
{
    char *t = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.6,-5.5,5.8,6.1,,,,\n");
    expect_error(t, "x.csv:5: column 't_p10_us': negative time", NULL);
    free(t);
}

Test(kbcsv, foreign_device_is_rejected)
{
    const char *t = "# device: NVIDIA A100-SXM4-80GB\n"
                    "suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,allocator,"
                    "streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,t_p90_us,t_p99_us,per_s,gbps\n";
    expect_error(t, "x.csv:2: device 'NVIDIA A100-SXM4-80GB' is not this directory's device 'h200'", NULL);
}

Test(kbcsv, missing_device_is_rejected)
{
    const char *t = "suite,op,variant,n_tokens,heads,bits,k,batch,piece_bytes,region_bytes,pieces,blocks,allocator,"
                    "streams,procs,policy,placement,layout,bytes_moved,reps,t_med_us,t_p10_us,t_p90_us,t_p99_us,per_s,gbps\n";
    expect_error(t, "x.csv:1: no '# device:' header", NULL);
}

Test(kbcsv, unknown_op_is_rejected)
{
    char *t = with_row("link,warp_drive,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.6,5.5,5.8,6.1,,,,\n");
    expect_error(t, "x.csv:5: column 'op': unknown op kind 'warp_drive'", NULL);
    free(t);
}

Test(kbcsv, wrong_cell_count_and_garbage)
{
    char *t = with_row("link,h2d_copy,single,,,\n");
    expect_error(t, "x.csv:5: 6 cells, the header has 28", NULL);
    free(t);
    t = with_row("link,h2d_copy,single,,,,,,4k,,1,,hostalloc,1,,alone,host,,4096,20,5.6,5.5,5.8,6.1,,,,\n");
    expect_error(t, "x.csv:5: column 'piece_bytes': '4k' is not a number", NULL);
    free(t);
    t = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,,5.5,5.8,6.1,,,,\n");
    expect_error(t, "x.csv:5: column 't_med_us': empty", NULL);
    free(t);
}

Test(kbcsv, a_bad_file_keeps_nothing_of_the_directory)
{
    char *dir = synth_tmpdir("h200");
    char *good = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.6,5.5,5.8,6.1,,,,\n");
    char *bad = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,inf,5.5,5.8,6.1,,,,\n");
    char *p1 = write_file(dir, "a.csv", good), *p2 = write_file(dir, "b.csv", bad);
    kbset_t *s = (kbset_t *)1;
    err_t e;
    cr_assert_neq(kbset_load_dir(dir, NULL, &s, &e), 0);
    cr_assert_null(s);
    cr_assert(strstr(e.msg, "b.csv:5: column 't_med_us'"), "%s", e.msg);
    cr_assert_eq(kbcsv_count_dir(dir), 2);
    free(p1);
    free(p2);
    free(good);
    free(bad);
    synth_rmdir(dir);
    free(dir);
}

/* `odsim fit` on bad input: non-zero exit, FILE:LINE on stderr, and no profile written. */
Test(kbcsv, fit_command_writes_nothing_on_bad_input)
{
    const char *odsim = "build/rel/odsim";
    if (access(odsim, X_OK)) cr_skip_test("%s is not built", odsim);
    const char *cols = strchr(strchr(strchr(head, '\n') + 1, '\n') + 1, '\n') + 1;  /* the column row */
    char texts[4][2048], wants[4][64];
    snprintf(texts[0], sizeof texts[0], "%slink,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,nan,5.5,5.8,6.1,,,,\n", head);
    snprintf(wants[0], sizeof wants[0], "link.csv:5: column 't_med_us': NaN");
    snprintf(texts[1], sizeof texts[1], "%slink,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.6,5.5,-5.8,6.1,,,,\n", head);
    snprintf(wants[1], sizeof wants[1], "link.csv:5: column 't_p90_us': negative time");
    snprintf(texts[2], sizeof texts[2], "# device: NVIDIA A100-SXM4-80GB\n%s", cols);
    snprintf(wants[2], sizeof wants[2], "link.csv:2: device");
    snprintf(texts[3], sizeof texts[3], "# device: NVIDIA H200\nsuite,op,t_med_us\nlink,h2d_copy,5\n");
    snprintf(wants[3], sizeof wants[3], "link.csv:2: missing column");
    for (int i = 0; i < 4; i++) {
        char *dir = synth_tmpdir("h200");
        char *p = write_file(dir, "link.csv", texts[i]);
        char out[4200], cmd[9000], errf[4200];
        snprintf(out, sizeof out, "%s/profile.yaml", dir);
        snprintf(errf, sizeof errf, "%s/stderr.txt", dir);
        snprintf(cmd, sizeof cmd, "%s fit '%s' -o '%s' --quiet 2>'%s'", odsim, dir, out, errf);
        int st = system(cmd);
        cr_assert_neq(st, 0, "odsim fit accepted bad CSV %d", i);
        cr_assert_neq(access(out, F_OK), 0, "a profile was written despite the error (case %d)", i);
        FILE *fp = fopen(errf, "r");
        char msg[2048] = "";
        size_t n = fp ? fread(msg, 1, sizeof msg - 1, fp) : 0;
        msg[n] = '\0';
        if (fp) fclose(fp);
        cr_assert(strstr(msg, wants[i]), "case %d: stderr '%s' lacks '%s'", i, msg, wants[i]);
        unlink(errf);
        unlink(p);
        free(p);
        synth_rmdir(dir);
        free(dir);
    }
}

/* Two runs of one case set: the k-th measurement of a case matches the k-th of the other run, empty
 * cells match empty cells, what was measured (reps, times) does not take part, and one naming
 * column apart is another case. */
Test(kbcsv, match_pairs_the_same_cases_of_two_runs)
{
    char *ta = with_row("link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.6,5.5,5.8,6.1,1,0.73,,5.7\n"
                        "link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,20,5.9,5.5,5.8,6.1,1,0.73,,5.7\n"
                        "kernels,scan,,131072,8,56,,,,,,,,,,alone,host,,1000000,20,30.5,30,31,32,,,fathom,30.6\n"
                        "kernels,scan,,131072,8,68,,,,,,,,,,alone,host,,1000000,20,40.5,40,41,42,,,sparq,40.6\n");
    /* other order, other times and reps; the first scan's bits differ (56 -> 57): no match for it */
    char *tb = with_row("kernels,scan,,131072,8,68,,,,,,,,,,alone,host,,1000000,30,41.5,40,41,43,,,sparq,40.6\n"
                        "link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,30,6.6,5.5,5.8,7.1,1,0.73,,5.7\n"
                        "kernels,scan,,131072,8,57,,,,,,,,,,alone,host,,1000000,20,30.5,30,31,32,,,fathom,30.6\n"
                        "link,h2d_copy,single,,,,,,4096,,1,,hostalloc,1,,alone,host,,4096,30,6.9,5.5,5.8,7.1,1,0.73,,5.7\n");
    char msg[ERR_MSG_MAX];
    kbset_t *a = NULL, *b = NULL;
    cr_assert_eq(load_text(ta, msg, sizeof msg, &a), 0, "%s", msg);
    cr_assert_eq(load_text(tb, msg, sizeof msg, &b), 0, "%s", msg);
    const kbrow_t *m0 = kbset_match(b, a, 0), *m1 = kbset_match(b, a, 1), *m3 = kbset_match(b, a, 3);
    cr_assert(m0 && m1 && m3);
    cr_assert_float_eq(m0->t_med_us, 6.6, 1e-12, "the first copy matches the other run's first");
    cr_assert_float_eq(m1->t_med_us, 6.9, 1e-12, "the second copy matches the other run's second");
    cr_assert_float_eq(m3->t_med_us, 41.5, 1e-12);
    cr_assert_null(kbset_match(b, a, 2), "a case differing in bits matched");
    cr_assert_null(kbset_match(b, a, 4), "a row past the end matched");
    cr_assert(kbrow_same_case(kbset_row(a, 0), kbset_row(a, 1)));
    cr_assert_not(kbrow_same_case(kbset_row(a, 0), kbset_row(a, 2)));
    kbset_free(a);
    kbset_free(b);
    free(ta);
    free(tb);
}

/* The key variances each committed primary CSV gives in its header are the synthetic keys' that
 * kbench planned Fathom over (kernels/ref/kref.h), to the 9 digits it prints: validate reads them
 * as data, so a kbench that changed its keys without its header would be caught here. */
Test(kbcsv, committed_headers_give_kbenchs_key_variances)
{
    kbset_t *s = NULL;
    err_t e;
    cr_assert_eq(kbset_load_dir("validation/data/h200", NULL, &s, &e), 0, "%s", e.msg);
    for (size_t f = 0; f < kbset_n_files(s); f++) {
        const char *v = kbset_meta(s, f, "key_sigma2");
        cr_assert(v, "file %zu lacks key_sigma2", f);
        char *end;
        for (int j = 0; j < KREF_D; j++, v = end) {
            double x = strtod(v, &end);
            cr_assert(end != v, "file %zu: %d values, not %d", f, j, KREF_D);
            double want = (double)kref_key_sigma(j) * kref_key_sigma(j);
            cr_expect(fabs(x - want) <= 1e-7 * want, "channel %d: %.9g, kref %.9g", j, x, want);
        }
        while (*v == ' ') v++;
        cr_expect_eq(*v, '\0', "more than %d values", KREF_D);
    }
    kbset_free(s);
}
