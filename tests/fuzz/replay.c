/* replay — a fuzz target's corpus replayed without libFuzzer: every file named, or in a directory
 * named, fed once to LLVMFuzzerTestOneInput, in name order. Built with each target in the sanitizer
 * build so `make test` replays the committed seeds and corpora (tests/e2e/fuzz_corpora.sh). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t replayed;

static void replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        exit(2);
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 65536 > cap) {
            cap = 2 * cap + 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) abort();
            buf = nb;
        }
        got = fread(buf + len, 1, 65536, fp);
        len += got;
    } while (got == 65536);
    fclose(fp);
    LLVMFuzzerTestOneInput(buf ? buf : (const uint8_t *)"", len);
    free(buf);
    replayed++;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void replay(const char *path)
{
    struct stat st;
    if (stat(path, &st)) return;   /* a target without a committed corpus yet */
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        names = realloc(names, (n + 1) * sizeof *names);
        size_t l = strlen(path) + strlen(de->d_name) + 2;
        if (!names || !(names[n] = malloc(l))) abort();
        snprintf(names[n++], l, "%s/%s", path, de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        replay_file(names[i]);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) replay(argv[i]);
    printf("%s: %zu inputs replayed\n", argv[0], replayed);
    return 0;
}
