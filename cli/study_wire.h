/* study_wire — a study result as a byte string and back, bit-exact, so a point simulated in another
 * process (an MPI rank, cli/par.h) reports exactly as one simulated here. Both ends run the same
 * build: the record is the struct's scalars as they lie in memory, then its strings and arrays. */
#ifndef ODSIM_CLI_STUDY_WIRE_H
#define ODSIM_CLI_STUDY_WIRE_H

#include <stddef.h>
#include "cli/study.h"
#include "common/err.h"

/* r as a new byte string *buf of *len bytes (free with free). Errors: ERR_NOMEM. */
int study_wire_pack(const study_result_t *r, char **buf, size_t *len, err_t *e);
/* The result packed in buf[0..len) as a new *out (free with study_result_free). Errors: ERR_PARSE
 * (a truncated or overlong record), ERR_NOMEM. */
int study_wire_unpack(const char *buf, size_t len, study_result_t **out, err_t *e);

#endif
