#include "common/tmpfiles.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char paths[TMPFILES_MAX][PATH_MAX];
static volatile sig_atomic_t used[TMPFILES_MAX];
static volatile sig_atomic_t child;
static int installed;
static const int signals[] = {SIGINT, SIGTERM, SIGHUP};

/* Async-signal-safe only: kill, waitpid, unlink, sigaction, raise. */
static void on_signal(int sig)
{
    int saved = errno;
    pid_t c = (pid_t)child;
    if (c > 0) {
        kill(c, SIGKILL);
        waitpid(c, NULL, 0);   /* the child no longer writes once it is reaped */
    }
    for (int i = 0; i < TMPFILES_MAX; i++)
        if (used[i]) unlink(paths[i]);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    errno = saved;
    raise(sig);   /* delivered, with the default action, when this handler returns */
}

static void install(void)
{
    installed = 1;
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) {
        struct sigaction old, sa;
        if (sigaction(signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) continue; /* keep SIG_IGN (nohup) */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof signals / sizeof *signals; j++) sigaddset(&sa.sa_mask, signals[j]);
        sigaction(signals[i], &sa, NULL);
    }
}

int tmpfiles_add(const char *path, int *slot, err_t *e)
{
    *slot = -1;
    if (strlen(path) >= PATH_MAX) return err_set(e, ERR_RANGE, "%.200s...: path longer than %d bytes", path, PATH_MAX - 1);
    if (!installed) install();
    for (int i = 0; i < TMPFILES_MAX; i++) {
        if (used[i]) continue;
        memcpy(paths[i], path, strlen(path) + 1);
        used[i] = 1;   /* set after the copy, so a handler never reads a half-written path */
        *slot = i;
        return ERR_OK;
    }
    return err_set(e, ERR_RANGE, "%s: more than %d temporary files open at once", path, TMPFILES_MAX);
}

int tmpfiles_mkstemp(char *template, int *slot, err_t *e)
{
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) sigaddset(&block, signals[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(template);
    int rc = fd < 0 ? err_set(e, ERR_IO, "%s: %s", template, strerror(errno)) : tmpfiles_add(template, slot, e);
    if (rc && fd >= 0) {
        close(fd);
        unlink(template);
        fd = -1;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return fd;
}

void tmpfiles_forget(int slot)
{
    if (slot >= 0 && slot < TMPFILES_MAX) used[slot] = 0;
}

void tmpfiles_set_child(pid_t pid) { child = (sig_atomic_t)pid; }
