"""LLM.generate / chat / stream against the `octet generate` command line."""

import math
import unittest

from common import MODEL, cli_generate

from octet import LLM, SamplingParams

PROMPTS = [
    "The jury said",
    "In the morning the",
    "Scientists have found",
    "The history of",
    "A",
    "The president of the United States said that the",
]


class GenerateMatchesCli(unittest.TestCase):
    """The same prompt, seed and parameters give the CLI's ids and text."""

    CASES = [
        # (prompt, sampling flags as CLI args / SamplingParams kwargs)
        ("The jury said", {"temperature": 0.8, "top_p": 0.95, "seed": 3}),
        ("In the morning the", {"temperature": 0.8, "top_p": 0.95, "seed": 1}),
        ("Scientists have found", {"temperature": 0.0, "seed": 0}),
        ("The history of", {"temperature": 0.7, "top_k": 40, "seed": 5}),
        ("The jury said", {"temperature": 1.0, "min_p": 0.05, "seed": 9}),
        ("The court", {"temperature": 0.9, "repetition_penalty": 1.3, "seed": 2}),
        ("The court", {"temperature": 0.9, "presence_penalty": 0.5, "frequency_penalty": 0.4,
                       "seed": 4}),
    ]

    def check_cases(self, quantization, cases):
        llm = LLM(MODEL, quantization=quantization)
        for prompt, kw in cases:
            for ignore_eos in (False, True):
                args = ["--prompt", prompt, "--max-tokens", "24"]
                for k, v in kw.items():
                    args += ["--" + k.replace("_", "-"), str(v)]
                if quantization:
                    args += ["--quantization", quantization]
                if ignore_eos:
                    args.append("--ignore-eos")
                want = cli_generate(args)
                got = llm.generate(
                    prompt, SamplingParams(max_tokens=24, ignore_eos=ignore_eos, **kw)
                )[0]
                with self.subTest(prompt=prompt, kw=kw, ignore_eos=ignore_eos):
                    self.assertEqual(got.prompt_token_ids, want["prompt_ids"])
                    self.assertEqual(got.outputs[0].token_ids, want["output_ids"])
                    self.assertEqual(got.outputs[0].text, want["text"])
                    self.assertEqual(got.outputs[0].finish_reason, want["finish_reason"])
        llm.close()

    def test_bf16(self):
        self.check_cases(None, self.CASES)

    def test_fp8_per_block(self):
        self.check_cases("fp8_per_block", self.CASES[:3])

    def test_token_ids_prompt(self):
        llm = LLM(MODEL, quantization="fp8_per_tensor")
        ids = [342, 5777, 639, 264]
        want = cli_generate(["--prompt-ids", ",".join(map(str, ids)), "--max-tokens", "16",
                             "--temperature", "0.8", "--seed", "7", "--quantization",
                             "fp8_per_tensor", "--ignore-eos"])
        got = llm.generate([ids], SamplingParams(temperature=0.8, seed=7, max_tokens=16,
                                                 ignore_eos=True))[0]
        self.assertIsNone(got.prompt)
        self.assertEqual(got.outputs[0].token_ids, want["output_ids"])
        self.assertEqual(got.outputs[0].text, want["text"])

    def test_chat_matches_cli(self):
        llm = LLM(MODEL)
        for text in ("Hello there", "What is the history of the court?"):
            want = cli_generate(["--prompt", text, "--chat", "--temperature", "0",
                                 "--max-tokens", "20"])
            got = llm.chat([{"role": "user", "content": text}],
                           SamplingParams(temperature=0, max_tokens=20))[0]
            self.assertEqual(got.prompt_token_ids, want["prompt_ids"])
            self.assertEqual(got.outputs[0].token_ids, want["output_ids"])
            self.assertEqual(got.outputs[0].text, want["text"])
            tok = llm.get_tokenizer()
            self.assertEqual(got.prompt, tok.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False))


