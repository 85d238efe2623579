/* profile — writes a fitted calibration profile (the format models/calib.h reads).
 *
 *   profile: NAME
 *   hardware: "device | pcie | virtualisation"     (from the CSV headers)
 *   platform: {gpu, link, host, virtualisation}     (the measured box's presets, when given; the CSV headers' VM)
 *   params:
 *     h2d_GBps: {value: 55.31, stderr: 0.02, lo: 4096, hi: 1073741824, unit: GB/s,
 *                origin: "fitted: validation/data/h200/link.csv rows 26 (...)"}
 *   sources:                                        (what the fit read)
 *     device: ..., driver: ..., virtualisation: ..., heldout: {file, fnv1a}, command: ...
 *     files: [{path, fnv1a, rows, suite, date, commit}, ...]
 *   residuals:                                      (per group of fitted rows, relative)
 *     ce_copy_h2d: {n: 20, rms_rel: 0.012, max_rel: 0.041}
 *   notes: ["...", ...]                             (parameters not determined, and why) */
#ifndef ODSIM_VALIDATION_PROFILE_H
#define ODSIM_VALIDATION_PROFILE_H

#include <stdbool.h>
#include <stdio.h>
#include "common/err.h"
#include "validation/fit.h"
#include "validation/kbcsv.h"

typedef struct profile_info {
    const char *profile;              /* profile name */
    const char *heldout_path;         /* the held-out rule file used */
    unsigned long long heldout_fnv1a;
    const char *command;              /* the command line, for provenance */
    const char *gpu, *link, *host;    /* the measured platform as catalog presets (NULL: none written) */
} profile_info_t;

/* Writes the profile (parameters, then the provenance sections sources/residuals/notes as YAML)
 * to path atomically (whole or not at all), after checking that models/calib.c loads it. Errors:
 * ERR_INVAL (the loader rejects it: nothing written), ERR_IO, ERR_NOMEM. */
int profile_write(const char *path, const fit_t *f, const kbset_t *set, const profile_info_t *info, err_t *e);

#endif
