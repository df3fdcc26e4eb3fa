"""LLM: offline batched generation with vLLM's interface, on octet's engine."""

from __future__ import annotations

import ctypes
import heapq
import json
import math
import os
import random
from collections import deque
from ctypes import byref, c_bool, c_float, c_int32, c_int64, c_void_p
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _lib
from ._plan import ModelOpts, Plan, plan_from_handle
from .errors import InvalidArgumentError, LimitError, OctetError, check
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Detokenizer, Message, Tokenizer

# A prompt: text, token ids, or vLLM's {"prompt": ...} / {"prompt_token_ids": ...}.
PromptType = Union[str, Sequence[int], Mapping[str, Any]]

KV_BLOCK_TOKENS = 16  # the session's KV block size

# vLLM arguments accepted for compatibility that change nothing in octet: the
# values each may take (_ANY: whatever it is).
_ANY = object()
_INERT_ARGS: Dict[str, Any] = {
    "trust_remote_code": _ANY,
    "tokenizer_mode": ("auto",),
    "revision": (None,),
    "tokenizer_revision": (None,),
    "code_revision": (None,),
    "swap_space": _ANY,
    "cpu_offload_gb": (0,),
    "disable_custom_all_reduce": _ANY,
    "disable_log_stats": _ANY,
    "hf_token": _ANY,
    "download_dir": _ANY,
    "load_format": ("auto", "safetensors"),
    "pipeline_parallel_size": (1,),
    "enable_prefix_caching": _ANY,
    "max_seq_len_to_capture": _ANY,
    "compilation_config": _ANY,
}


