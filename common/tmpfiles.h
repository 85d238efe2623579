/* tmpfiles — the temporary output files this process has open, removed when it is interrupted.
 *
 * atomicio registers each temporary beside an output; the first registration installs handlers for
 * SIGINT, SIGTERM and SIGHUP (where their disposition is the default) that end a running child
 * (gnuplot), remove every registered file with async-signal-safe calls only, restore the default
 * action and re-raise, so an interrupted run exits as before but leaves no *.tmp* files. The registry
 * is a fixed table of paths, so the handler reads no heap memory. Single-threaded use. */
#ifndef ODSIM_COMMON_TMPFILES_H
#define ODSIM_COMMON_TMPFILES_H

#include <sys/types.h>
#include "common/err.h"

/* Most temporaries open at once (a study's --out set holds about twenty). */
#define TMPFILES_MAX 64

/* Registers path (copied) for removal on a signal; *slot receives its handle for tmpfiles_forget.
 * Errors: ERR_RANGE (table full or path longer than PATH_MAX). */
int tmpfiles_add(const char *path, int *slot, err_t *e);

/* mkstemp(template) with the new file registered, signals held off in between so none can leave
 * it behind. Returns the descriptor, or -1 with ERR_IO/ERR_RANGE in e (nothing created). */
int tmpfiles_mkstemp(char *template, int *slot, err_t *e);

/* Stops tracking a slot (after the file was renamed or removed). slot < 0 is ignored. */
void tmpfiles_forget(int slot);

/* The child process (pid > 0) a signal handler should end and reap before removing the files;
 * 0 when none runs. */
void tmpfiles_set_child(pid_t pid);

#endif
