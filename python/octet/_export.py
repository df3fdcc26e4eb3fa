"""octet.quantize and octet.convert: the CLI's `octet quantize` and
`octet convert` (writing FP8 checkpoints) over oct_checkpoint_export and
oct_checkpoint_convert."""

import ctypes
import os
from ctypes import POINTER, Structure, byref, c_char_p, c_int, c_size_t, c_void_p
from typing import Optional, Sequence, Union

from . import _lib
from .errors import InvalidArgumentError, check

_SCHEMES = {"FP8_DYNAMIC": 0, "FP8_BLOCK": 1, "MXFP8": 2}
_EXPORT_FORMATS = {"compressed-tensors": 0, "fp8": 1}

PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, c_char_p, c_void_p)
STEP_FN = ctypes.CFUNCTYPE(None, c_char_p, c_char_p, ctypes.c_bool, c_void_p)


class _ExportOpts(Structure):
    _fields_ = [
        ("scheme", c_int),
        ("format", c_int),
        ("ignore", POINTER(c_char_p)),
        ("n_ignore", c_int),
        ("max_shard_bytes", c_size_t),
        ("progress", PROGRESS_FN),
        ("progress_user", c_void_p),
    ]


class _ConvertOpts(Structure):
    _fields_ = [
        ("format", c_int),
        ("max_shard_bytes", c_size_t),
        ("on_step", STEP_FN),
        ("user", c_void_p),
    ]


_declared = False


def _declare(lib: ctypes.CDLL) -> None:
    """The three entry points' types, set once per process."""
    global _declared
    if _declared:
        return
    _declared = True
    err = POINTER(_lib.OctError)
    for name, res, args in (
        ("oct_checkpoint_export", c_int, [c_void_p, c_char_p, POINTER(_ExportOpts), err]),
        ("oct_checkpoint_convert", c_int, [c_void_p, c_char_p, POINTER(_ConvertOpts), err]),
        ("oct_convert_format_parse", c_int, [c_char_p, POINTER(c_int)]),
    ):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def _shard_bytes(max_shard_size: float) -> int:
    if not (0 < max_shard_size <= 1e6):
        raise InvalidArgumentError("max_shard_size: %r is not a size in GB" % (max_shard_size,))
    return int(max_shard_size * 1e9)


def _open(model: Union[str, "os.PathLike[str]"]) -> c_void_p:
    lib = _lib.lib()
    err = _lib.OctError()
    h = c_void_p()
    path = os.fspath(model)
    check(lib.oct_checkpoint_open(_lib.enc(path), None, byref(h), byref(err)), err, filename=path)
    return h


def quantize(
    model: Union[str, "os.PathLike[str]"],
    scheme: str,
    format: str,
    out: Union[str, "os.PathLike[str]"],
    ignore: Optional[Sequence[str]] = None,
    max_shard_size: float = 5.0,
) -> None:
    """Writes an FP8 checkpoint of the BF16 / FP16 model folder `model` to
    `out`, as ``octet quantize --model MODEL --scheme SCHEME --format FORMAT
    --out OUT [--ignore ...] [--max-shard-size GB]`` does.

    Args:
        scheme: "FP8_DYNAMIC", "FP8_BLOCK" or "MXFP8".
        format: "compressed-tensors" or "fp8".
        ignore: extra layers kept unquantized (exact names or "re:" patterns;
            the lm_head is always kept).
        max_shard_size: the largest safetensors file, in GB (1e9 bytes).
    """
    if scheme not in _SCHEMES:
        raise InvalidArgumentError(
            "scheme %r is not supported (%s)" % (scheme, ", ".join(_SCHEMES)))
    if format not in _EXPORT_FORMATS:
        raise InvalidArgumentError(
            "format %r is not supported (%s)" % (format, ", ".join(_EXPORT_FORMATS)))
    lib = _lib.lib()
    _declare(lib)
    names = [_lib.enc(str(p)) for p in (ignore or [])]
    arr = (c_char_p * max(1, len(names)))(*names)
    o = _ExportOpts(scheme=_SCHEMES[scheme], format=_EXPORT_FORMATS[format], ignore=arr,
                    n_ignore=len(names), max_shard_bytes=_shard_bytes(max_shard_size))
    h = _open(model)
    try:
        err = _lib.OctError()
        check(lib.oct_checkpoint_export(h, _lib.enc(os.fspath(out)), byref(o), byref(err)), err)
    finally:
        lib.oct_checkpoint_free(h)


def convert(
    model: Union[str, "os.PathLike[str]"],
    format: str,
    out: Union[str, "os.PathLike[str]"],
    max_shard_size: float = 5.0,
) -> None:
    """Re-expresses the pre-quantized FP8 checkpoint `model` in another format
    without re-quantizing it, as ``octet convert --model MODEL --format FORMAT
    --out OUT [--max-shard-size GB]`` does: every FP8 code and scale is kept;
    a layer the target cannot express raises octet's error naming it.

    Args:
        format: "compressed-tensors", "fp8" or "quark".
    """
    lib = _lib.lib()
    _declare(lib)
    fmt = c_int()
    if lib.oct_convert_format_parse(_lib.enc(format), byref(fmt)) != 0:
        raise InvalidArgumentError(
            "format %r is not supported (compressed-tensors, fp8, quark)" % (format,))
    o = _ConvertOpts(format=fmt.value, max_shard_bytes=_shard_bytes(max_shard_size))
    h = _open(model)
    try:
        err = _lib.OctError()
        check(lib.oct_checkpoint_convert(h, _lib.enc(os.fspath(out)), byref(o), byref(err)), err)
    finally:
        lib.oct_checkpoint_free(h)