class _Seq:
    """One completion being generated: its tokens, sampler and text."""

    def __init__(
        self,
        req: "_Request",
        index: int,
        seed: int,
    ) -> None:
        self.req = req
        self.index = index
        self.seed = seed
        sp = req.params
        self.tokens: List[int] = list(req.prompt_ids)
        self.n_prompt = len(self.tokens)
        self.max_tokens = req.max_tokens
        self.blocks = -(-(self.n_prompt + self.max_tokens) // KV_BLOCK_TOKENS)
        self.cached = 0  # tokens in the KV cache
        self.slot = -1  # the session's sequence id while running
        self.sampler = c_void_p()
        self.hist: Any = None  # c_int32 array mirroring tokens (penalty history)
        self.detok: Optional[Detokenizer] = None
        self.text = b""  # generated text so far (stop strings cut it)
        self.emitted = 0  # bytes of text streamed out
        self.finish_reason: Optional[str] = None
        self.stop_reason: Union[int, str, None] = None
        self.logprobs: Optional[List[Dict[int, Logprob]]] = (
            [] if sp.logprobs is not None else None
        )
        self.cum_logprob = 0.0
        self.prompt_logprobs: Optional[List[Optional[Dict[int, Logprob]]]] = None
        if sp.prompt_logprobs is not None and index == 0:
            self.prompt_logprobs = [None]

    @property
    def n_out(self) -> int:
        return len(self.tokens) - self.n_prompt

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class _Request:
    """One prompt of a generate call with its parameters and completions."""

    def __init__(
        self,
        request_id: str,
        prompt: Optional[str],
        prompt_ids: List[int],
        params: SamplingParams,
        max_tokens: int,
    ) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_ids = prompt_ids
        self.params = params
        self.max_tokens = max_tokens
        self.seqs: List[_Seq] = []
        self.prompt_logprobs: Optional[List[Optional[Dict[int, Logprob]]]] = None


def _log_softmax_top(
    row: Sequence[float], chosen: int, k: int
) -> Tuple[float, int, List[Tuple[int, float]]]:
    """(logprob of `chosen`, its rank, the top `k` (id, logprob); k < 0: all)."""
    m = max(row)
    if m == -math.inf:
        return -math.inf, 1, []
    lse = m + math.log(math.fsum(math.exp(x - m) for x in row))
    x = row[chosen]
    rank = 1 + sum(1 for y in row if y > x)
    V = len(row)
    if k < 0 or k >= V:
        top = sorted(range(V), key=lambda i: -row[i])
    elif k == 0:
        top = []
    else:
        top = heapq.nlargest(k, range(V), key=row.__getitem__)
    return x - lse, rank, [(i, row[i] - lse) for i in top]


class LLM:
    """A model loaded for offline inference, with vLLM's ``LLM`` interface.

    ``LLM(model)`` loads the Hugging Face folder `model` (quantizing it to FP8
    while loading when ``quantization`` / ``quantization_config`` ask for it;
    a pre-quantized checkpoint runs with its own scheme) and its tokenizer,
    and sets up a KV cache for ``max_num_seqs`` sequences of
    ``max_model_len`` tokens.

    Args:
        model: the model folder.
        tokenizer: a folder with the tokenizer files (default: `model`).
        quantization: None, "fp8", "fp8_per_tensor", "fp8_per_block",
            "mxfp8" or "online" (vLLM's ``--quantization``).
        quantization_config: vLLM's online config, a dict or JSON text
            (``{"linear": ..., "moe": ..., "ignore": [...]}``).
        kv_cache_dtype: "auto", "float32", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2".
        calculate_kv_scales: FP8 KV scales from the first prompt.
        dtype: "auto", "bfloat16" or "float32" (unquantized layers).
        device: "auto", "cuda" or "cpu".
        max_model_len: prompt + output tokens per sequence (default: from
            config.json, as vLLM derives it).
        max_num_seqs: sequences decoded together (default 32).
        max_num_batched_tokens: tokens per forward pass; longer prompts are
            prefilled in chunks (default 2048).
        seed: seeds the per-request seeds of requests that give none.
        linear_backend: "auto", "cuda", "cpu", "avx512", "avx2" or "ref".
        moe_backend: the MoE experts' kernels (vLLM's ``moe_backend``): "auto"
            (as linear_backend), "cuda" / "cuda_grouped" (the GPU's grouped
            expert GEMM), "cpu", "avx512", "avx2", "ref" (with device="cpu").
        enforce_eager: no CUDA graphs on the GPU.
        gpu_memory_utilization: accepted for compatibility (must be in
            (0, 1]); the KV cache is sized by max_num_seqs x max_model_len or
            ``num_gpu_blocks_override``.
        num_gpu_blocks_override: the KV cache in 16-token blocks; sequences
            wait until their blocks are free.
        tensor_parallel_size: must be 1.
        generation_config: "auto" takes the default sampling parameters from
            the model's generation_config.json (as vLLM); "vllm" ignores it.
        threads: CPU kernel threads (process-wide; default all CPUs).

    Raises:
        FileNotFoundError: the model folder or its config.json is missing
            (an :class:`octet.OctetError` too).
        ValueError: a bad option or a malformed checkpoint.
        TypeError: an argument octet does not know.

    One thread at a time may use an LLM.
    """

    def __init__(
        self,
        model: Union[str, "os.PathLike[str]"],
        *,
        tokenizer: Optional[str] = None,
        skip_tokenizer_init: bool = False,
        quantization: Optional[str] = None,
        quantization_config: Union[str, Dict[str, Any], None] = None,
        kv_cache_dtype: str = "auto",
        calculate_kv_scales: bool = False,
        dtype: str = "auto",
        device: str = "auto",
        max_model_len: Optional[int] = None,
        max_num_seqs: Optional[int] = None,
        max_num_batched_tokens: Optional[int] = None,
        seed: Optional[int] = 0,
        linear_backend: str = "auto",
        moe_backend: str = "auto",
        enforce_eager: bool = False,
        gpu_memory_utilization: float = 0.9,
        num_gpu_blocks_override: Optional[int] = None,
        tensor_parallel_size: int = 1,
        generation_config: str = "auto",
        threads: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        self._lib = _lib.lib()
        self._model = c_void_p()
        self._session = c_void_p()
        self._tokenizer: Optional[Tokenizer] = None
        self._busy = False
        for k, v in kwargs.items():
            if k not in _INERT_ARGS:
                raise TypeError(f"LLM() got an unexpected keyword argument '{k}'")
            allowed = _INERT_ARGS[k]
            if allowed is not _ANY and v not in allowed:
                raise ValueError(
                    f"{k}={v!r} is not supported by octet (only "
                    + " or ".join(repr(a) for a in allowed)
                    + ")"
                )
        if tensor_parallel_size != 1:
            raise ValueError("tensor_parallel_size must be 1: octet runs one device")
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"GPU memory utilization must be within (0, 1]. Got {gpu_memory_utilization}."
            )
        if generation_config not in ("auto", "vllm"):
            raise ValueError("generation_config must be 'auto' or 'vllm'")
        for name, v in (
            ("max_model_len", max_model_len),
            ("max_num_seqs", max_num_seqs),
            ("max_num_batched_tokens", max_num_batched_tokens),
            ("num_gpu_blocks_override", num_gpu_blocks_override),
            ("threads", threads),
        ):
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if seed is not None and (not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.model = os.fspath(model)
        self.seed = 0 if seed is None else seed
        self._seeds = random.Random(self.seed)
        self._next_request = 0
        self._generation_config = generation_config
        if threads is not None:
            self._lib.oct_threads_set(threads)
        mo = ModelOpts(
            quantization,
            quantization_config,
            kv_cache_dtype,
            calculate_kv_scales,
            dtype,
            device,
            linear_backend,
            enforce_eager,
            moe_backend=moe_backend,
        )
        # Freed in close(); the bound functions outlive module teardown.
        self._model_free = self._lib.oct_model_free
        self._session_free = self._lib.oct_session_free
        err = _lib.OctError()
        st = self._lib.oct_model_load(
            _lib.enc(self.model), byref(mo.opts), byref(self._model), byref(err)
        )
        check(st, err, filename=self.model)
        try:
            self._setup(
                tokenizer, skip_tokenizer_init, max_model_len, max_num_seqs,
                max_num_batched_tokens, num_gpu_blocks_override,
            )
        except BaseException:
            self.close()
            raise

    def _setup(
        self,
        tokenizer: Optional[str],
        skip_tokenizer_init: bool,
        max_model_len: Optional[int],
        max_num_seqs: Optional[int],
        max_num_batched_tokens: Optional[int],
        num_blocks: Optional[int],
    ) -> None:
        lib = self._lib
        err = _lib.OctError()
        cfg = c_void_p(lib.oct_model_get_config(self._model))
        n = c_int64()
        check(lib.oct_model_config_max_len(cfg, max_model_len or 0, byref(n), byref(err)), err)
        self.max_model_len = int(n.value)
        self.max_num_seqs = max_num_seqs or 32
        self.max_num_batched_tokens = max(max_num_batched_tokens or 2048, self.max_num_seqs)
        self.vocab_size = int(lib.oct_model_vocab_size(self._model))
        eos = (c_int32 * 24)()
        n_eos = lib.oct_model_config_eos_ids(cfg, eos, 23)
        self.eos_token_ids: List[int] = list(eos[:n_eos])
        if not skip_tokenizer_init:
            self._tokenizer = Tokenizer(tokenizer or self.model)
            t_eos = self._tokenizer.eos_token_id
            if t_eos is not None and t_eos not in self.eos_token_ids:
                self.eos_token_ids.append(t_eos)
        check(
            lib.oct_session_create_pool(
                self._model,
                self.max_num_seqs,
                self.max_model_len,
                num_blocks or 0,
                byref(self._session),
                byref(err),
            ),
            err,
        )
        self.num_kv_blocks = int(lib.oct_session_kv_blocks_total(self._session))
        self._free_slots: List[int] = []
        self._free_blocks = 0
        self._logits: Any = None
        self._logits_rows = 0

    # ---- lifetime -------------------------------------------------------
    def close(self) -> None:
        """Frees the KV cache and the model now (otherwise done when the
        object is collected).  The LLM is unusable afterwards."""
        if getattr(self, "_session", None):
            self._session_free(self._session)
            self._session = c_void_p()
        if getattr(self, "_model", None):
            self._model_free(self._model)
            self._model = c_void_p()
        self._tokenizer = None
        self._logits = None

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if not self._model:
            raise ValueError("this LLM is closed")
        if self._busy:
            raise RuntimeError(
                "this LLM is running another generation (a stream not yet exhausted or closed)"
            )

    # ---- information ----------------------------------------------------
    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (encode, decode, apply_chat_template)."""
        if self._tokenizer is None:
            raise ValueError("the LLM was created with skip_tokenizer_init=True")
        return self._tokenizer

    @property
    def plan(self) -> Plan:
        """The plan the model was loaded with (schemes, kernels, bytes)."""
        if not self._model:
            raise ValueError("this LLM is closed")
        return plan_from_handle(c_void_p(self._lib.oct_model_get_plan(self._model)))

    @property
    def load_seconds(self) -> float:
        """How long loading took."""
        return float(self._lib.oct_model_load_seconds(self._model))

    @property
    def load_peak_bytes(self) -> int:
        """Measured peak resident memory right after loading."""
        return int(self._lib.oct_model_load_peak_bytes(self._model))

    def kv_blocks_used(self) -> int:
        """KV-cache blocks in use (0 between calls)."""
        return int(self._lib.oct_session_kv_blocks_used(self._session))

    def get_default_sampling_params(self) -> SamplingParams:
        """SamplingParams() with the model's generation_config.json values
        (temperature, top_p, top_k, min_p, repetition_penalty,
        max_new_tokens), as vLLM's generation_config="auto"."""
        if self._generation_config != "auto":
            return SamplingParams()
        try:
            with open(os.path.join(self.model, "generation_config.json"), encoding="utf-8") as f:
                gc = json.load(f)
        except (OSError, ValueError):
            return SamplingParams()
        keys = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
        kw: Dict[str, Any] = {k: gc[k] for k in keys if isinstance(gc.get(k), (int, float))}
        if isinstance(gc.get("max_new_tokens"), int):
            kw["max_tokens"] = gc["max_new_tokens"]
        if "top_k" in kw:
            kw["top_k"] = int(kw["top_k"])
        return SamplingParams(**kw)

    # ---- requests -------------------------------------------------------
    def _prompt_ids(self, p: PromptType) -> Tuple[Optional[str], List[int]]:
        if isinstance(p, str):
            return p, self.get_tokenizer().encode(p, add_special_tokens=True)
        if isinstance(p, Mapping):
            if "prompt_token_ids" in p:
                ids = list(p["prompt_token_ids"])
                return p.get("prompt"), ids
            if "prompt" in p:
                return self._prompt_ids(str(p["prompt"]))
            raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
        ids = list(p)
        return None, ids

    def _requests(
        self,
        prompts: Union[PromptType, Sequence[PromptType]],
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None],
    ) -> List[_Request]:
        if isinstance(prompts, (str, Mapping)):
            plist: List[PromptType] = [prompts]
        else:
            seq = list(prompts)
            if seq and all(isinstance(x, int) for x in seq):
                plist = [seq]  # one prompt of token ids
            else:
                plist = seq
        if sampling_params is None:
            sampling_params = self.get_default_sampling_params()
        if isinstance(sampling_params, SamplingParams):
            params = [sampling_params] * len(plist)
        else:
            params = list(sampling_params)
            if len(params) != len(plist):
                raise ValueError("The lengths of prompts and sampling_params must be the same.")
        reqs = []
        for p, sp in zip(plist, params):
            if not isinstance(sp, SamplingParams):
                raise TypeError("sampling_params must be SamplingParams or a list of them")
            text, ids = self._prompt_ids(p)
            if sp.truncate_prompt_tokens is not None:
                ids = ids[-sp.truncate_prompt_tokens :]
            reqs.append(self._request(text, ids, sp))
        return reqs

    def _request(self, text: Optional[str], ids: List[int], sp: SamplingParams) -> _Request:
        if not ids:
            raise InvalidArgumentError("The decoder prompt cannot be empty")
        for t in ids:
            if not isinstance(t, int) or t < 0 or t >= self.vocab_size:
                raise InvalidArgumentError(f"Token id {t} is out of vocabulary")
        if len(ids) > self.max_model_len:
            raise LimitError(
                f"The decoder prompt (length {len(ids)}) is longer than the maximum model "
                f"length of {self.max_model_len}. Make sure that `max_model_len` is no "
                f"smaller than the number of text tokens."
            )
        if sp.detokenize and self._tokenizer is None:
            raise ValueError("detokenize=True needs the tokenizer (skip_tokenizer_init=False)")
        room = self.max_model_len - len(ids)
        max_tokens = room if sp.max_tokens is None else min(sp.max_tokens, room)
        req = _Request(str(self._next_request), text, ids, sp, max_tokens)
        self._next_request += 1
        for i in range(sp.n):
            if sp.seed is not None:
                seed = sp.seed + i
            else:
                seed = self._seeds.getrandbits(63)
            s = _Seq(req, i, seed)
            if s.blocks > self.num_kv_blocks:
                raise LimitError(
                    f"a sequence of {len(ids)} prompt + {max_tokens} output tokens needs "
                    f"{s.blocks} KV blocks; the cache has {self.num_kv_blocks}"
                )
            req.seqs.append(s)
        return req

    # ---- the engine loop --------------------------------------------------
    def _admit(self, s: _Seq) -> None:
        """Slot, KV blocks, sampler and detokenizer for a waiting sequence."""
        lib = self._lib
        sp = s.req.params
        smp = _lib.OctSampling()
        lib.oct_sampling_default(byref(smp))
        smp.temperature = sp.temperature
        smp.top_k = sp.top_k
        smp.top_p = sp.top_p
        smp.min_p = sp.min_p
        smp.repetition_penalty = sp.repetition_penalty
        smp.presence_penalty = sp.presence_penalty
        smp.frequency_penalty = sp.frequency_penalty
        smp.seed = s.seed
        st = lib.oct_sampler_create(byref(smp), self.vocab_size, byref(s.sampler))
        check(st, None, "sampler")
        cap = s.n_prompt + s.max_tokens + 1
        s.hist = (c_int32 * cap)(*s.tokens)
        if sp.detokenize:
            assert self._tokenizer is not None
            s.detok = Detokenizer(self._tokenizer, sp.skip_special_tokens)
        self._free_blocks -= s.blocks
        s.slot = self._free_slots.pop()

    def _release(self, s: _Seq) -> None:
        """Gives back what _admit took (idempotent; also for a sequence whose
        admission was interrupted half way)."""
        if s.slot >= 0:
            self._lib.oct_session_reset_seq(self._session, s.slot)
            self._free_slots.append(s.slot)
            self._free_blocks += s.blocks
            s.slot = -1
        if s.sampler:
            self._lib.oct_sampler_free(s.sampler)
            s.sampler = c_void_p()
        if s.detok is not None:
            s.detok.close()
            s.detok = None
        s.hist = None

    def _logits_buffer(self, rows: int) -> Any:
        if rows > self._logits_rows:
            self._logits_rows = max(rows, 2 * self._logits_rows)
            self._logits = (c_float * (self._logits_rows * self.vocab_size))()
        return self._logits

    def _steps(self, reqs: List[_Request]) -> Iterator[List[_Seq]]:
        """Runs every sequence of `reqs` to its end with continuous batching:
        each step is one forward pass over the running decodes and prefill
        chunks up to max_num_batched_tokens.  Yields the sequences that got a
        token after each step.  Whatever way it ends (finished, an error,
        KeyboardInterrupt, the generator closed), every sequence's KV blocks
        are freed."""
        lib = self._lib
        waiting: Deque[_Seq] = deque(s for r in reqs for s in r.seqs)
        for s in list(waiting):
            if s.max_tokens <= 0:
                s.finish_reason = "length"
                waiting.remove(s)
        running: List[_Seq] = []
        err = _lib.OctError()
        if self._busy:
            raise RuntimeError("this LLM is running another generation")
        self._busy = True
        # Every slot and block is free between calls.
        self._free_slots = list(range(self.max_num_seqs - 1, -1, -1))
        self._free_blocks = self.num_kv_blocks
        try:
            while waiting or running:
                while waiting and self._free_slots and waiting[0].blocks <= self._free_blocks:
                    s = waiting.popleft()
                    running.append(s)  # before _admit: whatever it took is released
                    self._admit(s)
                toks: List[int] = []
                seqs: List[int] = []
                pos: List[int] = []
                want: List[bool] = []
                rows: List[Tuple[_Seq, int]] = []  # (sequence, position) per logits row
                budget = self.max_num_batched_tokens
                decodes = [s for s in running if len(s.tokens) - s.cached == 1]
                prefills = [s for s in running if len(s.tokens) - s.cached > 1]
                for s in decodes + prefills:
                    if budget <= 0:
                        break
                    end = min(len(s.tokens), s.cached + budget)
                    all_rows = s.prompt_logprobs is not None and s.cached < s.n_prompt
                    for p in range(s.cached, end):
                        toks.append(s.tokens[p])
                        seqs.append(s.slot)
                        pos.append(p)
                        w = p == len(s.tokens) - 1 or all_rows
                        want.append(w)
                        if w:
                            rows.append((s, p))
                    budget -= end - s.cached
                    s.cached = end
                n = len(toks)
                logits = self._logits_buffer(len(rows))
                st = lib.oct_session_forward(
                    self._session,
                    n,
                    (c_int32 * n)(*toks),
                    (c_int32 * n)(*seqs),
                    (c_int64 * n)(*pos),
                    (c_bool * n)(*want),
                    logits,
                    byref(err),
                )
                check(st, err)
                stepped: List[_Seq] = []
                for r, (s, p) in enumerate(rows):
                    if p < s.n_prompt - 1:
                        self._prompt_logprob(s, logits, r, p)
                        continue
                    if s.prompt_logprobs is not None and p == s.n_prompt - 1:
                        s.req.prompt_logprobs = s.prompt_logprobs
                    self._sample(s, logits, r)
                    stepped.append(s)
                for s in stepped:
                    if s.done:
                        running.remove(s)
                        self._release(s)
                yield stepped
        finally:
            for s in running:
                self._release(s)
            # Also a slot an interrupted admission took without recording it.
            for slot in range(self.max_num_seqs):
                lib.oct_session_reset_seq(self._session, slot)
            self._busy = False

    def _prompt_logprob(self, s: _Seq, logits: Any, r: int, p: int) -> None:
        V = self.vocab_size
        row = logits[r * V : (r + 1) * V]
        k = s.req.params.prompt_logprobs
        assert k is not None and s.prompt_logprobs is not None
        nxt = s.tokens[p + 1]
        lp, rank, top = _log_softmax_top(row, nxt, k)
        s.prompt_logprobs.append(self._logprob_dict(s, nxt, lp, rank, top))

    def _logprob_dict(
        self, s: _Seq, tok: int, lp: float, rank: int, top: List[Tuple[int, float]]
    ) -> Dict[int, Logprob]:
        detok = s.req.params.detokenize and self._tokenizer is not None

        def text(i: int) -> Optional[str]:
            return self._tokenizer.decode([i], False) if detok and self._tokenizer else None

        d = {tok: Logprob(lp, rank, text(tok))}
        for j, (i, v) in enumerate(top):
            if i not in d:
                d[i] = Logprob(v, j + 1, text(i))
        return d

    def _sample(self, s: _Seq, logits: Any, r: int) -> None:
        """Samples the next token of `s` from logits row `r` and takes it."""
        lib = self._lib
        V = self.vocab_size
        sp = s.req.params
        base = r * V
        raw = logits[base : base + V] if sp.logprobs is not None else None
        if sp.logit_bias:
            for t, b in sp.logit_bias.items():
                if 0 <= t < V:
                    logits[base + t] += b
        if sp.allowed_token_ids is not None:
            allowed = set(sp.allowed_token_ids)
            for t in range(V):
                if t not in allowed:
                    logits[base + t] = -math.inf
        if s.n_out < sp.min_tokens:
            stops = list(sp.stop_token_ids or [])
            if not sp.ignore_eos:
                stops += self.eos_token_ids
            for t in stops:
                if 0 <= t < V:
                    logits[base + t] = -math.inf
        out = c_int32(-1)
        st = lib.oct_sampler_sample(
            s.sampler,
            ctypes.cast(ctypes.byref(logits, base * 4), ctypes.POINTER(c_float)),
            s.hist,
            len(s.tokens),
            byref(out),
        )
        if st != _lib.OCT_OK:
            raise InvalidArgumentError("the model produced non-finite logits (NaN or +Inf)")
        tok = int(out.value)
        if raw is not None:
            assert s.logprobs is not None and sp.logprobs is not None
            lp, rank, top = _log_softmax_top(raw, tok, sp.logprobs)
            s.logprobs.append(self._logprob_dict(s, tok, lp, rank, top))
            s.cum_logprob += lp
        s.hist[len(s.tokens)] = tok
        s.tokens.append(tok)
        self._take(s, tok)

    def _take(self, s: _Seq, tok: int) -> None:
        """Text and the stop conditions after token `tok`."""
        sp = s.req.params
        assert isinstance(sp.stop_token_ids, list) and isinstance(sp.stop, list)
        if tok in sp.stop_token_ids:
            s.finish_reason, s.stop_reason = "stop", tok
        elif tok in self.eos_token_ids and not sp.ignore_eos:
            s.finish_reason = "stop"
        elif s.detok is not None:
            old = len(s.text)
            s.text += s.detok.push(tok)
            if sp.stop and self._stop_scan(s, old):
                return
        if s.finish_reason is None and (
            s.n_out >= s.max_tokens or len(s.tokens) >= self.max_model_len
        ):
            s.finish_reason = "length"
        if s.finish_reason is not None and s.detok is not None:
            s.text += s.detok.flush()
            if sp.stop and s.stop_reason is None:
                self._stop_scan(s, 0)

    def _stop_scan(self, s: _Seq, old: int) -> bool:
        """Cuts the text at the earliest stop string ending after byte `old`."""
        sp = s.req.params
        assert isinstance(sp.stop, list)
        best: Optional[Tuple[int, int, str]] = None
        for stop in sp.stop:
            b = stop.encode("utf-8")
            i = s.text.find(b, max(0, old - len(b) + 1))
            if i >= 0 and (best is None or i < best[0]):
                best = (i, len(b), stop)
        if best is None:
            return False
        i, n, stop = best
        s.text = s.text[: i + n] if sp.include_stop_str_in_output else s.text[:i]
        s.finish_reason, s.stop_reason = "stop", stop
        return True

    def _hold(self, s: _Seq) -> int:
        """Bytes at the end of the text that may still grow into a stop string."""
        sp = s.req.params
        assert isinstance(sp.stop, list)
        if s.done:
            return 0
        keep = 0
        for stop in sp.stop:
            b = stop.encode("utf-8")
            for k in range(min(len(b) - 1, len(s.text)), keep, -1):
                if s.text.endswith(b[:k]):
                    keep = k
                    break
        return keep

    def _output(self, req: _Request) -> RequestOutput:
        outs = []
        for s in req.seqs:
            outs.append(
                CompletionOutput(
                    index=s.index,
                    text=s.text.decode("utf-8", "replace"),
                    token_ids=s.tokens[s.n_prompt :],
                    cumulative_logprob=s.cum_logprob if s.logprobs is not None else None,
                    logprobs=s.logprobs,
                    finish_reason=s.finish_reason,
                    stop_reason=s.stop_reason,
                )
            )
        return RequestOutput(
            request_id=req.request_id,
            prompt=req.prompt,
            prompt_token_ids=list(req.prompt_ids),
            prompt_logprobs=req.prompt_logprobs,
            outputs=outs,
            finished=all(s.done for s in req.seqs),
        )

    # ---- public generation ----------------------------------------------
    def generate(
        self,
        prompts: Union[PromptType, Sequence[PromptType]],
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
        use_tqdm: Union[bool, Callable[..., Any]] = True,
        lora_request: Any = None,
        priority: Optional[List[int]] = None,
    ) -> List[RequestOutput]:
        """Completes every prompt and returns one :class:`RequestOutput` per
        prompt, in order.

        `prompts` is one prompt or a list of them; a prompt is text, a list of
        token ids, or ``{"prompt": text}`` / ``{"prompt_token_ids": ids}``.
        `sampling_params` is one :class:`SamplingParams` for all, one per
        prompt, or None for :meth:`get_default_sampling_params`.  All prompts
        run together: up to max_num_seqs sequences are decoded in one forward
        pass per step, and a finished one's place goes to the next waiting.

        Ctrl-C (KeyboardInterrupt) stops the work between two steps and
        frees it; the LLM stays usable.  ``use_tqdm`` and ``priority`` are
        accepted and ignored; ``lora_request`` must be None.
        """
        self._check_open()
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported by octet")
        reqs = self._requests(prompts, sampling_params)
        for _ in self._steps(reqs):
            pass
        return [self._output(r) for r in reqs]

    def stream(
        self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None
    ) -> Iterator[str]:
        """Generates one completion of `prompt` and yields its text piece by
        piece as it decodes (never half a character; text that may still
        become a stop string is held back until it is settled).  Closing the
        generator early, or Ctrl-C, frees the sequence.  The LLM runs nothing
        else until the generator ends or is closed."""
        self._check_open()
        sp = sampling_params or self.get_default_sampling_params()
        if sp.n != 1:
            raise ValueError("stream() generates one completion: n must be 1")
        if not sp.detokenize:
            raise ValueError("stream() yields text: detokenize must be True")
        (req,) = self._requests(prompt, sp)
        return self._stream(req)

    def _stream(self, req: _Request) -> Iterator[str]:
        (s,) = req.seqs
        for _ in self._steps([req]):
            upto = len(s.text) - self._hold(s)
            if upto > s.emitted:
                piece = s.text[s.emitted : upto]
                s.emitted = upto
                yield piece.decode("utf-8", "replace")
        if len(s.text) > s.emitted:
            yield s.text[s.emitted :].decode("utf-8", "replace")

    def chat(
        self,
        messages: Union[Sequence[Message], Sequence[Sequence[Message]]],
        sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
        use_tqdm: Union[bool, Callable[..., Any]] = True,
        lora_request: Any = None,
        chat_template: Optional[str] = None,
        chat_template_content_format: str = "auto",
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: Optional[List[Dict[str, Any]]] = None,
        chat_template_kwargs: Optional[Dict[str, Any]] = None,
    ) -> List[RequestOutput]:
        """Generates the reply to one conversation (a list of ``{"role",
        "content"}`` messages) or to each of a list of conversations: each is
        rendered with the chat template (or `chat_template`), tokenized
        without adding special tokens, and run as :meth:`generate` runs its
        prompts.  ``chat_template_kwargs`` (and ``tools``) become template
        variables.  RequestOutput.prompt is the rendered text."""
        self._check_open()
        if continue_final_message:
            raise ValueError("continue_final_message is not supported by octet")
        if lora_request is not None:
            raise ValueError("LoRA adapters are not supported by octet")
        if not messages:
            raise ValueError("messages must not be empty")
        convs: List[Sequence[Message]]
        if isinstance(messages[0], Mapping):
            convs = [messages]  # type: ignore[list-item]
        else:
            convs = list(messages)  # type: ignore[arg-type]
        tok = self.get_tokenizer()
        extra: Dict[str, Any] = dict(chat_template_kwargs or {})
        if tools is not None:
            extra["tools"] = tools
        prompts: List[PromptType] = []
        for conv in convs:
            text = tok.render_chat(conv, add_generation_prompt, extra, chat_template)
            prompts.append(
                {"prompt": text, "prompt_token_ids": tok.encode(text, add_special_tokens=False)}
            )
        return self.generate(prompts, sampling_params)


__all__ = ["LLM", "PromptType", "OctetError"]
