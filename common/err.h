/* err — status codes and error messages shared by every odsim module.
 *
 * Library code never exits: a function that can fail returns an int status (0 on success, a negative
 * ERR_* code on failure) and, when given a non-NULL err_t, fills it with a one-line message that names
 * where the problem is (file:line:column and key for input, the call and its argument for API misuse).
 * Only main() prints and exits. */
#ifndef ODSIM_COMMON_ERR_H
#define ODSIM_COMMON_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ERR_OK       = 0,
    ERR_INVAL    = -1,  /* bad argument or bad input value */
    ERR_IO       = -2,  /* file could not be read or written */
    ERR_NOMEM    = -3,  /* allocation failed */
    ERR_PARSE    = -4,  /* malformed input (YAML, CSV, JSON, trace) */
    ERR_RANGE    = -5,  /* value outside its allowed range */
    ERR_CAPACITY = -6,  /* a capacity (HBM, host DRAM) would be exceeded */
    ERR_CYCLE    = -7,  /* a plan's dependencies form a cycle */
    ERR_CONVERGE = -8,  /* a fit or solver did not converge */
    ERR_NOTFOUND = -9,  /* a named preset, key or file does not exist */
    ERR_INFEASIBLE = -10 /* a configuration cannot run (reported with its numbers) */
};

#define ERR_MSG_MAX 1024

typedef struct err {
    int code;
    char msg[ERR_MSG_MAX];
} err_t;

/* Clears e (code ERR_OK, empty message). e may be NULL. */
void err_clear(err_t *e);

/* Sets e's code and printf-style message and returns code, so callers can write
 * `return err_set(e, ERR_INVAL, "...")`. e may be NULL (the code is still returned). */
int err_set(err_t *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prepends printf-style context and ": " to e's message, keeping its code; returns e's code
 * (or ERR_INVAL when e is NULL). Used to add the file or key name on the way up. */
int err_prefix(err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A short fixed name for a code ("invalid", "io", ...), never NULL. */
const char *err_name(int code);

#ifdef __cplusplus
}
#endif
#endif
