/* bench_open.c — `octet bench open`: time to open a checkpoint folder of many
 * tensors (oct_tensor_set_open: every shard header, the index) and to look up
 * every tensor by name, on synthetic checkpoints whose headers are real and
 * whose data sections are sparse files (bench/sparse_ckpt.h).
 *
 *   octet bench open [--tensors N --shards S] [--repeat R] [--dir DIR] [--json]
 *
 * Each case runs beside a baseline of 1,000 tensors over proportionally fewer
 * shards, measured in the same run; "ratio" is the cost per tensor of the case
 * over that of its baseline: about 1 when opening is linear, about N / 1,000
 * when it is quadratic.  Default cases: one file of 32,000 tensors and
 * 100,000 tensors over 163 shards (DeepSeek-V3's FP8 checkpoint has about
 * 91,000 over 163). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sparse_ckpt.h"
#include "bench.h"
#include "octet.h"

typedef struct open_case {
    int64_t tensors;
    int shards;
    double open_s, find_s; /* best of the repeats */
} open_case;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every tensor name, in one block: names[i] points into it. */
static char **make_names(int64_t n)
{
    char **names = malloc((size_t)n * sizeof(char *) + (size_t)n * 128);
    if (!names)
        return NULL;
    char *text = (char *)(names + n);
    for (int64_t i = 0; i < n; i++) {
        names[i] = text + i * 128;
        sparse_ckpt_name(i, names[i], 128);
    }
    return names;
}

/* One open + lookup of every name; false on any error or missing tensor. */
static int time_once(const char *dir, char **names, int64_t n, double *open_s, double *find_s)
{
    oct_tensor_set *ts = NULL;
    oct_error err;
    double t0 = now_s();
    if (oct_tensor_set_open(dir, &ts, &err) != OCT_OK) {
        fprintf(stderr, "octet bench open: %s\n", err.message);
        return 1;
    }
    double t1 = now_s();
    int64_t found = 0;
    for (int64_t i = 0; i < n; i++)
        found += oct_tensor_set_find(ts, names[i]) != NULL;
    *find_s = now_s() - t1;
    *open_s = t1 - t0;
    int bad = found != n || oct_tensor_set_count(ts) != n;
    if (bad)
        fprintf(stderr, "octet bench open: found %lld of %lld tensors\n", (long long)found,
                (long long)n);
    oct_tensor_set_free(ts);
    return bad;
}

static int run_case(const char *root, open_case *c, int repeat)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/t%lld_s%d", root, (long long)c->tensors, c->shards);
    char **names = make_names(c->tensors);
    int bad = !names || mkdir(dir, 0755) != 0 || sparse_ckpt_write(dir, c->tensors, c->shards);
    if (bad)
        fprintf(stderr, "octet bench open: cannot write %s\n", dir);
    c->open_s = c->find_s = 1e30;
    for (int r = 0; r < repeat && !bad; r++) {
        double o = 0, f = 0;
        bad = time_once(dir, names, c->tensors, &o, &f);
        c->open_s = o < c->open_s ? o : c->open_s;
        c->find_s = f < c->find_s ? f : c->find_s;
    }
    sparse_ckpt_remove(dir, c->shards);
    free(names);
    return bad;
}

static double per_tensor(const open_case *c, double s)
{
    return s / (double)c->tensors;
}

static void print_row(const open_case *c, const open_case *base, int json, int first)
{
    double ro = per_tensor(c, c->open_s) / per_tensor(base, base->open_s);
    double rf = per_tensor(c, c->find_s) / per_tensor(base, base->find_s);
    if (json) {
        printf("%s{\"tensors\": %lld, \"shards\": %d, \"open_s\": %.6f, \"find_all_s\": %.6f, "
               "\"open_ratio\": %.3f, \"find_ratio\": %.3f}",
               first ? "" : ", ", (long long)c->tensors, c->shards, c->open_s, c->find_s, ro, rf);
        return;
    }
    printf("%9lld %7d %10.4f %12.3f %10.2f %12.4f %12.3f %10.2f\n", (long long)c->tensors,
           c->shards, c->open_s, per_tensor(c, c->open_s) * 1e6, ro, c->find_s,
           per_tensor(c, c->find_s) * 1e9, rf);
}

static void usage(FILE *o)
{
    fprintf(o, "usage: octet bench open [--tensors N --shards S] [--repeat R] [--dir DIR] "
               "[--json]\n"
               "  --tensors N  tensors of the case (default: 32000 in 1 file and 100000 in 163)\n"
               "  --shards S   files of the case (default 1)\n"
               "  --repeat R   best of R opens (default 3)\n"
               "  --dir DIR    where to write the sparse checkpoints (default /tmp)\n"
               "  --json       print JSON instead of a table\n");
}

static int parse_args(int argc, char **argv, open_case *custom, int *repeat, const char **dir,
                      int *json)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--tensors") == 0 && i + 1 < argc)
            custom->tensors = strtoll(argv[++i], NULL, 10);
        else if (strcmp(a, "--shards") == 0 && i + 1 < argc)
            custom->shards = atoi(argv[++i]);
        else if (strcmp(a, "--repeat") == 0 && i + 1 < argc)
            *repeat = atoi(argv[++i]);
        else if (strcmp(a, "--dir") == 0 && i + 1 < argc)
            *dir = argv[++i];
        else if (strcmp(a, "--json") == 0)
            *json = 1;
        else
            return strcmp(a, "--help") == 0 ? 1 : 2;
    }
    if (custom->tensors < 0 || custom->shards < 1 || custom->shards > 100000 || *repeat < 1 ||
        (custom->tensors > 0 && custom->tensors < custom->shards))
        return 2;
    return 0;
}

/* The baseline of `c`: 1,000 tensors, shards scaled by the same factor. */
static open_case baseline_of(const open_case *c)
{
    open_case b = {.tensors = 1000};
    b.shards = (int)(((int64_t)c->shards * 1000 + c->tensors / 2) / c->tensors);
    b.shards = b.shards < 1 ? 1 : b.shards;
    return b;
}

int bench_open_main(int argc, char **argv)
{
    open_case cases[2] = {{.tensors = 32000, .shards = 1}, {.tensors = 100000, .shards = 163}};
    open_case custom = {.shards = 1};
    int repeat = 3, json = 0, n_cases = 2;
    const char *dir = "/tmp";
    int rc = parse_args(argc, argv, &custom, &repeat, &dir, &json);
    if (rc) {
        usage(rc == 1 ? stdout : stderr);
        return rc == 1 ? 0 : 2;
    }
    if (custom.tensors > 0) {
        cases[0] = custom;
        n_cases = 1;
    }
    char root[1024];
    snprintf(root, sizeof root, "%s/octet_bench_open_XXXXXX", dir);
    if (!mkdtemp(root)) {
        fprintf(stderr, "octet bench open: cannot make a folder under %s\n", dir);
        return 1;
    }
    if (json)
        printf("{\"repeat\": %d, \"results\": [", repeat);
    else
        printf("%9s %7s %10s %12s %10s %12s %12s %10s\n", "tensors", "shards", "open s",
               "us/tensor", "ratio", "find-all s", "ns/lookup", "ratio");
    for (int i = 0; i < n_cases && rc == 0; i++) {
        open_case base = baseline_of(&cases[i]);
        rc = run_case(root, &base, repeat) || run_case(root, &cases[i], repeat);
        if (rc == 0) {
            print_row(&base, &base, json, i == 0);
            print_row(&cases[i], &base, json, 0);
        }
    }
    if (json)
        printf("]}\n");
    rmdir(root);
    return rc;
}
