/* test_cli.c — the command line as users and other tools call it: the JSON
 * fields docs/CLI.md documents (generate, eval, inspect, tokenize), exit codes, and
 * error messages that name what is wrong.  Runs $BUILD/octet (so `make asan`
 * checks the ASan binary) on the bundled demo model. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kernels/cuda/cuda_api.h"
#include "testlib.h"

static char g_bin[256];

/* Runs `octet ARGS`, captures stdout (and stderr when want_err); returns the exit status. */
static int run(const char *args, bool want_err, char **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s", g_bin, args, want_err ? "2>&1" : "2>/dev/null");
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 1024) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = 0;
    int st = pclose(f);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *run_json(const char *args)
{
    char *out = NULL;
    int rc = run(args, false, &out);
    json_error_t je;
    json_t *j = rc == 0 ? json_loads(out, JSON_DECODE_ANY, &je) : NULL;
    if (!j)
        fprintf(stderr, "octet %s -> rc %d, output: %.300s\n", args, rc, out);
    free(out);
    return j;
}

static void test_generate_json(void)
{
    json_t *j = run_json("generate --model models/demo --prompt 'The jury said' --max-tokens 8 "
                         "--temperature 0 --json");
    REQUIRE(j);
    CHECK(json_array_size(json_object_get(j, "prompt_ids")) > 0);
    CHECK(json_array_size(json_object_get(j, "output_ids")) == 8);
    CHECK(json_is_string(json_object_get(j, "text")));
    json_t *t = json_object_get(j, "timings");
    CHECK(json_is_number(json_object_get(t, "load_s")) &&
          json_is_number(json_object_get(t, "ttft_ms")) &&
          json_is_number(json_object_get(t, "prefill_tok_s")) &&
          json_is_number(json_object_get(t, "decode_tok_s")));
    /* --prompt-ids gives the same continuation as the text it encodes */
    char args[512];
    json_t *p = json_object_get(j, "prompt_ids");
    size_t o = 0;
    o += (size_t)snprintf(args + o, sizeof args - o, "generate --model models/demo --prompt-ids '");
    for (size_t i = 0; i < json_array_size(p); i++)
        o += (size_t)snprintf(args + o, sizeof args - o, "%s%lld", i ? "," : "",
                              (long long)json_integer_value(json_array_get(p, i)));
    snprintf(args + o, sizeof args - o, "' --max-tokens 8 --temperature 0 --json");
    json_t *k = run_json(args);
    CHECK(k && json_equal(json_object_get(j, "output_ids"), json_object_get(k, "output_ids")));
    json_decref(k);
    json_decref(j);
}

static void test_eval_json_and_token_ids(void)
{
    /* the first 300 tokens as ids: --token-ids and --text give the same ppl */
    json_t *j = run_json("eval --model models/demo --text models/demo/eval.txt --max-tokens 300 "
                         "--quantization fp8_per_block --json");
    REQUIRE(j);
    CHECK(json_real_value(json_object_get(j, "ppl")) > 1.0);
    /* windows of 256: 255 + 43 scored positions */
    CHECK(json_integer_value(json_object_get(j, "tokens")) == 298);
    CHECK(json_is_number(json_object_get(j, "ppl_bf16")) &&
          json_is_number(json_object_get(j, "kld")) &&
          json_is_number(json_object_get(j, "top1_agree")));
    json_t *b =
        run_json("eval --model models/demo --text models/demo/eval.txt --max-tokens 300 --json");
    CHECK(b && json_real_value(json_object_get(b, "ppl")) ==
                   json_real_value(json_object_get(j, "ppl_bf16")));
    CHECK(b && !json_object_get(b, "kld")); /* no comparison without a quantization */
    json_decref(b);
    /* --token-ids: whitespace-separated ids */
    FILE *f = fopen("build/cli_ids.txt", "w");
    REQUIRE(f);
    for (int i = 0; i < 100; i++)
        fprintf(f, "%d%s", 1 + (i * 37) % 6000, i % 10 == 9 ? "\n" : " ");
    fclose(f);
    json_t *t =
        run_json("eval --model models/demo --token-ids build/cli_ids.txt --window 64 --json");
    CHECK(t && json_integer_value(json_object_get(t, "tokens")) == 63 + 35);
    json_decref(t);
    json_decref(j);
}

/* A pre-quantized export has no BF16 twin inside octet: --baseline-model
 * names one, and the comparison fields appear. */
