/* cmd — one odsim sub-command per cli/cmd_NAME.c file.
 *
 * Each file defines `const cmd_t cmd_NAME = {...}`; the Makefile generates the table from the file
 * names, so adding a command touches no shared file. A command returns the process exit status:
 * 0 success, 1 a failure it reported on stderr, 2 bad usage. */
#ifndef ODSIM_CLI_CMD_H
#define ODSIM_CLI_CMD_H

typedef struct cmd {
    const char *name;     /* what users type: `odsim NAME ...` */
    const char *summary;  /* one line for `odsim --help` */
    const char *usage;    /* full usage text for `odsim NAME --help` */
    int (*main)(int argc, char **argv); /* argv[0] is the command name */
} cmd_t;

extern const cmd_t *const cmd_table[];

/* Prints "odsim NAME: message" to stderr (printf-style) and returns 1. */
int cmd_fail(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the usage of c and "odsim NAME: message" to stderr and returns 2. */
int cmd_usage_error(const cmd_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when s is "--help" or "-h". */
int cmd_is_help(const char *s);
/* Parses s as a whole decimal integer in [lo, hi] into *out; returns 0, or -1 (out untouched). */
int cmd_parse_long(const char *s, long lo, long hi, long *out);
/* Parses s as a count by the scenarios' rule (common/cfg.h cfg_int64: k, M, G decimal; Ki, Mi, Gi
 * binary: 1M = 1000000, 1Mi = 1048576) in [lo, hi] into *out; returns 0, or -1 (out untouched). */
int cmd_parse_count(const char *s, long long lo, long long hi, long long *out);

struct json_t;
/* Prints doc (taken: freed here; NULL is out of memory) as one indented JSON document on stdout.
 * Returns 0, or 1 with "odsim NAME: out of memory" on stderr. */
int cmd_put_json(const char *name, struct json_t *doc);

#endif
