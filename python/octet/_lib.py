"""Loading liboctet.so and the ctypes declarations of the C API it uses.

The library is looked up, in order, at:

1. ``$OCTET_LIB``: the path of ``liboctet.so`` or of the folder holding it;
2. the package folder (a wheel built with ``make wheel`` ships it there);
3. ``build/liboctet.so`` of the source tree the package sits in (``python/octet``
   of an octet checkout, for running from the tree without installing).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import List, Optional

LIB_NAME = "liboctet.so"

OCT_OK = 0
OCT_ERR_INVALID_ARG = 1
OCT_ERR_NOMEM = 2
OCT_ERR_IO = 3
OCT_ERR_FORMAT = 4
OCT_ERR_UNSUPPORTED = 5
OCT_ERR_OVERFLOW = 6
OCT_ERR_NOT_FOUND = 7
OCT_ERR_LIMIT = 8
OCT_ERR_CANCELLED = 9
OCT_ERR_INTERNAL = 10

SIZE_MAX = (1 << (8 * ctypes.sizeof(c_size_t))) - 1


class OctError(Structure):
    """``oct_error``: status, byte offset (-1: none) and message."""

    _fields_ = [("status", c_int), ("offset", c_int64), ("message", c_char * 512)]


PROGRESS_FN = CFUNCTYPE(None, c_uint64, c_uint64, c_char_p, c_void_p)
LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)


class OctModelOpts(Structure):
    """``oct_model_opts``."""

    _fields_ = [
        ("quantization", c_char_p),
        ("quantization_config", c_char_p),
        ("linear_backend", c_char_p),
        ("moe_backend", c_char_p),
        ("device", c_char_p),
        ("dtype", c_char_p),
        ("kv_cache_dtype", c_char_p),
        ("calculate_kv_scales", c_bool),
        ("enforce_eager", c_bool),
        ("progress", PROGRESS_FN),
        ("progress_user", c_void_p),
    ]


class OctPlanLayer(Structure):
    """``oct_plan_layer``: one unfused linear layer of the load plan."""

    _fields_ = [
        ("name", c_char_p),
        ("unit", c_char_p),
        ("n", c_int64),
        ("k", c_int64),
        ("scheme", c_char_p),
        ("ignore_rule", c_char_p),
        ("kernel", c_char_p),
        ("bytes", c_uint64),
    ]


class OctSampling(Structure):
    """``oct_sampling``."""

    _fields_ = [
        ("temperature", c_float),
        ("top_k", c_int),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repetition_penalty", c_float),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("seed", c_uint64),
    ]


class OctTokenIds(Structure):
    """``oct_token_ids``: a growable id array the library fills."""

    _fields_ = [("ids", POINTER(c_int32)), ("n", c_int64), ("cap", c_int64)]


class OctTensor(Structure):
    """``oct_tensor``."""

    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_int),
        ("n_dims", c_int),
        ("dims", c_int64 * 8),
        ("numel", c_int64),
        ("data", c_void_p),
        ("size_bytes", c_size_t),
        ("file_offset", c_uint64),
        ("file", c_char_p),
    ]


class OctCkptLinear(Structure):
    """``oct_ckpt_linear``: one unfused linear layer as a checkpoint stores it."""

    _fields_ = [
        ("name", c_char_p),
        ("out_features", c_int64),
        ("in_features", c_int64),
        ("weight", POINTER(OctTensor)),
        ("fp8_format", c_int),
        ("scale_kind", c_int),
        ("block_n", c_int64),
        ("block_k", c_int64),
        ("weight_scale", POINTER(OctTensor)),
        ("scale_rows", c_int64),
        ("scale_cols", c_int64),
        ("activation", c_int),
        ("act_group", c_int64),
        ("input_scale", POINTER(OctTensor)),
        ("input_scale_value", c_float),
        ("act_scale_ub", c_float),
        ("bias", POINTER(OctTensor)),
        ("rule", c_char_p),
    ]


class OctModelConfigHead(Structure):
    """The first fields of ``oct_model_config`` (only ever read through a pointer)."""

    _fields_ = [("architecture", c_char * 96), ("model_type", c_char * 64)]


def _candidates() -> List[Path]:
    out: List[Path] = []
    env = os.environ.get("OCTET_LIB")
    if env:
        p = Path(env)
        out.append(p / LIB_NAME if p.is_dir() else p)
    here = Path(__file__).resolve().parent
    out.append(here / LIB_NAME)
    out.append(here.parent.parent / "build" / LIB_NAME)
    return out


def _find_library() -> Path:
    tried = _candidates()
    env = os.environ.get("OCTET_LIB")
    if env:
        # An explicit choice is never silently replaced by another library.
        if not tried[0].is_file():
            raise OSError(f"OCTET_LIB={env}: {tried[0]} does not exist")
        return tried[0]
    for p in tried:
        if p.is_file():
            return p
    raise OSError(
        "cannot find liboctet.so (looked at "
        + ", ".join(str(p) for p in tried)
        + "); build it with `make` or point OCTET_LIB at it"
    )


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of every function the package calls."""
    P = POINTER
    err = P(OctError)
    vp = c_void_p
    table = {
        "oct_status_str": (c_char_p, [c_int]),
        "oct_error_clear": (None, [err]),
        "oct_log_set": (None, [LOG_FN, vp, c_int]),
        "oct_threads_set": (None, [c_int]),
        "oct_threads_get": (c_int, []),
        # model
        "oct_model_load": (c_int, [c_char_p, P(OctModelOpts), P(vp), err]),
        "oct_model_free": (None, [vp]),
        "oct_model_get_config": (vp, [vp]),
        "oct_model_get_plan": (vp, [vp]),
        "oct_model_vocab_size": (c_int64, [vp]),
        "oct_model_load_peak_bytes": (c_uint64, [vp]),
        "oct_model_load_seconds": (c_double, [vp]),
        "oct_model_config_max_len": (c_int, [vp, c_int64, P(c_int64), err]),
        "oct_model_config_eos_ids": (c_int, [vp, P(c_int32), c_int]),
        # plan
        "oct_plan_create": (c_int, [c_char_p, P(OctModelOpts), P(vp), err]),
        "oct_plan_free": (None, [vp]),
        "oct_plan_n_layers": (c_int64, [vp]),
        "oct_plan_layer_at": (P(OctPlanLayer), [vp, c_int64]),
        "oct_plan_model_bytes": (c_uint64, [vp]),
        "oct_plan_bf16_bytes": (c_uint64, [vp]),
        "oct_plan_peak_bytes": (c_uint64, [vp]),
        "oct_plan_n_quantized": (c_int64, [vp]),
        "oct_plan_summary": (c_char_p, [vp]),
        "oct_plan_checkpoint": (vp, [vp]),
        # checkpoint
        "oct_checkpoint_open": (c_int, [c_char_p, vp, P(vp), err]),
        "oct_checkpoint_free": (None, [vp]),
        "oct_checkpoint_dir": (c_char_p, [vp]),
        "oct_checkpoint_format": (c_int, [vp]),
        "oct_ckpt_format_str": (c_char_p, [c_int]),
        "oct_checkpoint_scheme": (c_char_p, [vp]),
        "oct_checkpoint_config": (P(OctModelConfigHead), [vp]),
        "oct_checkpoint_quant_config_json": (c_char_p, [vp]),
        "oct_checkpoint_n_linears": (c_int64, [vp]),
        "oct_checkpoint_linear": (P(OctCkptLinear), [vp, c_int64]),
        "oct_checkpoint_kv_quantized": (c_bool, [vp]),
        "oct_wscale_kind_str": (c_char_p, [c_int]),
        "oct_act_kind_str": (c_char_p, [c_int]),
        "oct_dtype_str": (c_char_p, [c_int]),
        # session
        "oct_session_create_pool": (c_int, [vp, c_int, c_int64, c_int64, P(vp), err]),
        "oct_session_free": (None, [vp]),
        "oct_session_forward": (
            c_int,
            [vp, c_int64, P(c_int32), P(c_int32), P(c_int64), P(c_bool), P(c_float), err],
        ),
        "oct_session_reset_seq": (None, [vp, c_int32]),
        "oct_session_seq_len": (c_int64, [vp, c_int32]),
        "oct_session_kv_blocks_used": (c_int64, [vp]),
        "oct_session_kv_blocks_total": (c_int64, [vp]),
        # sampler
        "oct_sampling_default": (None, [P(OctSampling)]),
        "oct_sampler_create": (c_int, [P(OctSampling), c_int64, P(vp)]),
        "oct_sampler_free": (None, [vp]),
        "oct_sampler_sample": (c_int, [vp, P(c_float), P(c_int32), c_int64, P(c_int32)]),
        # tokenizer
        "oct_tokenizer_load": (c_int, [c_char_p, P(vp), err]),
        "oct_tokenizer_free": (None, [vp]),
        "oct_token_ids_free": (None, [P(OctTokenIds)]),
        "oct_tokenizer_encode": (c_int, [vp, c_char_p, c_size_t, c_bool, P(OctTokenIds), err]),
        "oct_tokenizer_decode": (
            c_int,
            [vp, P(c_int32), c_int64, c_bool, P(vp), P(c_size_t), err],
        ),
        "oct_tokenizer_text_free": (None, [vp]),
        "oct_detokenizer_new": (c_int, [vp, c_bool, P(vp), err]),
        "oct_detokenizer_push": (c_int, [vp, c_int32, P(vp), P(c_size_t), err]),
        "oct_detokenizer_flush": (c_int, [vp, P(vp), P(c_size_t), err]),
        "oct_detokenizer_free": (None, [vp]),
        "oct_tokenizer_vocab_size": (c_int64, [vp]),
        "oct_tokenizer_id_to_token": (c_char_p, [vp, c_int32]),
        "oct_tokenizer_token_to_id": (c_int32, [vp, c_char_p]),
        "oct_tokenizer_is_special": (c_bool, [vp, c_int32]),
        "oct_tokenizer_bos_id": (c_int32, [vp]),
        "oct_tokenizer_eos_id": (c_int32, [vp]),
        "oct_tokenizer_bos_token": (c_char_p, [vp]),
        "oct_tokenizer_eos_token": (c_char_p, [vp]),
        "oct_tokenizer_chat_template": (c_char_p, [vp]),
        "oct_chat_render_json": (
            c_int,
            [vp, c_char_p, c_char_p, c_char_p, c_bool, P(vp), P(c_size_t), err],
        ),
    }
    for name, (res, args) in table.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