static void test_eval_baseline_model(void)
{
    char *out = NULL;
    REQUIRE(run("quantize --model models/demo --scheme FP8_DYNAMIC --format compressed-tensors "
                "--out build/cli_fp8_dynamic",
                false, &out) == 0);
    free(out);
    json_t *j = run_json("eval --model build/cli_fp8_dynamic --baseline-model models/demo "
                         "--text models/demo/eval.txt --max-tokens 300 --json");
    json_t *b =
        run_json("eval --model models/demo --text models/demo/eval.txt --max-tokens 300 --json");
    REQUIRE(j && b);
    CHECK(json_real_value(json_object_get(j, "ppl_bf16")) ==
          json_real_value(json_object_get(b, "ppl")));
    double kld = json_real_value(json_object_get(j, "kld"));
    double top1 = json_real_value(json_object_get(j, "top1_agree"));
    CHECK(kld > 0 && kld < 0.05);
    CHECK(top1 > 0.8 && top1 <= 1.0);
    json_decref(j);
    json_decref(b);
    /* a model with another vocabulary, and a contradictory flag */
    CHECK(
        run("eval --model build/cli_fp8_dynamic --baseline-model tests/fixtures/models/model_llama "
            "--text models/demo/eval.txt --max-tokens 50",
            true, &out) == 1);
    CHECK(strstr(out, "model_llama has a vocabulary of 512") != NULL);
    free(out);
    CHECK(run("eval --model build/cli_fp8_dynamic --baseline-model models/demo --no-compare "
              "--text models/demo/eval.txt --max-tokens 50",
              true, &out) == 2);
    CHECK(strstr(out, "contradict") != NULL);
    free(out);
    testlib_rm_tree("build/cli_fp8_dynamic");
}

static void test_inspect_and_tokenize_json(void)
{
    json_t *j = run_json("inspect --model models/demo --json");
    REQUIRE(j);
    CHECK(strcmp(json_string_value(json_object_get(j, "format")), "bf16") == 0);
    json_t *layers = json_object_get(j, "layers");
    CHECK(json_array_size(layers) > 0);
    json_t *l0 = json_array_get(layers, 0);
    CHECK(json_is_string(json_object_get(l0, "name")) &&
          json_is_array(json_object_get(l0, "shape")) &&
          json_is_string(json_object_get(l0, "weight_dtype")) &&
          json_is_string(json_object_get(l0, "scale_kind")) &&
          json_is_string(json_object_get(l0, "activation")));
    CHECK(json_integer_value(json_object_get(j, "total_params")) > 9000000);
    json_decref(j);
    json_t *t = run_json("tokenize --model models/demo --text 'Hello world' --json");
    CHECK(t && json_is_array(t) && json_array_size(t) >= 2);
    json_decref(t);
}

/* --linear-backend cuda: runs where a GPU is; elsewhere an error saying why. */
static void test_cuda_backend(void)
{
    char *out = NULL;
    int rc = run("generate --model models/demo --prompt x --max-tokens 2 --quantization fp8 "
                 "--linear-backend cuda",
                 true, &out);
    if (oct_cuda_available()) {
        CHECKF(rc == 0, "%s", out);
    } else {
        CHECK(rc == 1);
        CHECKF(strstr(out, "cuda_fp8: ") != NULL, "%s", out);
    }
    free(out);
}

