"""Memory over many LLMs, Ctrl-C, a vLLM-style script, the wheel, inspect
and the tokenizer."""

import gc
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from common import MODEL, cli_json, rss_bytes

import octet
from octet import LLM, SamplingParams


class Memory(unittest.TestCase):
    def test_build_and_free_50_times(self):
        sp = SamplingParams(temperature=0, max_tokens=2)

        def cycle(i):
            llm = LLM(MODEL, quantization="fp8_per_block" if i % 2 else None, max_num_seqs=4)
            llm.generate(["The jury said", "The court"], sp)
            del llm
            gc.collect()

        for i in range(5):  # first-use allocations (kernel choices, caches) settle
            cycle(i)
        before = rss_bytes()
        for i in range(50):
            cycle(i)
        grown = rss_bytes() - before
        # One leaked model alone would be ~10 MB; 50 of them, far more.
        self.assertLess(grown, 6 << 20, f"RSS grew by {grown / 1e6:.1f} MB over 50 LLMs")


class Interrupt(unittest.TestCase):
    def test_ctrl_c_cancels_and_leaves_llm_usable(self):
        llm = LLM(MODEL, max_num_seqs=4)
        sp = SamplingParams(temperature=0, max_tokens=1000, ignore_eos=True)
        ref = llm.generate("The history of", SamplingParams(temperature=0, max_tokens=8))
        started = threading.Event()
        pid = os.getpid()

        def interrupt():
            started.wait()
            time.sleep(0.2)
            os.kill(pid, signal.SIGINT)

        t = threading.Thread(target=interrupt)
        t.start()
        t0 = time.monotonic()
        caught = False
        try:
            started.set()
            llm.generate(["The jury said"] * 8, sp)
        except KeyboardInterrupt:
            caught = True
        t.join()  # a signal that came after generate ended would surface here
        self.assertTrue(caught)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual(llm.kv_blocks_used(), 0)
        again = llm.generate("The history of", SamplingParams(temperature=0, max_tokens=8))
        self.assertEqual(again[0].outputs[0].token_ids, ref[0].outputs[0].token_ids)


