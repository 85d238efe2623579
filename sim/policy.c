/* policy — the serving modes: their names (the one list the CLI and scenarios use) and the policy
 * each runs under. Streams of one process and MPS clients need no hook: their ops overlap as
 * resources allow, on one launch thread per GPU or one per client. */
#include "sim/exec_int.h"

#include <string.h>

const char *const exec_mode_names[] = {"streams", "processes", "mps", "lockstep", "continuous", NULL};

static const exec_policy_t policy_streams = {0};
static const exec_policy_t policy_mps = {.own_ctx = true};

const exec_policy_t *exec_policy_of(exec_mode_t m)
{
    static const exec_policy_t *const table[] = {
        [EXEC_STREAMS] = &policy_streams, [EXEC_PROCESSES] = &exec_policy_processes, [EXEC_MPS] = &policy_mps,
        [EXEC_LOCKSTEP] = &exec_policy_lockstep, [EXEC_CONTINUOUS] = &exec_policy_continuous};
    return (unsigned)m <= EXEC_CONTINUOUS ? table[m] : NULL;
}

const char *exec_mode_name(exec_mode_t m) { return (unsigned)m <= EXEC_CONTINUOUS ? exec_mode_names[m] : "?"; }

int exec_mode_parse(const char *s)
{
    for (int i = 0; exec_mode_names[i]; i++)
        if (!strcmp(exec_mode_names[i], s)) return i;
    return -1;
}
