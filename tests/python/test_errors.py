"""Every error path raises an exception that carries octet's message."""

import os
import unittest

from common import MODEL

import octet
from octet import LLM, OctetError, SamplingParams


class LoadErrors(unittest.TestCase):
    def assertOctet(self, exc_type, fragment, fn, *args, **kw):
        with self.assertRaises(exc_type) as cm:
            fn(*args, **kw)
        self.assertIsInstance(cm.exception, OctetError)
        self.assertIn(fragment, str(cm.exception))
        return cm.exception

    def test_missing_model_folder(self):
        e = self.assertOctet(FileNotFoundError, "models/nonexist/config.json: cannot open: No such "
                             "file or directory", LLM, "models/nonexist")
        self.assertEqual(e.filename, "models/nonexist")
        self.assertOctet(FileNotFoundError, "cannot open", octet.inspect, "models/nonexist")
        self.assertOctet(FileNotFoundError, "cannot open", octet.inspect, "models/nonexist",
                         plan=False)

    def test_not_a_folder(self):
        self.assertOctet(OSError, "README.md/config.json: cannot open", LLM, "README.md")

    def test_bad_options(self):
        cases = [
            ({"quantization": "int4"}, "--quantization int4 is not an online FP8 method"),
            ({"linear_backend": "tpu"}, "unknown linear backend 'tpu'"),
            ({"quantization_config": {"linear": 5}}, "quantization_config.linear must be"),
            ({"quantization_config": "{not json"}, "--quantization-config: invalid JSON"),
            ({"kv_cache_dtype": "fp4"}, "--kv-cache-dtype fp4: expected"),
            ({"device": "tpu"}, "--device tpu: expected auto, cuda or cpu"),
            ({"dtype": "int8"}, "--dtype int8: expected"),
            ({"moe_backend": "tpu"}, "--moe-backend tpu: expected auto, cuda, cuda_grouped"),
            ({"max_model_len": 5000}, "User-specified max_model_len (5000) is greater than"),
            ({"quantization": "fp8", "quantization_config": {"ignore": ["re:(unclosed"]}},
             "(unclosed"),
        ]
        for kw, fragment in cases:
            with self.subTest(kw=kw):
                self.assertOctet(ValueError, fragment, LLM, MODEL, **kw)
        self.assertOctet(ValueError, "--quantization int4", octet.inspect, MODEL,
                         quantization="int4")

    def test_python_side_arguments(self):
        with self.assertRaises(TypeError):
            LLM(MODEL, no_such_argument=1)
        for kw in ({"tensor_parallel_size": 2}, {"gpu_memory_utilization": 1.5},
                   {"max_num_seqs": 0}, {"seed": -1}, {"revision": "main"}):
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                LLM(MODEL, **kw)
        LLM(MODEL, trust_remote_code=True, gpu_memory_utilization=0.5).close()


class RequestErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llm = LLM(MODEL, max_model_len=64)

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def test_prompts(self):
        llm = self.llm
        with self.assertRaises(ValueError) as cm:
            llm.generate([list(range(2, 80))])
        self.assertIn("The decoder prompt (length 78) is longer than the maximum model length "
                      "of 64", str(cm.exception))
        self.assertIsInstance(cm.exception, OctetError)
        with self.assertRaisesRegex(ValueError, "Token id 6144 is out of vocabulary"):
            llm.generate([[1, 6144]])
        with self.assertRaisesRegex(ValueError, "cannot be empty"):
            llm.generate({"prompt_token_ids": []})
        with self.assertRaisesRegex(ValueError, "must be the same"):
            llm.generate(["a", "b"], [SamplingParams()])
        with self.assertRaises(ValueError):
            llm.generate("x", lora_request=object())
        self.assertEqual(llm.kv_blocks_used(), 0)
        self.assertEqual(len(llm.generate("x", SamplingParams(max_tokens=2))), 1)

    def test_sampling_params(self):
        bad = [
            ({"temperature": -1}, "temperature must be non-negative"),
            ({"top_p": 0}, "top_p must be in (0, 1]"),
            ({"top_k": -2}, "top_k must be 0 (disable), or at least 1"),
            ({"min_p": 2}, "min_p must be in [0, 1]"),
            ({"repetition_penalty": 0}, "repetition_penalty must be greater than zero"),
            ({"presence_penalty": 3}, "presence_penalty must be in [-2, 2]"),
            ({"max_tokens": 0}, "max_tokens must be at least 1"),
            ({"min_tokens": 5, "max_tokens": 2}, "min_tokens must be less than or equal"),
            ({"n": 0}, "n must be at least 1"),
            ({"best_of": 3}, "best_of is not supported"),
            ({"bad_words": ["x"]}, "bad_words is not supported"),
            ({"logits_processors": [print]}, "logits_processors is not supported"),
            ({"stop": [""]}, "stop strings must be non-empty"),
            ({"stop": ["x"], "detokenize": False}, "only supported when detokenize is True"),
            ({"logprobs": -3}, "logprobs must be non-negative or -1"),
        ]
        for kw, fragment in bad:
            with self.subTest(kw=kw), self.assertRaises(ValueError) as cm:
                SamplingParams(**kw)
            self.assertIn(fragment, str(cm.exception))

    def test_chat_template_errors(self):
        msgs = [{"role": "user", "content": "x"}]
        with self.assertRaises(ValueError) as cm:
            self.llm.chat(msgs, chat_template="{{ raise_exception('no way') }}")
        self.assertIsInstance(cm.exception, OctetError)
        self.assertIn("raise_exception: no way", str(cm.exception))
        with self.assertRaisesRegex(ValueError, "expected a loop variable"):
            self.llm.get_tokenizer().apply_chat_template(msgs, chat_template="{% for %}")

    def test_closed_llm(self):
        llm = LLM(MODEL)
        llm.close()
        llm.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            llm.generate("x")

    def test_tokenizer_errors(self):
        with self.assertRaises(FileNotFoundError):
            octet.Tokenizer("models/nonexist")
        with self.assertRaises(ValueError) as cm:
            LLM(MODEL, skip_tokenizer_init=True).generate("text needs a tokenizer")
        self.assertIn("tokenizer", str(cm.exception))

    def test_library_override(self):
        # OCTET_LIB naming a missing file is an error, never another library.
        import subprocess
        import sys

        env = dict(os.environ, OCTET_LIB="/nonexistent/liboctet.so")
        r = subprocess.run([sys.executable, "-c", "import octet; octet.lib_path()"], env=env,
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("OCTET_LIB=/nonexistent/liboctet.so", r.stderr)


if __name__ == "__main__":
    unittest.main()
