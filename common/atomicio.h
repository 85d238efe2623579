/* atomicio — files that appear whole or not at all, and never destroy what they replace.
 *
 * Writers open a temporary file beside the target (same directory, so rename(2) is atomic), write,
 * then commit (fflush + fsync + rename) or abort (unlink). A failed or interrupted run never leaves
 * a half-written output under the target's name, nor its temporary (common/tmpfiles.h).
 *
 * The rule for what may be at an output path (atomicio_check), applied when the file is opened and
 * again just before the rename:
 *   - nothing: the file is created (its directory must exist);
 *   - a regular file with one link that may be written: it is replaced, keeping its permissions;
 *   - a read-only file, or a regular file with more than one hard link: refused (replacing it would
 *     defeat the permission, or split the links so the other names keep the old contents);
 *   - a symbolic link: refused, whatever it points to (name the target itself);
 *   - a directory, FIFO, device or socket: refused.
 * "-" is standard output, written in place. Refusals are ERR_IO naming the path and what is there. */
#ifndef ODSIM_COMMON_ATOMICIO_H
#define ODSIM_COMMON_ATOMICIO_H

#include <stdio.h>
#include <stddef.h>
#include "common/err.h"

typedef struct atomicio atomicio_t;

/* Checks path against the rule above without writing anything, so commands can refuse an output
 * before working. Errors: ERR_IO (refused), ERR_INVAL (empty path). */
int atomicio_check(const char *path, err_t *e);

/* Opens a temporary file for `path` (after atomicio_check). On success *out owns it (release with
 * atomicio_commit, atomicio_finish + atomicio_publish, or atomicio_abort, exactly once).
 * Errors: ERR_IO (refused, directory missing, not writable), ERR_NOMEM, ERR_RANGE (too many open). */
int atomicio_open(const char *path, atomicio_t **out, err_t *e);

/* The stdio stream to write to; owned by f; NULL after atomicio_finish. */
FILE *atomicio_file(atomicio_t *f);

/* The temporary's path (the target's for "-"); owned by f. */
const char *atomicio_tmp_path(const atomicio_t *f);

/* Flushes, syncs and closes the temporary without renaming it (for files published together, see
 * common/outset.h). On failure the temporary is removed and f freed. Errors: ERR_IO. */
int atomicio_finish(atomicio_t *f, err_t *e);

/* Renames a finished temporary onto its target, after checking the target again, then frees f.
 * On failure the temporary is removed. Errors: ERR_IO. */
int atomicio_publish(atomicio_t *f, err_t *e);

/* atomicio_finish then atomicio_publish. If any write failed (ferror) or the rename fails, the
 * temporary is removed, nothing is renamed and ERR_IO is returned. */
int atomicio_commit(atomicio_t *f, err_t *e);

/* Removes the temporary and frees f. f may be NULL. */
void atomicio_abort(atomicio_t *f);

/* Writes len bytes of buf to path atomically. Errors as atomicio_open/atomicio_commit. */
int atomicio_write(const char *path, const void *buf, size_t len, err_t *e);

/* Reads a whole file into a NUL-terminated heap buffer (*out, caller frees; *len excludes the NUL).
 * max_bytes bounds what is read (ERR_RANGE beyond it). Errors: ERR_IO, ERR_NOMEM, ERR_RANGE. */
int atomicio_read_all(const char *path, size_t max_bytes, char **out, size_t *len, err_t *e);

#endif
