/* npy — a strict reader of NumPy .npy arrays of float32 or float16, into floats.
 *
 * Format (numpy.lib.format, versions 1.0, 2.0 and 3.0): the magic "\x93NUMPY", major and minor version
 * bytes, the header length (uint16 little-endian in 1.0, uint32 in 2.0 and 3.0), then the header, a
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (64, 128), } padded with
 * spaces and ending in '\n', then the data, C order. Accepted: descr '<f4' (float32) or '<f2' / '|f2'
 * (float16), little-endian, fortran_order False, 1 to 4 dimensions, and exactly the data bytes the
 * shape needs. Everything else (another dtype, big-endian, Fortran order, a truncated file, bytes
 * past the data, an unknown header key) is an error naming the file and what is wrong. */
#ifndef ODSIM_COMMON_NPY_H
#define ODSIM_COMMON_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#define NPY_MAX_DIMS 4

typedef struct npy_array {
    int ndim;
    size_t shape[NPY_MAX_DIMS];
    int itemsize;     /* 4: float32, 2: float16 (as stored) */
    size_t count;     /* product of shape */
    float *data;      /* count floats, C order (owned) */
} npy_array_t;

/* Parses a whole .npy image buf[0..len); `name` stands for the file in messages. On success *a owns
 * its data (npy_free). Errors: ERR_PARSE (magic, version, header, dtype, order, shape, size),
 * ERR_NOMEM. */
int npy_parse(const char *name, const uint8_t *buf, size_t len, npy_array_t *a, err_t *e);

/* Reads and parses the file at path. Errors: ERR_IO (cannot open or read), as npy_parse. */
int npy_read_file(const char *path, npy_array_t *a, err_t *e);

/* Frees a's data and zeroes it; a may be zeroed already. */
void npy_free(npy_array_t *a);

/* Writes a's shape as "(64, 128)" into buf. */
void npy_shape_str(const npy_array_t *a, char *buf, size_t size);

#endif
