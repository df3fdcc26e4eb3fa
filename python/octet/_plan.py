"""octet.inspect: what a checkpoint holds and what loading it will do."""

from __future__ import annotations

import json
import os
from ctypes import byref, c_void_p
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _lib
from .errors import check


@dataclass
class PlanLayer:
    """One unfused linear layer of the load plan.

    Attributes:
        name: the checkpoint's name ("model.layers.0.self_attn.q_proj").
        unit: the unit it runs in: its fused layer ("...qkv_proj"), or its own name.
        n, k: the weight's shape [n, k].
        scheme: "bf16", "fp8_per_tensor", "fp8_per_block", "mxfp8" or the
            checkpoint's own ("FP8_DYNAMIC (checkpoint)", ...).
        ignore_rule: the ignore entry that kept it unquantized, or None.
        kernel: the kernel chosen for its unit ("cpu_avx512_bf16", ...).
        bytes: bytes of its weights and scales once loaded.
    """

    name: str
    unit: str
    n: int
    k: int
    scheme: str
    ignore_rule: Optional[str]
    kernel: str
    bytes: int


@dataclass
class CheckpointLinear:
    """One unfused linear layer as the checkpoint stores it."""

    name: str
    out_features: int
    in_features: int
    weight_dtype: str
    scale_kind: str
    block: Optional[Tuple[int, int]]
    activation: str
    act_group: int
    input_scale: Optional[float]
    bias: bool
    rule: str


@dataclass
class Checkpoint:
    """What a model folder holds (``octet inspect`` without ``--plan``).

    Attributes:
        model: the folder.
        architecture, model_type: from config.json.
        format: "bf16", "compressed-tensors", "quark", "fp8" or "fbgemm_fp8".
        scheme: a short summary ("unquantized", "FP8_DYNAMIC", "FP8_BLOCK", ...).
        quantization_config: config.json's quantization_config, or None.
        kv_cache_quantized: the checkpoint declares a quantized KV cache.
        config: config.json as a dict.
        linears: every unfused linear layer.
    """

    model: str
    architecture: str
    model_type: str
    format: str
    scheme: str
    quantization_config: Optional[Dict[str, Any]]
    kv_cache_quantized: bool
    config: Dict[str, Any]
    linears: List[CheckpointLinear] = field(default_factory=list)


@dataclass
class Plan:
    """What loading a model will do, computed without loading weights
    (``octet inspect --plan``).

    Attributes:
        summary: one line ("online fp8_per_block: 56 of 56 linear layers ...").
        layers: every unfused linear layer with its scheme and kernel.
        n_quantized: how many of them are FP8.
        model_bytes: weights as loaded (quantized linears + the BF16 rest).
        bf16_bytes: the same model in BF16.
        peak_bytes: predicted peak resident memory while loading.
        checkpoint: what the folder holds.
    """

    summary: str
    layers: List[PlanLayer]
    n_quantized: int
    model_bytes: int
    bf16_bytes: int
    peak_bytes: int
    checkpoint: Checkpoint


def _s(b: Optional[bytes]) -> str:
    return _lib.dec(b) or ""


def plan_from_handle(p: c_void_p) -> Plan:
    """A Plan from an ``oct_plan *`` (borrowed)."""
    lib = _lib.lib()
    layers = []
    for i in range(int(lib.oct_plan_n_layers(p))):
        e = lib.oct_plan_layer_at(p, i).contents
        layers.append(
            PlanLayer(
                _s(e.name),
                _s(e.unit),
                int(e.n),
                int(e.k),
                _s(e.scheme),
                _lib.dec(e.ignore_rule),
                _s(e.kernel),
                int(e.bytes),
            )
        )
    return Plan(
        summary=_s(lib.oct_plan_summary(p)),
        layers=layers,
        n_quantized=int(lib.oct_plan_n_quantized(p)),
        model_bytes=int(lib.oct_plan_model_bytes(p)),
        bf16_bytes=int(lib.oct_plan_bf16_bytes(p)),
        peak_bytes=int(lib.oct_plan_peak_bytes(p)),
        checkpoint=checkpoint_from_handle(c_void_p(lib.oct_plan_checkpoint(p))),
    )


