/* fuzz_request.c — libFuzzer target for the server's request-body parser:
 * the first byte picks the endpoint (even: completions, odd: chat), the rest
 * is the HTTP body.  Parsing must succeed or fail with a 4xx/5xx error that
 * names a field, never crash or leak.  The corpus in
 * tests/fuzz/corpus/fuzz_request/ is replayed by `make test`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    srv_kind kind = (data[0] & 1) ? SRV_CHAT : SRV_COMPLETIONS;
    srv_limits lim = {32, 16, 4096, 4096};
    srv_request r;
    srv_error e;
    if (srv_request_parse((const char *)data + 1, size - 1, kind, &lim, &r, &e)) {
        /* Invariants the server relies on. */
        if (r.n < 1 || r.n > lim.max_n || r.n_stop > SRV_MAX_STOP ||
            r.logprobs > SRV_MAX_LOGPROBS || (kind == SRV_CHAT && !r.messages_json) ||
            (kind == SRV_COMPLETIONS && !r.prompt && r.n_prompt_ids <= 0))
            abort();
        srv_request_free(&r);
    } else if (e.http < 400 || e.http > 599) {
        abort();
    }
    return 0;
}
