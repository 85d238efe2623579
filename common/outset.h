/* outset — the files of one output directory, published together, with a manifest written last.
 *
 * Every file of the set is written to a temporary beside its name (common/atomicio.h, whose rule
 * decides what may be replaced); outset_commit removes DIR/MANIFEST, renames every file onto its
 * name, removes the set's names that this run did not produce (a plot gnuplot could not draw), and
 * then writes DIR/MANIFEST listing each file and its size. So DIR/MANIFEST exists only beside a
 * complete set: a run killed before it leaves the old set with no manifest, or a new set without
 * one, never a manifest that lists files of two runs. */
#ifndef ODSIM_COMMON_OUTSET_H
#define ODSIM_COMMON_OUTSET_H

#include <stddef.h>
#include <stdio.h>
#include "common/err.h"

#define OUTSET_MANIFEST "MANIFEST"

typedef struct outset outset_t;

/* Checks, before any work, that dir is a directory or can be created, and that DIR/NAME for each
 * of names and the manifest may be written (atomicio_check). Errors: ERR_IO naming the path. */
int outset_check(const char *dir, const char *const *names, size_t n, err_t *e);

/* Starts a set in dir, creating it (one level) when missing. Errors: ERR_IO (not a directory,
 * cannot create), ERR_NOMEM. */
int outset_open(const char *dir, outset_t **out, err_t *e);

/* For files that join a directory of other outputs one group at a time: outset_commit publishes
 * them together but neither removes nor writes DIR/MANIFEST. */
void outset_no_manifest(outset_t *s);

/* The directory (as given to outset_open). */
const char *outset_dir(const outset_t *s);

/* Opens DIR/name in the set; *fp (owned by the set) is the stream to write it to. */
int outset_file(outset_t *s, const char *name, FILE **fp, err_t *e);

/* The temporary that DIR/name is being written to, or NULL when name is not (or no longer) in s. */
const char *outset_tmp_path(const outset_t *s, const char *name);

/* Reserves DIR/name for a file another program writes: creates its temporary, empty, and sets
 * *tmp_path (owned by the set) to it. Errors as atomicio_open. */
int outset_reserve(outset_t *s, const char *name, const char **tmp_path, err_t *e);

/* Takes name out of the set: its temporary is removed, and at commit an old DIR/name is too. */
void outset_drop(outset_t *s, const char *name);

/* Publishes the set as the header says, then frees s. On failure the remaining temporaries are
 * removed and the manifest is not written. Errors: ERR_IO naming the file, ERR_NOMEM. */
int outset_commit(outset_t *s, err_t *e);

/* Removes every temporary and frees s; no file of DIR changes. s may be NULL. */
void outset_abort(outset_t *s);

#endif