class VllmScript(unittest.TestCase):
    SCRIPT = """
from octet import LLM, SamplingParams
prompts = ["The jury said", "In the morning", "Scientists have found"]
llm = LLM({path!r}, quantization="fp8_per_block")
outputs = llm.generate(prompts, SamplingParams(temperature=0.8, top_p=0.95))
print(outputs[0].outputs[0].text)
for o in outputs:
    print(repr(o.prompt), len(o.outputs[0].token_ids), o.outputs[0].finish_reason)
"""

    def test_runs(self):
        r = subprocess.run([sys.executable, "-c", self.SCRIPT.format(path=MODEL)],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertGreaterEqual(len(lines), 4)
        self.assertIn("'The jury said'", r.stdout)


class Wheel(unittest.TestCase):
    def test_wheel_installs_and_runs_outside_the_tree(self):
        build = os.environ.get("OCTET_BUILD", "build")
        py_build = None
        for p in (sys.executable, "/usr/bin/python3"):
            if shutil.which(p) and subprocess.run(
                    [p, "-c", "import setuptools, wheel"], capture_output=True).returncode == 0:
                py_build = p
                break
        if py_build is None:
            self.skipTest("no python3 with setuptools and wheel")
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, OCTET_LIB=os.path.abspath(os.path.join(build, "liboctet.so")))
            r = subprocess.run([py_build, "-m", "pip", "wheel", "--no-build-isolation",
                                "--no-index", "--no-deps", "-q", "-w", tmp, "./python"],
                               env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            (whl,) = glob.glob(os.path.join(tmp, "octet-*.whl"))
            self.assertTrue(whl.endswith("-py3-none-linux_x86_64.whl"), whl)
            # Nothing of the tree in the environment: the installed copy must do.
            clean = {k: v for k, v in os.environ.items() if k not in ("OCTET_LIB", "PYTHONPATH")}
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
            vpy = os.path.join(venv, "bin", "python")
            r = subprocess.run([sys.executable, "-m", "pip", "--python", vpy, "install", "-q",
                                "--no-index", "--no-deps", whl], capture_output=True, text=True,
                               env=clean, cwd=tmp)
            if r.returncode != 0:  # pip older than 22.3 has no --python
                subprocess.run([vpy, "-m", "ensurepip", "-q"], check=True)
                r = subprocess.run([vpy, "-m", "pip", "install", "-q", "--no-index", whl],
                                   capture_output=True, text=True, env=clean, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            code = ("import octet, sys; print(octet.lib_path()); "
                    "llm = octet.LLM(sys.argv[1]); "
                    "print(llm.generate('The jury said')[0].outputs[0].finish_reason)")
            r = subprocess.run([vpy, "-c", code, os.path.abspath(MODEL)], env=clean, cwd=tmp,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            lib, reason = r.stdout.split()[:2]
            self.assertTrue(lib.startswith(venv), lib)
            self.assertIn(reason, ("stop", "length"))


class Inspect(unittest.TestCase):
    def test_plan_matches_cli(self):
        want = cli_json("inspect", ["--plan", "--quantization", "fp8_per_block"])
        plan = octet.inspect(MODEL, quantization="fp8_per_block")
        self.assertEqual(plan.summary, want["summary"])
        self.assertEqual(len(plan.layers), len(want["layers"]))
        for got, w in zip(plan.layers, want["layers"]):
            self.assertEqual((got.name, got.unit, [got.n, got.k], got.scheme, got.kernel,
                              got.bytes, got.ignore_rule),
                             (w["name"], w["unit"], w["shape"], w["scheme"], w["kernel"],
                              w["bytes"], w["ignore_rule"]))
        self.assertEqual(plan.n_quantized, 56)
        self.assertLess(plan.model_bytes, plan.bf16_bytes)
        self.assertEqual(plan.checkpoint.format, "bf16")
        ign = octet.inspect(MODEL, quantization="fp8",
                            quantization_config={"ignore": ["re:.*[qkv]_proj"]})
        self.assertEqual(sum(1 for l in ign.layers if l.ignore_rule == "re:.*[qkv]_proj"), 24)

    def test_checkpoint_matches_cli(self):
        want = cli_json("inspect", [])
        ck = octet.inspect(MODEL, plan=False)
        self.assertEqual((ck.architecture, ck.model_type, ck.format, ck.scheme),
                         (want["architecture"], want["model_type"], want["format"],
                          want["scheme"]))
        self.assertEqual([l.name for l in ck.linears], [l["name"] for l in want["layers"]])
        self.assertEqual(ck.config["vocab_size"], 6144)
        self.assertIsNone(ck.quantization_config)

    def test_loaded_plan(self):
        llm = LLM(MODEL, quantization="mxfp8")
        self.assertEqual(llm.plan.summary, octet.inspect(MODEL, quantization="mxfp8").summary)


class TokenizerApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tok = LLM(MODEL).get_tokenizer()

    def test_encode_matches_cli(self):
        want = cli_json("tokenize", ["--text", "Hello world, the jury said."])
        self.assertEqual(self.tok.encode("Hello world, the jury said."), want)

    def test_round_trip_and_vocab(self):
        tok = self.tok
        text = "The history of the court — naïve café."
        ids = tok.encode(text)
        self.assertEqual(tok.decode(ids), text)
        self.assertEqual(tok.vocab_size, 6144)
        self.assertEqual((tok.bos_token_id, tok.eos_token_id), (0, 1))
        self.assertEqual(tok.eos_token, "<|end_of_text|>")
        self.assertEqual(tok.convert_tokens_to_ids(tok.convert_ids_to_tokens(ids)), ids)
        self.assertEqual(tok.decode([0, 1], skip_special_tokens=False),
                         "<|begin_of_text|><|end_of_text|>")
        self.assertEqual(tok.decode([0, 1]), "")

    def test_chat_template(self):
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
        text = self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        self.assertEqual(text, "<|begin_of_text|><|im_start|>system\nBe brief.<|im_end|>\n"
                               "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        self.assertEqual(self.tok.apply_chat_template(msgs, add_generation_prompt=True),
                         self.tok.encode(text, add_special_tokens=False))
        custom = self.tok.apply_chat_template(
            msgs, chat_template="{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}"
            "{{ flag }}", tokenize=False, flag="X")
        self.assertEqual(custom, "system=Be brief.;user=Hi;X")


if __name__ == "__main__":
    unittest.main()
