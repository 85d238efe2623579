/* posix_spawn_file_actions_addchdir_np (glibc 2.29): the child starts in the output directory, so no path
 * is ever written into what it reads. */
#define _GNU_SOURCE
#include "common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tmpfiles.h"

extern char **environ;

/* Starts the child with signals held off until common/tmpfiles knows its pid; the child itself
 * starts with the caller's mask. Returns posix_spawnp's error number. */
static int start(const char *const argv[], const char *cwd, int err_fd, int read_fd, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    int rc = posix_spawn_file_actions_init(&fa);
    if (!rc) rc = posix_spawnattr_init(&at);
    if (!rc) rc = posix_spawnattr_setsigmask(&at, &old);
    if (!rc) rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    if (!rc) rc = posix_spawn_file_actions_addclose(&fa, read_fd);
    if (!rc && cwd) rc = posix_spawn_file_actions_addchdir_np(&fa, cwd);
    if (!rc) rc = posix_spawnp(pid, argv[0], &fa, &at, (char *const *)argv, environ);
    if (!rc) tmpfiles_set_child(*pid);
    sigprocmask(SIG_SETMASK, &old, NULL);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

int spawn_run(const char *const argv[], const char *cwd, int *status, char *diag, size_t diag_len, err_t *e)
{
    *status = -1;
    if (diag_len) diag[0] = '\0';
    int p[2];
    if (pipe(p) != 0) return err_set(e, ERR_IO, "%s: cannot start: %s", argv[0], strerror(errno));
    pid_t pid;
    int rc = start(argv, cwd, p[1], p[0], &pid);
    close(p[1]);
    if (rc) {
        close(p[0]);
        if (rc == ENOENT) return err_set(e, ERR_NOTFOUND, "%s is not installed (not found on PATH)", argv[0]);
        return err_set(e, ERR_IO, "%s: cannot start%s%s: %s", argv[0], cwd ? " in " : "", cwd ? cwd : "", strerror(rc));
    }
    /* read to the end (the child must never block on a full pipe), keeping the last non-empty line:
     * gnuplot's error comes after its warnings */
    char buf[512], line[512];
    size_t kept = 0;
    for (;;) {
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (kept + 1 < sizeof line) line[kept++] = buf[i];
                continue;
            }
            if (kept && diag_len) snprintf(diag, diag_len, "%.*s", (int)kept, line);
            kept = 0;
        }
    }
    if (kept && diag_len) snprintf(diag, diag_len, "%.*s", (int)kept, line);
    close(p[0]);
    int st;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
    tmpfiles_set_child(0);
    if (w < 0) return err_set(e, ERR_IO, "%s: cannot wait for it: %s", argv[0], strerror(errno));
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return ERR_OK;
}
