/* npy — the .npy reader (see npy.h). */
#include "common/npy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s, *end, *name;
} hdr_t;

static void skip_ws(hdr_t *h)
{
    while (h->s < h->end && (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r')) h->s++;
}

static int expect(hdr_t *h, char c, const char *what, err_t *e)
{
    skip_ws(h);
    if (h->s >= h->end || *h->s != c)
        return err_set(e, ERR_PARSE, "%s: .npy header: expected '%c' %s", h->name, c, what);
    h->s++;
    return ERR_OK;
}

/* A quoted Python string ('...' or "...", no escapes) into out. */
static int quoted(hdr_t *h, char *out, size_t size, err_t *e)
{
    skip_ws(h);
    if (h->s >= h->end || (*h->s != '\'' && *h->s != '"'))
        return err_set(e, ERR_PARSE, "%s: .npy header: expected a quoted string", h->name);
    char q = *h->s++;
    size_t n = 0;
    while (h->s < h->end && *h->s != q) {
        if (*h->s == '\\' || n + 1 >= size)
            return err_set(e, ERR_PARSE, "%s: .npy header: string too long or escaped", h->name);
        out[n++] = *h->s++;
    }
    if (h->s >= h->end) return err_set(e, ERR_PARSE, "%s: .npy header: unterminated string", h->name);
    h->s++;
    out[n] = 0;
    return ERR_OK;
}

static int shape_tuple(hdr_t *h, npy_array_t *a, err_t *e)
{
    int rc = expect(h, '(', "to open the shape", e);
    a->ndim = 0;
    for (;;) {
        if (rc) return rc;
        skip_ws(h);
        if (h->s < h->end && *h->s == ')') break;
        if (h->s >= h->end || !isdigit((unsigned char)*h->s))
            return err_set(e, ERR_PARSE, "%s: .npy header: shape: expected a dimension", h->name);
        if (a->ndim == NPY_MAX_DIMS)
            return err_set(e, ERR_PARSE, "%s: .npy header: shape has more than %d dimensions", h->name, NPY_MAX_DIMS);
        size_t v = 0;
        while (h->s < h->end && isdigit((unsigned char)*h->s)) {
            if (v > (SIZE_MAX - 9) / 10)
                return err_set(e, ERR_PARSE, "%s: .npy header: shape: dimension too large", h->name);
            v = v * 10 + (size_t)(*h->s++ - '0');
        }
        a->shape[a->ndim++] = v;
        skip_ws(h);
        if (h->s < h->end && *h->s == ',') h->s++;
        else if (h->s >= h->end || *h->s != ')')
            return err_set(e, ERR_PARSE, "%s: .npy header: shape: expected ',' or ')'", h->name);
    }
    h->s++;
    if (a->ndim == 0) return err_set(e, ERR_PARSE, "%s: shape () is a scalar, not an array", h->name);
    return ERR_OK;
}

/* The header dict: descr, fortran_order and shape, each once, nothing else. */
static int parse_header(hdr_t *h, npy_array_t *a, err_t *e)
{
    char key[32], descr[32] = "";
    int seen = 0, rc = expect(h, '{', "to open the header dict", e);
    while (!rc) {
        skip_ws(h);
        if (h->s < h->end && *h->s == '}') break;
        if ((rc = quoted(h, key, sizeof key, e)) || (rc = expect(h, ':', "after a key", e))) return rc;
        if (!strcmp(key, "descr") && !(seen & 1)) {
            rc = quoted(h, descr, sizeof descr, e);
            seen |= 1;
        } else if (!strcmp(key, "fortran_order") && !(seen & 2)) {
            skip_ws(h);
            if ((size_t)(h->end - h->s) >= 4 && !strncmp(h->s, "True", 4))
                return err_set(e, ERR_PARSE, "%s: fortran_order is True: write C-order arrays (np.ascontiguousarray)",
                               h->name);
            if ((size_t)(h->end - h->s) < 5 || strncmp(h->s, "False", 5))
                return err_set(e, ERR_PARSE, "%s: .npy header: fortran_order must be False", h->name);
            h->s += 5;
            seen |= 2;
        } else if (!strcmp(key, "shape") && !(seen & 4)) {
            rc = shape_tuple(h, a, e);
            seen |= 4;
        } else {
            return err_set(e, ERR_PARSE, "%s: .npy header: unexpected or repeated key '%s'", h->name, key);
        }
        skip_ws(h);
        if (!rc && h->s < h->end && *h->s == ',') h->s++;
    }
    if (!rc) rc = expect(h, '}', "to close the header dict", e);
    if (rc) return rc;
    if (seen != 7) return err_set(e, ERR_PARSE, "%s: .npy header lacks descr, fortran_order or shape", h->name);
    if (!strcmp(descr, "<f4")) a->itemsize = 4;
    else if (!strcmp(descr, "<f2") || !strcmp(descr, "|f2")) a->itemsize = 2;
    else
        return err_set(e, ERR_PARSE, "%s: dtype '%s' is not little-endian float32 ('<f4') or float16 ('<f2')", h->name,
                       descr);
    return ERR_OK;
}

static float f16_to_f32(uint16_t x)
{
    int e = (x >> 10) & 31, m = x & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return (x & 0x8000) ? -v : v;
}

int npy_parse(const char *name, const uint8_t *buf, size_t len, npy_array_t *a, err_t *e)
{
    memset(a, 0, sizeof *a);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6))
        return err_set(e, ERR_PARSE, "%s: not a .npy file (no \\x93NUMPY magic%s)", name, len < 10 ? "; file too short" : "");
    int major = buf[6];
    if (major < 1 || major > 3) return err_set(e, ERR_PARSE, "%s: .npy version %d.%d is not 1, 2 or 3", name, major, buf[7]);
    size_t pre = major == 1 ? 10 : 12;
    if (len < pre) return err_set(e, ERR_PARSE, "%s: truncated in the .npy preamble", name);
    size_t hl = major == 1 ? (size_t)buf[8] | (size_t)buf[9] << 8
                           : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    if (hl > len - pre)
        return err_set(e, ERR_PARSE, "%s: truncated: header of %zu bytes, %zu left in the file", name, hl, len - pre);
    hdr_t h = {(const char *)buf + pre, (const char *)buf + pre + hl, name};
    int rc = parse_header(&h, a, e);
    if (rc) return rc;
    skip_ws(&h);
    if (h.s != h.end) return err_set(e, ERR_PARSE, "%s: .npy header: text after the dict", name);
    size_t count = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] && count > SIZE_MAX / 8 / a->shape[i])
            return err_set(e, ERR_PARSE, "%s: shape too large", name);
        count *= a->shape[i];
    }
    char sh[96];
    npy_shape_str(a, sh, sizeof sh);
    size_t want = count * (size_t)a->itemsize, have = len - pre - hl;
    if (have != want)
        return err_set(e, ERR_PARSE, "%s: %s: shape %s of float%d needs %zu data bytes, the file has %zu", name,
                       have < want ? "truncated" : "bytes past the data", sh, 8 * a->itemsize, want, have);
    a->count = count;
    a->data = malloc((count ? count : 1) * sizeof *a->data);
    if (!a->data) return err_set(e, ERR_NOMEM, "%s: out of memory for %zu floats", name, count);
    const uint8_t *d = buf + pre + hl;
    for (size_t i = 0; i < count; i++) {
        if (a->itemsize == 4) {
            uint32_t u = (uint32_t)d[4 * i] | (uint32_t)d[4 * i + 1] << 8 | (uint32_t)d[4 * i + 2] << 16 |
                         (uint32_t)d[4 * i + 3] << 24;
            memcpy(&a->data[i], &u, 4);
        } else {
            a->data[i] = f16_to_f32((uint16_t)(d[2 * i] | d[2 * i + 1] << 8));
        }
    }
    return ERR_OK;
}

int npy_read_file(const char *path, npy_array_t *a, err_t *e)
{
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = ERR_OK;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                rc = err_set(e, ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = err_set(e, ERR_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (!rc) rc = npy_parse(path, buf, len, a, e);
    free(buf);
    return rc;
}

void npy_free(npy_array_t *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

void npy_shape_str(const npy_array_t *a, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < a->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %zu" : "%zu", a->shape[i]);
    if (n < size) snprintf(buf + n, size - n, a->ndim == 1 ? ",)" : ")");
}
