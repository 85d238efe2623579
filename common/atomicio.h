/* atomicio — files that appear whole or not at all.
 *
 * Writers open a temporary file beside the target (same directory, so rename(2) is atomic), write,
 * then commit (fflush + fsync + rename) or abort (unlink). A failed run never leaves a half-written
 * output under the target's name. */
#ifndef ODSIM_COMMON_ATOMICIO_H
#define ODSIM_COMMON_ATOMICIO_H

#include <stdio.h>
#include <stddef.h>
#include "common/err.h"

typedef struct atomicio atomicio_t;

/* Opens a temporary file for `path`. On success *out owns it (release with atomicio_commit or
 * atomicio_abort, exactly once). Errors: ERR_IO (directory missing, not writable), ERR_NOMEM. */
int atomicio_open(const char *path, atomicio_t **out, err_t *e);

/* The stdio stream to write to; owned by f. */
FILE *atomicio_file(atomicio_t *f);

/* Flushes, syncs and renames onto the target, then frees f. If any write failed (ferror) or the
 * rename fails, the temporary is removed, nothing is renamed and ERR_IO is returned. */
int atomicio_commit(atomicio_t *f, err_t *e);

/* Removes the temporary and frees f. f may be NULL. */
void atomicio_abort(atomicio_t *f);

/* Writes len bytes of buf to path atomically. Errors as atomicio_open/atomicio_commit. */
int atomicio_write(const char *path, const void *buf, size_t len, err_t *e);

/* Reads a whole file into a NUL-terminated heap buffer (*out, caller frees; *len excludes the NUL).
 * max_bytes bounds what is read (ERR_RANGE beyond it). Errors: ERR_IO, ERR_NOMEM, ERR_RANGE. */
int atomicio_read_all(const char *path, size_t max_bytes, char **out, size_t *len, err_t *e);

#endif
