"""octet.quantize and octet.convert against `octet quantize` and `octet convert`:
the same files, byte for byte; their errors."""

import filecmp
import os
import shutil
import subprocess
import tempfile
import unittest

from common import CLI, MODEL

import octet


def same_tree(a: str, b: str) -> bool:
    names = sorted(os.listdir(a))
    if names != sorted(os.listdir(b)):
        return False
    return all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


class Export(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="octet_py_export_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)

    def test_quantize_and_convert_match_the_cli(self):
        for scheme, fmt in (("FP8_BLOCK", "fp8"), ("FP8_DYNAMIC", "compressed-tensors")):
            cli, py = self.path("cli_" + scheme), self.path("py_" + scheme)
            subprocess.run([CLI, "quantize", "--model", MODEL, "--scheme", scheme, "--format",
                            fmt, "--out", cli, "--ignore", "model.layers.0.mlp.down_proj"],
                           check=True, capture_output=True)
            octet.quantize(MODEL, scheme, fmt, py, ignore=["model.layers.0.mlp.down_proj"])
            self.assertTrue(same_tree(cli, py), scheme)
        src = self.path("py_FP8_BLOCK")
        for target in ("compressed-tensors", "fp8"):
            cli, py = self.path("cli_conv_" + target), self.path("py_conv_" + target)
            subprocess.run([CLI, "convert", "--model", src, "--format", target, "--out", cli],
                           check=True, capture_output=True)
            octet.convert(src, target, py)
            self.assertTrue(same_tree(cli, py), target)

    def test_errors(self):
        with self.assertRaises(ValueError):
            octet.quantize(MODEL, "FP8_STATIC", "fp8", self.path("x"))
        with self.assertRaises(ValueError):
            octet.quantize(MODEL, "FP8_BLOCK", "gguf", self.path("x"))
        with self.assertRaises(ValueError):
            octet.convert(MODEL, "onnx", self.path("x"))
        with self.assertRaises(ValueError):
            octet.quantize(MODEL, "FP8_BLOCK", "fp8", self.path("x"), max_shard_size=0)
        with self.assertRaises(FileNotFoundError):
            octet.quantize(self.path("missing"), "FP8_BLOCK", "fp8", self.path("x"))
        with self.assertRaises(FileNotFoundError):
            octet.convert(self.path("missing"), "fp8", self.path("x"))
        # a BF16 model has nothing to convert: the CLI's message
        with self.assertRaises(octet.UnsupportedError) as cm:
            octet.convert(MODEL, "compressed-tensors", self.path("y"))
        r = subprocess.run([CLI, "convert", "--model", MODEL, "--format", "compressed-tensors",
                            "--out", self.path("z")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn(str(cm.exception), r.stderr)
        self.assertIn("nothing to convert", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(self.path("y"), "config.json")))


if __name__ == "__main__":
    unittest.main()
