/* tokenize.c — `octet tokenize`: text -> token ids exactly as Hugging Face
 * tokenizers.Tokenizer.from_file("DIR/tokenizer.json").encode(text).ids
 * (post-processor applied, nothing else added), plus a speed benchmark, and
 * --chat: the model's chat template rendered with messages (as transformers'
 * apply_chat_template), printed as text or, with --json, as the ids
 * apply_chat_template(tokenize=True) gives (no special tokens added: the
 * template writes its own BOS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: octet tokenize --model DIR (--text TEXT | --file FILE) [--json]\n"
                 "                      [--no-special-tokens] [--decode] [--bench [--seconds S]]\n"
                 "       octet tokenize --model DIR --chat MESSAGES [--no-generation-prompt]\n"
                 "                      [--chat-extra JSON] [--json]\n"
                 "  --text TEXT          encode one text\n"
                 "  --file FILE          encode each line of FILE (without its '\\n') as one text\n"
                 "  --json               one JSON array of ids per line (default: ids separated by "
                 "spaces)\n"
                 "  --no-special-tokens  do not apply the post-processor (no BOS etc.)\n"
                 "  --decode             also print the decoded text of each line's ids\n"
                 "  --bench              time encoding of the input (default: built-in English)\n"
                 "                       on one core and print MB/s\n"
                 "  --chat MESSAGES      render the chat template with a JSON array of messages\n"
                 "                       (inline, or @FILE) and print the text; with --json,\n"
                 "                       its ids (encoded without adding special tokens)\n"
                 "  --no-generation-prompt  add_generation_prompt=false (default: true)\n"
                 "  --chat-extra JSON    extra template variables, a JSON object (inline or\n"
                 "                       @FILE), e.g. '{\"enable_thinking\": false, \"tools\": "
                 "[...]}'\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            char *p = realloc(buf, cap + 1);
            if (!p) {
                free(buf);
                buf = NULL;
            }
            buf = p;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

static void print_ids(const oct_token_ids *ids, bool json)
{
    if (json)
        putchar('[');
    for (int64_t i = 0; i < ids->n; i++)
        printf(i ? (json ? ",%d" : " %d") : "%d", (int)ids->ids[i]);
    if (json)
        putchar(']');
    putchar('\n');
}

/* An argument that is inline text or, as "@FILE", FILE's contents; caller
 * frees *owned (NULL for inline text). */
static const char *inline_or_file(const char *arg, char **owned)
{
    size_t len;
    *owned = NULL;
    if (arg[0] != '@')
        return arg;
    *owned = read_all(arg + 1, &len);
    if (!*owned)
        fprintf(stderr, "octet tokenize: cannot read %s\n", arg + 1);
    return *owned;
}

/* --chat: renders and prints the text, or its ids with --json. */
static int chat(const oct_tokenizer *tok, const char *messages_arg, const char *extra_arg,
                bool add_generation_prompt, bool json)
{
    char *msgs_owned, *extra_owned = NULL, *text = NULL;
    const char *msgs = inline_or_file(messages_arg, &msgs_owned);
    const char *extra = extra_arg ? inline_or_file(extra_arg, &extra_owned) : NULL;
    oct_token_ids ids = {0};
    oct_error err;
    size_t len = 0;
    int rc = 1;
    if (!msgs || (extra_arg && !extra))
        goto out;
    if (oct_chat_render_json(tok, NULL, msgs, extra, add_generation_prompt, &text, &len, &err) !=
            OCT_OK ||
        (json && oct_tokenizer_encode(tok, text, len, false, &ids, &err) != OCT_OK)) {
        fprintf(stderr, "octet tokenize: %s\n", err.message);
        goto out;
    }
    if (json)
        print_ids(&ids, true);
    else
        fwrite(text, 1, len, stdout);
    rc = 0;
out:
    oct_token_ids_free(&ids);
    oct_tokenizer_text_free(text);
    free(msgs_owned);
    free(extra_owned);
    return rc;
}

/* Built-in English for --bench when no input is given. */
static const char k_bench_text[] =
    "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst "
    "of times; it was the age of wisdom, it was the age of foolishness. In 1869, the railway "
    "reached the west coast, and travel that had taken months now took about a week. "
    "Researchers measured 3.14 liters of water at 25 degrees, then repeated the experiment "
    "twelve times to be sure. \"Don't worry,\" she said, \"we'll be there by half past "
    "eight.\"\n";