class Batching(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = LLM(MODEL, quantization="fp8_per_block")

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def test_batched_greedy_equals_one_by_one(self):
        sp = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
        tok = self.llm.get_tokenizer()
        prompts = PROMPTS[:3] + [tok.encode(p) for p in PROMPTS[3:]]  # text and ids mixed
        batched = self.llm.generate(prompts, sp)
        single = [self.llm.generate([p], sp)[0] for p in prompts]
        self.assertEqual([o.request_id for o in batched],
                         [str(int(batched[0].request_id) + i) for i in range(len(prompts))])
        for b, s in zip(batched, single):
            self.assertEqual(b.prompt_token_ids, s.prompt_token_ids)
            self.assertEqual(b.outputs[0].token_ids, s.outputs[0].token_ids)
            self.assertEqual(b.outputs[0].text, s.outputs[0].text)
        # Fewer slots than prompts and a tiny token budget (chunked prefill)
        # schedule differently and give the same tokens.
        small = LLM(MODEL, quantization="fp8_per_block", max_num_seqs=2, max_num_batched_tokens=3)
        for b, s in zip(small.generate(prompts, sp), single):
            self.assertEqual(b.outputs[0].token_ids, s.outputs[0].token_ids)
        self.assertEqual(small.kv_blocks_used(), 0)
        # A KV pool smaller than every sequence at once: they wait their turn.
        tight = LLM(MODEL, quantization="fp8_per_block", num_gpu_blocks_override=5)
        for b, s in zip(tight.generate(prompts, sp), single):
            self.assertEqual(b.outputs[0].token_ids, s.outputs[0].token_ids)

    def test_seeded_sampling_is_batch_invariant(self):
        params = [SamplingParams(temperature=0.8, top_p=0.95, seed=i, max_tokens=20)
                  for i in range(len(PROMPTS))]
        batched = self.llm.generate(PROMPTS, params)
        for p, sp, b in zip(PROMPTS, params, batched):
            self.assertEqual(self.llm.generate(p, sp)[0].outputs[0].token_ids,
                             b.outputs[0].token_ids)

    def test_n_completions(self):
        out = self.llm.generate("The jury said", SamplingParams(n=3, temperature=1.0, seed=11,
                                                                max_tokens=12))[0]
        self.assertEqual([c.index for c in out.outputs], [0, 1, 2])
        for i, c in enumerate(out.outputs):
            one = self.llm.generate("The jury said", SamplingParams(temperature=1.0, seed=11 + i,
                                                                    max_tokens=12))[0]
            self.assertEqual(c.token_ids, one.outputs[0].token_ids)

    def test_unseeded_requests_differ_and_repeat_per_llm(self):
        sp = SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True)
        a = LLM(MODEL, seed=5).generate(["The jury said"] * 3, sp)
        b = LLM(MODEL, seed=5).generate(["The jury said"] * 3, sp)
        self.assertEqual([o.outputs[0].token_ids for o in a], [o.outputs[0].token_ids for o in b])
        self.assertGreater(len({tuple(o.outputs[0].token_ids) for o in a}), 1)


