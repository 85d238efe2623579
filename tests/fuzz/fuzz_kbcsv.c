/* libFuzzer target: the measured-CSV reader (validation/kbcsv.c: header lines, columns in any order,
 * rows) on arbitrary bytes, written as DIR/h200/x.csv in a private temporary directory. Either loads
 * or fails with a message naming the file; never crashes, leaks or hangs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "validation/kbcsv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], file[96];

static void cleanup(void)
{
    unlink(file);
    rmdir(dir);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_kbcsv.XXXXXX");
        if (!mkdtemp(dir)) abort();
        strcat(dir, "/h200");
        if (mkdir(dir, 0700)) abort();
        snprintf(file, sizeof file, "%s/x.csv", dir);
        atexit(cleanup);
    }
    FILE *fp = fopen(file, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp)) abort();
    kbset_t *s;
    err_t e;
    if (kbset_load_dir(dir, NULL, &s, &e)) {
        if (!strstr(e.msg, "x.csv") && !strstr(e.msg, "h200")) abort();
    } else {
        for (size_t i = 0; i < kbset_n_rows(s); i++)
            if (!kbset_row(s, i)) abort();
        kbset_free(s);
    }
    return 0;
}