static void test_errors_name_the_problem(void)
{
    struct {
        const char *args;
        int rc;
        const char *text;
    } cases[] = {
        {"generate --model /nonexistent --prompt x", 1, "/nonexistent"},
        {"generate --model models/demo --prompt x --quantization int4", 1, "int4"},
        {"generate --model models/demo --prompt x --linear-backend tpu", 1, "tpu"},
        {"generate --model models/demo --prompt x --quantization-config '{\"linear\": 5}'", 1,
         "quantization_config.linear"},
        {"generate --model models/demo --prompt x --kv-cache-dtype fp4", 1, "--kv-cache-dtype"},
        {"generate --model models/demo", 2, "--prompt"},
        {"eval --model models/demo --token-ids /nonexistent", 1, "/nonexistent"},
        {"quantize --model models/demo --scheme FP4 --format fp8 --out /tmp/x", 2, "FP4"},
        {"nosuchcommand", 2, "nosuchcommand"},
        {"serve --model models/demo --api-key ''", 2, "--api-key must not be empty"},
        {"generate --model models/demo --prompt x --device tpu", 1, "--device tpu"},
        /* tensor-parallel shards: heads the ranks do not divide, a cut scale block */
        {"inspect --model tests/fixtures/models/model_llama --plan -tp 3", 1,
         "model.layers.0.self_attn.qkv_proj: the number of query heads (4) is not divisible"},
        {"inspect --model tests/fixtures/models/model_llama --plan --quantization fp8_per_block "
         "--tensor-parallel-size 2",
         1, "cuts the 128-wide weight-scale blocks"},
        {"inspect --model tests/fixtures/models/model_llama --plan --quantization fp8 -tp 4", 0,
         "tensor parallel 4: every linear layer shards"},
        {"inspect --model models/demo -tp 2", 2, "--tensor-parallel-size goes with --plan"},
        {"serve --model models/demo --gpu-memory-utilization 1.5", 2,
         "--gpu-memory-utilization must be in (0, 1]"},
        /* --moe-backend: a name it does not know; the GPU's block on the host; the experts'
         * own kernels (dense layers keep theirs) */
        {"generate --model models/demo --prompt x --moe-backend bogus", 1,
         "--moe-backend bogus: expected auto, cuda, cuda_grouped"},
        {"generate --model tests/fixtures/models/model_mixtral --device cpu --prompt-ids 1,2 "
         "--moe-backend cuda_grouped",
         1, "--moe-backend cuda_grouped is the GPU's MoE block"},
        {"inspect --model tests/fixtures/models/model_mixtral --plan --device cpu --moe-backend "
         "ref --linear-backend cpu",
         0, "Selected cpu_ref for model.layers.0.block_sparse_moe.experts.0.gate_up_proj"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        int rc = run(cases[i].args, true, &out);
        CHECKF(rc == cases[i].rc && strstr(out, cases[i].text),
               "octet %s: rc %d (want %d), output '%.200s' should name '%s'", cases[i].args, rc,
               cases[i].rc, out, cases[i].text);
        free(out);
    }
}

/* A folder as transformers' save_pretrained writes it (tests/fixtures/
 * save_pretrained, tools/make_save_pretrained_fixture.py): its
 * tokenizer_config.json has model_max_length = int(1e30) and its template
 * lives in chat_template.jinja.  Every command runs on it. */
static void test_save_pretrained_folder(void)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char dir[200], cmd[4096];
    snprintf(dir, sizeof dir, "%.150s/tests/save_pretrained", build);
    snprintf(cmd, sizeof cmd,
             "rm -rf %s && mkdir -p %s && cp tests/fixtures/save_pretrained/*.json "
             "tests/fixtures/save_pretrained/*.jinja %s/ && cp models/demo/config.json "
             "models/demo/generation_config.json models/demo/tokenizer.json "
             "models/demo/model.safetensors %s/",
             dir, dir, dir, dir);
    REQUIRE(system(cmd) == 0);
    static const char *const cmds[][2] = {
        {"tokenize", "--text 'Hello world' --json"},
        {"tokenize", "--chat '[{\"role\": \"user\", \"content\": \"Hi\"}]'"},
        {"generate", "--prompt 'The jury said' --max-tokens 4 --temperature 0 --json"},
        {"generate", "--prompt Hi --chat --max-tokens 4 --temperature 0 --json"},
        {"eval", "--text models/demo/eval.txt --max-tokens 256 --json"},
        {"inspect", "--json"},
        {"inspect", "--plan --quantization fp8_per_block --json"},
        {"quantize", "--scheme FP8_DYNAMIC --format compressed-tensors --out"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[1024], *out = NULL;
        bool to_dir = strcmp(cmds[i][0], "quantize") == 0;
        snprintf(args, sizeof args, "%s --model %s %s%s%s", cmds[i][0], dir, cmds[i][1],
                 to_dir ? " " : "", to_dir ? dir : "");
        if (to_dir)
            strcat(args, "-fp8");
        int rc = run(args, true, &out);
        CHECKF(rc == 0, "octet %s: rc %d: %.300s", args, rc, out);
        free(out);
    }
    /* The max length comes from config.json, never from the tokenizer's int(1e30). */
    char args[700];
    snprintf(args, sizeof args, "inspect --model %s --plan --json", dir);
    json_t *plan = run_json(args);
    CHECK(plan && json_integer_value(json_object_get(plan, "max_model_len")) == 1024);
    json_decref(plan);
    /* serve: one completion, then a clean shutdown. */
    snprintf(cmd, sizeof cmd,
             "( %s serve --model %s --port 0 > %s/serve.log 2>&1 & echo $! > %s/serve.pid ); "
             "for i in $(seq 100); do p=$(grep -o '127.0.0.1:[0-9]*' %s/serve.log | head -1 | "
             "cut -d: -f2); [ -n \"$p\" ] && break; sleep 0.1; done; "
             "curl -sf -H 'Content-Type: application/json' -d '{\"prompt\": \"Hello\", "
             "\"max_tokens\": 4}' http://127.0.0.1:$p/v1/completions | grep -q '\"text\"'; "
             "rc=$?; kill $(cat %s/serve.pid); wait; exit $rc",
             g_bin, dir, dir, dir, dir, dir);
    CHECKF(system(cmd) == 0, "octet serve on %s (see %s/serve.log)", dir, dir);
}

int main(void)
{
    const char *build = getenv("BUILD");
    snprintf(g_bin, sizeof g_bin, "%s/octet", build ? build : "build");
    RUN(test_generate_json);
    RUN(test_eval_json_and_token_ids);
    RUN(test_eval_baseline_model);
    RUN(test_inspect_and_tokenize_json);
    RUN(test_errors_name_the_problem);
    RUN(test_cuda_backend);
    RUN(test_save_pretrained_folder);
    return testlib_finish();
}
