/* spawn — running an external program without a shell: an argument vector, never a command line. */
#ifndef ODSIM_COMMON_SPAWN_H
#define ODSIM_COMMON_SPAWN_H

#include <stddef.h>
#include "common/err.h"

/* Runs argv[0] (looked up on PATH) with the NULL-terminated argv, in directory cwd (NULL: this
 * one), with standard input and output on /dev/null, and waits for it. While it runs, a SIGINT or
 * SIGTERM to odsim ends it too (common/tmpfiles.h). *status receives its exit status, or 128 + the
 * signal that ended it; the last non-empty line of its standard error goes to diag ("" when none).
 * Errors: ERR_NOTFOUND (the program is not installed), ERR_IO (it could not be started). */
int spawn_run(const char *const argv[], const char *cwd, int *status, char *diag, size_t diag_len, err_t *e);

#endif
