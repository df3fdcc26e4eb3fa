/* fuzz_chat_template.c — libFuzzer target: arbitrary bytes as a chat
 * template, rendered with a short conversation.  Rendering must succeed or
 * fail cleanly; the nesting limits (256 blocks, 256 expression levels, 1024
 * evaluation levels, 1000 value levels) and the step budget are all within
 * reach of small inputs (the corpus in tests/fuzz/corpus/fuzz_chat_template/
 * holds one at each, replayed by `make test`).  `make fuzz` builds the library
 * with a step budget of 2e6 (JINJA_MAX_STEPS), so a budget-bound render ends
 * within libFuzzer's timeout under ASan; the replay keeps the real 5e7. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "octet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *tpl = malloc(size + 1);
    if (!tpl)
        return 0;
    memcpy(tpl, data, size);
    tpl[size] = 0;
    char *out = NULL;
    oct_error err;
    if (oct_chat_render_json(
            NULL, tpl,
            "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": "
            "\"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"yo\"}]}]",
            "{\"bos_token\": \"<s>\", \"tools\": [{\"name\": \"f\"}]}", true, &out, NULL,
            &err) == OCT_OK)
        oct_tokenizer_text_free(out);
    free(tpl);
    return 0;
}
