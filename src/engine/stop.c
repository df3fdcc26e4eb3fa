/* stop.c — stop strings as vLLM applies them to the detokenized text of a
 * sequence: the output ends before the earliest occurrence of any of them,
 * and a streaming front end holds back a tail that could still grow into one.
 * The server (src/server/job.c) and `octet generate` both match with these. */
#include <stdint.h>
#include <string.h>

#include "octet.h"

size_t oct_stop_find(const char *text, size_t len, size_t old, const char *const *stops, int n)
{
    size_t best = SIZE_MAX;
    for (int i = 0; i < n; i++) {
        const size_t sl = strlen(stops[i]);
        const size_t start = old >= sl ? old - sl + 1 : 0;
        if (sl == 0 || len < start + sl)
            continue;
        const char *hit = memmem(text + start, len - start, stops[i], sl);
        if (hit && (size_t)(hit - text) < best)
            best = (size_t)(hit - text);
    }
    return best;
}

size_t oct_stop_hold(const char *text, size_t len, const char *const *stops, int n)
{
    size_t hold = 0;
    for (int i = 0; i < n; i++) {
        const size_t sl = strlen(stops[i]);
        for (size_t k = sl > 0 ? (sl - 1 < len ? sl - 1 : len) : 0; k > hold; k--)
            if (memcmp(text + len - k, stops[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}
