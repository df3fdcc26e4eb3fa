/* fuzz_tokenizer.c — libFuzzer target: arbitrary bytes as tokenizer.json
 * (and, after a 0x00 separator, as text to encode and as a chat template).
 * Loading must fail cleanly or succeed; encode/decode/render must never
 * crash.  The corpus in tests/fuzz/corpus/fuzz_tokenizer/ is replayed by
 * `make test`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "octet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    const char *sep = memchr(p, 0, size);
    size_t json_len = sep ? (size_t)(sep - p) : size;
    const char *text = sep ? sep + 1 : "";
    size_t text_len = sep ? size - json_len - 1 : 0;

    oct_tokenizer *tok = NULL;
    oct_error err;
    if (oct_tokenizer_load_json(p, json_len, NULL, 0, &tok, &err) == OCT_OK) {
        oct_token_ids ids = {0};
        if (oct_tokenizer_encode(tok, text, text_len, true, &ids, &err) == OCT_OK) {
            char *s = NULL;
            if (oct_tokenizer_decode(tok, ids.ids, ids.n, false, &s, NULL, &err) == OCT_OK)
                oct_tokenizer_text_free(s);
            oct_detokenizer *d = NULL;
            if (oct_detokenizer_new(tok, true, &d, &err) == OCT_OK) {
                const char *c;
                size_t n;
                for (int64_t i = 0; i < ids.n; i++)
                    oct_detokenizer_push(d, ids.ids[i], &c, &n, &err);
                oct_detokenizer_flush(d, &c, &n, &err);
                oct_detokenizer_free(d);
            }
        }
        /* arbitrary ids, including unknown ones */
        int32_t raw[16];
        size_t n_raw = text_len / 4 < 16 ? text_len / 4 : 16;
        memcpy(raw, text, n_raw * 4);
        char *s = NULL;
        if (oct_tokenizer_decode(tok, raw, (int64_t)n_raw, true, &s, NULL, &err) == OCT_OK)
            oct_tokenizer_text_free(s);
        oct_token_ids_free(&ids);
        oct_tokenizer_free(tok);
    }
    /* the text part as a chat template */
    char *tpl = malloc(text_len + 1);
    if (tpl) {
        memcpy(tpl, text, text_len);
        tpl[text_len] = 0;
        char *out = NULL;
        if (oct_chat_render_json(NULL, tpl,
                                 "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": "
                                 "\"assistant\", \"content\": \"yo\"}]",
                                 "{\"bos_token\": \"<s>\"}", true, &out, NULL, &err) == OCT_OK)
            oct_tokenizer_text_free(out);
        free(tpl);
    }
    return 0;
}
