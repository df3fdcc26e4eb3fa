/* Replays a libFuzzer corpus without libFuzzer, so `make test` (and ASan) run
 * every corpus file through the target.  The corpus lives in
 * tests/fuzz/corpus/<name>/ where <name> is this executable's name without
 * the "_replay" suffix (fuzz_safetensors_replay -> corpus/fuzz_safetensors). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    (void)argc;
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    char *suffix = strstr(name, "_replay");
    if (suffix)
        *suffix = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "no corpus directory %s\n", dir);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t size = 0;
        unsigned char *buf = testlib_read_file(path, &size);
        if (!buf)
            continue;
        LLVMFuzzerTestOneInput(buf, size);
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d inputs from %s\n", n, dir);
    printf("%d passed, 0 failed\n", n);
    return 0;
}