static int bench(const oct_tokenizer *tok, const char *text, size_t len, double seconds)
{
    /* Repeat a short text to at least 1 MB so one encode call dominates. */
    char *big = NULL;
    size_t big_len = len;
    if (len < (1 << 20)) {
        size_t reps = ((size_t)1 << 20) / (len ? len : 1) + 1;
        big = malloc(reps * len + 1);
        if (!big)
            return 1;
        for (size_t i = 0; i < reps; i++)
            memcpy(big + i * len, text, len);
        big_len = reps * len;
        big[big_len] = 0;
        text = big;
    }
    oct_token_ids ids = {0};
    oct_error err;
    double t0 = now_s(), t1 = t0;
    size_t bytes = 0, tokens = 0;
    int rc = 0;
    while (t1 - t0 < seconds) {
        if (oct_tokenizer_encode(tok, text, big_len, true, &ids, &err) != OCT_OK) {
            fprintf(stderr, "octet tokenize: %s\n", err.message);
            rc = 1;
            break;
        }
        bytes += big_len;
        tokens += (size_t)ids.n;
        t1 = now_s();
    }
    if (!rc)
        printf("encode: %.2f MB/s, %.0f tokens/s (%zu bytes per call, %.2f bytes/token, one "
               "thread)\n",
               (double)bytes / (t1 - t0) / 1e6, (double)tokens / (t1 - t0), big_len,
               tokens ? (double)bytes / (double)tokens : 0.0);
    oct_token_ids_free(&ids);
    free(big);
    return rc;
}

int cli_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *file = NULL, *chat_msgs = NULL, *chat_extra = NULL;
    bool json = false, special = true, decode = false, do_bench = false, gen_prompt = true;
    double seconds = 2.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--model") == 0 && has_val) {
            model = argv[++i];
        } else if (strcmp(a, "--text") == 0 && has_val) {
            text = argv[++i];
        } else if (strcmp(a, "--file") == 0 && has_val) {
            file = argv[++i];
        } else if (strcmp(a, "--chat") == 0 && has_val) {
            chat_msgs = argv[++i];
        } else if (strcmp(a, "--chat-extra") == 0 && has_val) {
            chat_extra = argv[++i];
        } else if (strcmp(a, "--no-generation-prompt") == 0) {
            gen_prompt = false;
        } else if (strcmp(a, "--seconds") == 0 && has_val) {
            seconds = atof(argv[++i]);
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--no-special-tokens") == 0) {
            special = false;
        } else if (strcmp(a, "--decode") == 0) {
            decode = true;
        } else if (strcmp(a, "--bench") == 0) {
            do_bench = true;
        } else {
            fprintf(stderr, "octet tokenize: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    bool chat_mode = chat_msgs != NULL;
    if (!model || (!do_bench && !chat_mode && !text == !file) || (text && file) ||
        (chat_mode && (text || file || do_bench || decode)) || (chat_extra && !chat_mode)) {
        usage(stderr);
        return 2;
    }
    oct_error err;
    oct_tokenizer *tok = NULL;
    if (oct_tokenizer_load(model, &tok, &err) != OCT_OK) {
        fprintf(stderr, "octet tokenize: %s\n", err.message);
        return 1;
    }
    if (chat_mode) {
        int chat_rc = chat(tok, chat_msgs, chat_extra, gen_prompt, json);
        oct_tokenizer_free(tok);
        return chat_rc;
    }
    char *data = NULL;
    size_t data_len = 0;
    if (file) {
        data = read_all(file, &data_len);
        if (!data) {
            fprintf(stderr, "octet tokenize: cannot read %s\n", file);
            oct_tokenizer_free(tok);
            return 1;
        }
    }
    int rc = 0;
    if (do_bench) {
        const char *t = text ? text : data ? data : k_bench_text;
        size_t n = text ? strlen(text) : data ? data_len : sizeof k_bench_text - 1;
        rc = bench(tok, t, n, seconds);
        goto out;
    }
    oct_token_ids ids = {0};
    const char *p = text ? text : data;
    size_t remaining = text ? strlen(text) : data_len;
    bool single = text != NULL;
    while (rc == 0 && (single || remaining > 0)) {
        size_t line_len = remaining;
        size_t advance = remaining;
        if (!single) {
            const char *nl = memchr(p, '\n', remaining);
            if (nl) {
                line_len = (size_t)(nl - p);
                advance = line_len + 1;
            }
        }
        if (oct_tokenizer_encode(tok, p, line_len, special, &ids, &err) != OCT_OK) {
            fprintf(stderr, "octet tokenize: %s\n", err.message);
            rc = 1;
            break;
        }
        print_ids(&ids, json);
        if (decode) {
            char *s = NULL;
            if (oct_tokenizer_decode(tok, ids.ids, ids.n, false, &s, NULL, &err) != OCT_OK) {
                fprintf(stderr, "octet tokenize: %s\n", err.message);
                rc = 1;
                break;
            }
            printf("%s\n", s);
            oct_tokenizer_text_free(s);
        }
        p += advance;
        remaining -= advance;
        single = false;
    }
    oct_token_ids_free(&ids);
out:
    free(data);
    oct_tokenizer_free(tok);
    return rc;
}
