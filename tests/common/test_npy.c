/* Tests of the .npy reader (common/npy.h): values read back, and every malformed image rejected with a
 * message naming the file and what is wrong. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/npy.h"

/* A version-1.0 image with the given header dict and data bytes; returns its length. */
static size_t image(uint8_t *buf, const char *dict, const void *data, size_t len)
{
    size_t hl = strlen(dict) + 1;
    hl += (64 - (10 + hl) % 64) % 64;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hl & 255);
    buf[9] = (uint8_t)(hl >> 8);
    memset(buf + 10, ' ', hl);
    memcpy(buf + 10, dict, strlen(dict));
    buf[10 + hl - 1] = '\n';
    memcpy(buf + 10 + hl, data, len);
    return 10 + hl + len;
}

Test(npy, float32_and_float16_read_back)
{
    uint8_t buf[512];
    float f[6] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-3f, -7.0f};
    size_t n = image(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
    npy_array_t a;
    err_t e;
    cr_assert_eq(npy_parse("a.npy", buf, n, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(a.ndim, 2);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.shape[1], 3);
    cr_assert_eq(a.itemsize, 4);
    for (int i = 0; i < 6; i++) cr_assert_eq(a.data[i], f[i]);
    npy_free(&a);
    /* half: 1.0, -2.0, 65504, 2^-24 (subnormal), 0.333 (0x3555) */
    uint8_t h[] = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x55, 0x35};
    n = image(buf, "{\"descr\": \"<f2\", \"shape\": (5,), \"fortran_order\": False}", h, sizeof h);
    cr_assert_eq(npy_parse("b.npy", buf, n, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(a.ndim, 1);
    cr_assert_eq(a.count, 5);
    cr_assert_eq(a.data[0], 1.0f);
    cr_assert_eq(a.data[1], -2.0f);
    cr_assert_eq(a.data[2], 65504.0f);
    cr_assert_eq(a.data[3], 5.9604645e-8f);
    cr_assert_float_eq(a.data[4], 0.33325195f, 1e-8);
    npy_free(&a);
}

static void rejects(const uint8_t *buf, size_t n, const char *want)
{
    npy_array_t a;
    err_t e;
    cr_assert_neq(npy_parse("bad.npy", buf, n, &a, &e), 0, "accepted; wanted '%s'", want);
    cr_assert(strstr(e.msg, "bad.npy") && strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    cr_assert_null(a.data);
}

Test(npy, truncated_files)
{
    uint8_t buf[512];
    float f[8] = {0};
    size_t n = image(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", f, sizeof f);
    rejects(buf, n - 1, "truncated");           /* one data byte short */
    rejects(buf, n - sizeof f, "truncated");    /* no data at all */
    rejects(buf, 40, "truncated");              /* inside the header */
    rejects(buf, 9, "magic");                   /* inside the preamble */
    uint8_t more[600];
    memcpy(more, buf, n);
    more[n] = 0;
    rejects(more, n + 1, "bytes past the data");
}

Test(npy, wrong_dtypes_order_and_headers)
{
    static const struct {
        const char *dict;
        size_t bytes;
        const char *want;
    } bad[] = {
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, "dtype '<f8'"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", 16, "dtype '>f4'"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", 16, "dtype '<i4'"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "fortran_order is True"},
        {"{'descr': '<f4', 'shape': (4,), }", 16, "lacks"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", 16, "repeated key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "scalar"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 4), }", 16, "more than 4 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 16, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } x", 16, "text after the dict"},
    };
    uint8_t buf[512], zero[16] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        rejects(buf, image(buf, bad[i].dict, zero, bad[i].bytes), bad[i].want);
    size_t n = image(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", zero, 16);
    buf[6] = 9;
    rejects(buf, n, "version 9");
    buf[0] = 'x';
    rejects(buf, n, "magic");
}

Test(npy, file_errors_name_the_file)
{
    npy_array_t a;
    err_t e;
    cr_assert_eq(npy_read_file("/nonexistent/k.npy", &a, &e), ERR_IO);
    cr_assert(strstr(e.msg, "/nonexistent/k.npy"), "%s", e.msg);
    char tmpl[] = "/tmp/odsim_npyXXXXXX";
    cr_assert_not_null(mkdtemp(tmpl));
    char path[256];
    snprintf(path, sizeof path, "%s/t.npy", tmpl);
    uint8_t buf[512];
    float f[4] = {1, 2, 3, 4};
    size_t n = image(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f, sizeof f);
    FILE *fp = fopen(path, "wb");
    fwrite(buf, 1, n - 2, fp);
    fclose(fp);
    cr_assert_eq(npy_read_file(path, &a, &e), ERR_PARSE);
    cr_assert(strstr(e.msg, path) && strstr(e.msg, "truncated") && strstr(e.msg, "(4,)"), "%s", e.msg);
    remove(path);
    remove(tmpl);
}
