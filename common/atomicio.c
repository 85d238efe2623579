#include "common/atomicio.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tmpfiles.h"

struct atomicio {
    FILE *fp;
    char *path;
    char *tmp;
    int slot;        /* in common/tmpfiles, -1 for stdout */
    int is_stdout;
};

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

/* The rule of atomicio.h; *mode receives the permissions to keep (0 when the path is new). */
static int check_target(const char *path, mode_t *mode, err_t *e)
{
    struct stat st;
    *mode = 0;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return ERR_OK;
        return err_set(e, ERR_IO, "%s: cannot inspect the output path: %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return err_set(e, ERR_IO, "%s: is a symbolic link; outputs never write through links (name the target itself)", path);
    if (!S_ISREG(st.st_mode))
        return err_set(e, ERR_IO, "%s: is %s, not replaced (outputs are regular files; '-' is standard output)", path,
                       kind_of(st.st_mode));
    /* root may write anything: a file with no write bit is read-only by intent all the same */
    if (!(st.st_mode & 0222) || access(path, W_OK) != 0)
        return err_set(e, ERR_IO, "%s: is read-only, not replaced (remove it or choose another path)", path);
    if (st.st_nlink > 1)
        return err_set(e, ERR_IO, "%s: has %ju hard links, not replaced (the other names would keep the old contents)",
                       path, (uintmax_t)st.st_nlink);
    *mode = st.st_mode & 07777;
    return ERR_OK;
}

int atomicio_check(const char *path, err_t *e)
{
    if (!path || !*path) return err_set(e, ERR_INVAL, "empty output path");
    mode_t mode;
    return strcmp(path, "-") ? check_target(path, &mode, e) : ERR_OK;
}

static void atomicio_free(atomicio_t *f)
{
    tmpfiles_forget(f->slot);
    free(f->path);
    free(f->tmp);
    free(f);
}

int atomicio_open(const char *path, atomicio_t **out, err_t *e)
{
    *out = NULL;
    if (!path || !*path) return err_set(e, ERR_INVAL, "atomicio_open: empty path");
    mode_t keep;
    int is_stdout = !strcmp(path, "-");
    int rc = is_stdout ? ERR_OK : check_target(path, &keep, e);
    if (rc) return rc;
    atomicio_t *f = calloc(1, sizeof *f);
    size_t n = strlen(path) + 16;
    if (f) { f->slot = -1; f->path = strdup(path); f->tmp = malloc(n); }
    if (!f || !f->path || !f->tmp) {
        if (f) atomicio_free(f);
        return err_set(e, ERR_NOMEM, "atomicio_open: out of memory");
    }
    if (is_stdout) {
        f->is_stdout = 1;
        f->fp = stdout;
        snprintf(f->tmp, n, "%s", path);
        *out = f;
        return ERR_OK;
    }
    snprintf(f->tmp, n, "%s.tmpXXXXXX", path);
    int fd = tmpfiles_mkstemp(f->tmp, &f->slot, e);
    if (fd < 0) {
        atomicio_free(f);
        return e ? err_prefix(e, "%s: cannot create", path) : ERR_IO;
    }
    /* mkstemp creates 0600; outputs get the replaced file's permissions, or 0666 less the umask. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, keep ? keep : 0666 & ~mask) != 0) rc = err_set(e, ERR_IO, "%s: cannot set permissions: %s", f->tmp, strerror(errno));
    if (!rc && !(f->fp = fdopen(fd, "w"))) rc = err_set(e, ERR_IO, "%s: cannot open: %s", f->tmp, strerror(errno));
    if (rc) {
        close(fd);
        unlink(f->tmp);
        atomicio_free(f);
        return rc;
    }
    *out = f;
    return ERR_OK;
}

FILE *atomicio_file(atomicio_t *f) { return f->fp; }

const char *atomicio_tmp_path(const atomicio_t *f) { return f->tmp; }

int atomicio_finish(atomicio_t *f, err_t *e)
{
    int bad = ferror(f->fp) || fflush(f->fp) != 0 || (!f->is_stdout && fsync(fileno(f->fp)) != 0);
    int saved = errno;
    if (!f->is_stdout && fclose(f->fp) != 0 && !bad) { bad = 1; saved = errno; }
    f->fp = NULL;
    if (!bad) return ERR_OK;
    int rc = err_set(e, ERR_IO, "%s: write failed: %s", f->path, saved ? strerror(saved) : "stream error");
    atomicio_abort(f);
    return rc;
}

int atomicio_publish(atomicio_t *f, err_t *e)
{
    int rc = ERR_OK;
    mode_t mode;
    if (!f->is_stdout && !(rc = check_target(f->path, &mode, e)) && rename(f->tmp, f->path) != 0)
        rc = err_set(e, ERR_IO, "%s: cannot rename %s onto it: %s", f->path, f->tmp, strerror(errno));
    if (rc) {
        atomicio_abort(f);
        return rc;
    }
    atomicio_free(f);
    return ERR_OK;
}

int atomicio_commit(atomicio_t *f, err_t *e)
{
    int rc = atomicio_finish(f, e);
    return rc ? rc : atomicio_publish(f, e);
}

void atomicio_abort(atomicio_t *f)
{
    if (!f) return;
    if (!f->is_stdout) {
        if (f->fp) fclose(f->fp);
        unlink(f->tmp);
    }
    atomicio_free(f);
}

int atomicio_write(const char *path, const void *buf, size_t len, err_t *e)
{
    atomicio_t *f;
    int rc = atomicio_open(path, &f, e);
    if (rc) return rc;
    if (len && fwrite(buf, 1, len, f->fp) != len) {
        atomicio_abort(f);
        return err_set(e, ERR_IO, "%s: short write", path);
    }
    return atomicio_commit(f, e);
}

int atomicio_read_all(const char *path, size_t max_bytes, char **out, size_t *len, err_t *e)
{
    *out = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return err_set(e, ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (n > max_bytes) {
            free(buf); fclose(fp);
            return err_set(e, ERR_RANGE, "%s: larger than %zu bytes", path, max_bytes);
        }
        if (got == 0) break;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf) return err_set(e, ERR_NOMEM, "%s: out of memory", path);
    if (bad) { free(buf); return err_set(e, ERR_IO, "%s: read error", path); }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return ERR_OK;
}
