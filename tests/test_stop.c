/* test_stop.c — stop strings (src/engine/stop.c), as the server and
 * `octet generate` apply them: the earliest match, searched from where the
 * previous search ended, and the tail held back while it could still grow
 * into a stop string. */
#include <stdint.h>
#include <string.h>

#include "octet.h"
#include "testlib.h"

static void test_find(void)
{
    const char *stops[] = {"END", "\n\n", "", "x"};
    const char *t = "ab\n\ncdENDx";
    const size_t n = strlen(t);
    CHECK_EQ_INT((long long)oct_stop_find(t, n, 0, stops, 2), 2); /* "\n\n" before "END" */
    CHECK_EQ_INT((long long)oct_stop_find(t, n, 0, stops + 3, 1), 9);
    /* searched up to byte 6 before: "END" (6..8) ends after it, "\n\n" does not */
    CHECK_EQ_INT((long long)oct_stop_find(t, n, 6, stops, 2), 6);
    /* a match across the boundary of the previous search: "EN" | "D" */
    CHECK_EQ_INT((long long)oct_stop_find(t, 9, 8, stops, 1), 6);
    CHECK(oct_stop_find(t, 5, 0, stops, 1) == SIZE_MAX);
    CHECK(oct_stop_find(t, n, 0, stops + 2, 1) == SIZE_MAX); /* "" never matches */
    CHECK(oct_stop_find(t, n, 0, stops, 0) == SIZE_MAX);
}

static void test_hold(void)
{
    const char *stops[] = {"<|end|>", "ab"};
    CHECK_EQ_INT((long long)oct_stop_hold("text <|e", 8, stops, 2), 3);
    CHECK_EQ_INT((long long)oct_stop_hold("text a", 6, stops, 2), 1);
    CHECK_EQ_INT((long long)oct_stop_hold("text <|end|", 11, stops, 2), 6);
    CHECK_EQ_INT((long long)oct_stop_hold("text", 4, stops, 2), 0);
    CHECK_EQ_INT((long long)oct_stop_hold("<|", 2, stops, 1), 2); /* shorter than the stop */
    const char *empty[] = {""};
    CHECK_EQ_INT((long long)oct_stop_hold("abc", 3, empty, 1), 0);
}

int main(void)
{
    RUN(test_find);
    RUN(test_hold);
    return testlib_finish();
}