_LEVELS = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR]
_LOG_NAMES = {"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3, "off": 4}
logger = logging.getLogger("octet")


def _log_sink(level: int, msg: Optional[bytes], user: Optional[int]) -> None:
    if msg is not None:
        logger.log(_LEVELS[level] if 0 <= level < 4 else logging.ERROR, "%s",
                   msg.decode("utf-8", "replace"))


_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[Path] = None
_log_cb = LOG_FN(_log_sink)


def _log_off() -> None:
    # Late frees at interpreter exit must not call back into a finalizing Python.
    if _lib is not None:
        _lib.oct_log_set(LOG_FN(), None, 4)


def lib() -> ctypes.CDLL:
    """The loaded library (loaded and declared on first use)."""
    global _lib, _lib_path
    if _lib is None:
        path = _find_library()
        handle = ctypes.CDLL(str(path))
        _declare(handle)
        level = _LOG_NAMES.get(os.environ.get("OCTET_LOG_LEVEL", "info").lower(), 1)
        handle.oct_log_set(_log_cb, None, level)
        _lib, _lib_path = handle, path
        atexit.register(_log_off)
    return _lib


def lib_path() -> Path:
    """Where the library was loaded from."""
    lib()
    assert _lib_path is not None
    return _lib_path


def enc(s: Optional[str]) -> Optional[bytes]:
    """UTF-8 bytes for a ``const char *`` argument (None stays NULL)."""
    return None if s is None else s.encode("utf-8")


def dec(b: Optional[bytes]) -> Optional[str]:
    """A ``const char *`` result as str (NULL stays None)."""
    return None if b is None else b.decode("utf-8", "replace")
