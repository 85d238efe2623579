/* odsim — entry point: dispatches to the sub-commands in cli/cmd_*.c. */
#include <gsl/gsl_errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/par.h"
#include "common/version.h"

static void print_help(FILE *fp)
{
    fprintf(fp, "odsim %s — discrete-event simulator of offloaded LLM decode\n\n"
                "usage: odsim COMMAND [ARGS]   (odsim COMMAND --help for details)\n\n",
            ODSIM_VERSION);
    for (const cmd_t *const *c = cmd_table; *c; c++) fprintf(fp, "  %-10s %s\n", (*c)->name, (*c)->summary);
    fprintf(fp, "\n  --version  print the version and the git commit it was built from\n");
}

int main(int argc, char **argv)
{
    /* GSL's default handler aborts; every GSL status is checked where it is returned. */
    gsl_set_error_handler_off();
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("odsim %s (%s)\n", ODSIM_VERSION, odsim_git_rev);
        return 0;
    }
    if (cmd_is_help(argv[1])) {
        print_help(stdout);
        return 0;
    }
    for (const cmd_t *const *c = cmd_table; *c; c++) {
        if (strcmp((*c)->name, argv[1])) continue;
        if (argc > 2 && cmd_is_help(argv[2])) {
            fputs((*c)->usage, stdout);
            return 0;
        }
        /* Under mpirun every rank runs the command; cli/par.h spreads its units. */
        if (par_init(&argc, &argv)) return 1;
        int rc = (*c)->main(argc - 1, argv + 1);
        par_finish();
        return rc;
    }
    fprintf(stderr, "odsim: unknown command '%s'\n", argv[1]);
    print_help(stderr);
    return 2;
}