def checkpoint_from_handle(ck: c_void_p) -> Checkpoint:
    """A Checkpoint from an ``oct_checkpoint *`` (borrowed)."""
    lib = _lib.lib()
    d = _s(lib.oct_checkpoint_dir(ck))
    head = lib.oct_checkpoint_config(ck).contents
    qc = _lib.dec(lib.oct_checkpoint_quant_config_json(ck))
    try:
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = {}
    linears = []
    for i in range(int(lib.oct_checkpoint_n_linears(ck))):
        lin = lib.oct_checkpoint_linear(ck, i).contents
        block = (int(lin.block_n), int(lin.block_k)) if lin.block_n or lin.block_k else None
        linears.append(
            CheckpointLinear(
                name=_s(lin.name),
                out_features=int(lin.out_features),
                in_features=int(lin.in_features),
                weight_dtype=_s(lib.oct_dtype_str(lin.weight.contents.dtype)),
                scale_kind=_s(lib.oct_wscale_kind_str(lin.scale_kind)),
                block=block,
                activation=_s(lib.oct_act_kind_str(lin.activation)),
                act_group=int(lin.act_group),
                input_scale=float(lin.input_scale_value) if lin.input_scale else None,
                bias=bool(lin.bias),
                rule=_s(lin.rule),
            )
        )
    return Checkpoint(
        model=d,
        architecture=_s(head.architecture),
        model_type=_s(head.model_type),
        format=_s(lib.oct_ckpt_format_str(lib.oct_checkpoint_format(ck))),
        scheme=_s(lib.oct_checkpoint_scheme(ck)),
        quantization_config=json.loads(qc) if qc else None,
        kv_cache_quantized=bool(lib.oct_checkpoint_kv_quantized(ck)),
        config=config,
        linears=linears,
    )


class ModelOpts:
    """An ``oct_model_opts`` and the bytes its strings point to."""

    def __init__(
        self,
        quantization: Optional[str] = None,
        quantization_config: Union[str, Dict[str, Any], None] = None,
        kv_cache_dtype: Optional[str] = "auto",
        calculate_kv_scales: bool = False,
        dtype: Optional[str] = "auto",
        device: Optional[str] = "auto",
        linear_backend: Optional[str] = "auto",
        enforce_eager: bool = False,
        moe_backend: Optional[str] = "auto",
    ) -> None:
        for name, v in (
            ("quantization", quantization),
            ("kv_cache_dtype", kv_cache_dtype),
            ("dtype", dtype),
            ("device", device),
            ("linear_backend", linear_backend),
            ("moe_backend", moe_backend),
        ):
            if v is not None and not isinstance(v, str):
                raise TypeError(f"{name} must be a string or None, got {type(v).__name__}")
        if isinstance(quantization_config, dict):
            quantization_config = json.dumps(quantization_config)
        elif quantization_config is not None and not isinstance(quantization_config, str):
            raise TypeError("quantization_config must be a dict, a JSON string or None")
        self.opts = _lib.OctModelOpts()
        self.opts.quantization = _lib.enc(quantization)
        self.opts.quantization_config = _lib.enc(quantization_config)
        self.opts.kv_cache_dtype = _lib.enc(kv_cache_dtype)
        self.opts.dtype = _lib.enc(dtype)
        self.opts.device = _lib.enc(device)
        self.opts.linear_backend = _lib.enc(linear_backend)
        self.opts.moe_backend = _lib.enc(moe_backend)
        self.opts.calculate_kv_scales = bool(calculate_kv_scales)
        self.opts.enforce_eager = bool(enforce_eager)


def inspect(
    model: str,
    plan: bool = True,
    quantization: Optional[str] = None,
    quantization_config: Union[str, Dict[str, Any], None] = None,
    kv_cache_dtype: str = "auto",
    dtype: str = "auto",
    device: str = "auto",
    linear_backend: str = "auto",
    moe_backend: str = "auto",
) -> Union[Plan, Checkpoint]:
    """What loading `model` with these options would do, without loading its
    weights: a :class:`Plan` (every linear layer's scheme, kernel and bytes,
    the totals and the predicted peak memory).  With ``plan=False``, what the
    checkpoint holds: a :class:`Checkpoint`.

    Raises the same exceptions as :class:`octet.LLM` for a missing folder or a
    bad option.
    """
    lib = _lib.lib()
    err = _lib.OctError()
    h = c_void_p()
    path = os.fspath(model)
    if not plan:
        st = lib.oct_checkpoint_open(_lib.enc(path), None, byref(h), byref(err))
        check(st, err, filename=path)
        try:
            return checkpoint_from_handle(h)
        finally:
            lib.oct_checkpoint_free(h)
    mo = ModelOpts(
        quantization,
        quantization_config,
        kv_cache_dtype,
        False,
        dtype,
        device,
        linear_backend,
        moe_backend=moe_backend,
    )
    st = lib.oct_plan_create(_lib.enc(path), byref(mo.opts), byref(h), byref(err))
    check(st, err, filename=path)
    try:
        return plan_from_handle(h)
    finally:
        lib.oct_plan_free(h)