class Parameters(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = LLM(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def greedy(self, prompt="The history of", **kw):
        kw.setdefault("max_tokens", 40)
        return self.llm.generate(prompt, SamplingParams(temperature=0, ignore_eos=True, **kw))[0]

    def test_stop_strings(self):
        full = self.greedy().outputs[0]
        words = full.text.split()
        stop = " " + words[3]
        cut = full.text.index(stop)
        out = self.greedy(stop=[stop, "zzzz-never"]).outputs[0]
        self.assertEqual(out.text, full.text[:cut])
        self.assertEqual((out.finish_reason, out.stop_reason), ("stop", stop))
        self.assertEqual(out.token_ids, full.token_ids[: len(out.token_ids)])
        kept = self.greedy(stop=stop, include_stop_str_in_output=True).outputs[0]
        self.assertEqual(kept.text, full.text[: cut + len(stop)])

    def test_stop_token_ids_and_min_tokens(self):
        full = self.greedy().outputs[0]
        t = full.token_ids[5]
        out = self.greedy(stop_token_ids=[t]).outputs[0]
        first = full.token_ids.index(t)
        self.assertEqual(out.token_ids, full.token_ids[: first + 1])
        self.assertEqual((out.finish_reason, out.stop_reason), ("stop", t))
        # EOS is banned until min_tokens: the demo model ends "The jury said" early.
        kw = {"temperature": 0.8, "top_p": 0.95, "seed": 3, "max_tokens": 30}
        eos = self.llm.generate("The jury said", SamplingParams(**kw))[0].outputs[0]
        self.assertEqual((eos.token_ids[-1], eos.finish_reason), (1, "stop"))
        self.assertLess(len(eos.token_ids), 10)
        longer = self.llm.generate("The jury said", SamplingParams(min_tokens=10, **kw))[0]
        self.assertGreaterEqual(len(longer.outputs[0].token_ids), 10)
        self.assertNotIn(1, longer.outputs[0].token_ids[:10])

    def test_length_and_max_model_len(self):
        out = self.greedy(max_tokens=7).outputs[0]
        self.assertEqual((len(out.token_ids), out.finish_reason), (7, "length"))
        short = LLM(MODEL, max_model_len=20)
        o = short.generate("The history of", SamplingParams(temperature=0, max_tokens=None,
                                                             ignore_eos=True))[0]
        self.assertEqual(len(o.prompt_token_ids) + len(o.outputs[0].token_ids), 20)
        self.assertEqual(o.outputs[0].finish_reason, "length")

    def test_logprobs(self):
        out = self.greedy(max_tokens=6, logprobs=3, prompt_logprobs=2)
        c = out.outputs[0]
        self.assertEqual(len(c.logprobs), 6)
        total = 0.0
        for tok, lps in zip(c.token_ids, c.logprobs):
            self.assertIn(tok, lps)
            self.assertEqual(lps[tok].rank, 1)  # greedy takes the top token
            self.assertLessEqual(lps[tok].logprob, 0.0)
            self.assertLessEqual(len(lps), 4)
            total += lps[tok].logprob
        self.assertAlmostEqual(c.cumulative_logprob, total, places=4)
        self.assertEqual(len(out.prompt_logprobs), len(out.prompt_token_ids))
        self.assertIsNone(out.prompt_logprobs[0])
        for tok, lps in zip(out.prompt_token_ids[1:], out.prompt_logprobs[1:]):
            self.assertIn(tok, lps)
        full = self.greedy(max_tokens=1, logprobs=-1).outputs[0].logprobs[0]
        self.assertEqual(len(full), self.llm.vocab_size)
        self.assertAlmostEqual(math.fsum(math.exp(v.logprob) for v in full.values()), 1.0, 4)
        self.assertIsNone(self.greedy(max_tokens=2).outputs[0].cumulative_logprob)

    def test_logit_bias_and_allowed_tokens(self):
        tok = self.llm.get_tokenizer()
        t = tok.encode(" court", add_special_tokens=False)[0]
        out = self.greedy(max_tokens=3, logit_bias={t: 100.0}).outputs[0]
        self.assertEqual(out.token_ids, [t, t, t])
        out = self.greedy(max_tokens=4, allowed_token_ids=[t, 17]).outputs[0]
        self.assertTrue(set(out.token_ids) <= {t, 17})

    def test_default_sampling_params(self):
        sp = self.llm.get_default_sampling_params()
        self.assertEqual((sp.temperature, sp.top_p, sp.top_k, sp.max_tokens), (1.0, 1.0, 0, 16))
        out = self.llm.generate(["The jury said", "The court"])
        self.assertEqual(len(out), 2)
        self.assertTrue(all(o.finished for o in out))

    def test_stream(self):
        sp = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)
        whole = self.llm.generate("The history of", sp)[0].outputs[0].text
        pieces = list(self.llm.stream("The history of", sp))
        self.assertGreater(len(pieces), 5)
        self.assertEqual("".join(pieces), whole)
        stop = whole.split()[4]
        sp2 = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True, stop=[stop])
        self.assertEqual("".join(self.llm.stream("The history of", sp2)),
                         self.llm.generate("The history of", sp2)[0].outputs[0].text)
        # Closing a stream early frees its KV blocks; the LLM is free again.
        it = self.llm.stream("The history of", sp)
        next(it)
        self.assertGreater(self.llm.kv_blocks_used(), 0)
        with self.assertRaises(RuntimeError):
            self.llm.generate("x", sp)
        it.close()
        self.assertEqual(self.llm.kv_blocks_used(), 0)
        self.assertEqual(self.llm.generate("The history of", sp)[0].outputs[0].text, whole)

    def test_skip_special_tokens_and_detokenize(self):
        out = self.llm.generate("The jury said", SamplingParams(temperature=0, max_tokens=20,
                                                                detokenize=False))[0].outputs[0]
        self.assertEqual(out.text, "")
        self.assertGreater(len(out.token_ids), 0)
        self.assertEqual(self.llm.generate(
            "The jury said", SamplingParams(temperature=0, max_tokens=20,
                                            skip_special_tokens=False))[0].outputs[0].token_ids,
            out.token_ids)


if __name__ == "__main__":
    unittest.main()
