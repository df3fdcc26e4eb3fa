"""SamplingParams: vLLM's sampling parameters, with its names, defaults and checks."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

# Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
_SAMPLING_EPS = 1e-5


@dataclass
class SamplingParams:
    """How to sample the completions of one prompt (vLLM's ``SamplingParams``).

    Every field keeps vLLM's meaning and default.  ``top_k`` 0 or -1 turns
    top-k off; a temperature below 1e-5 is greedy (and then top-p, top-k and
    min-p do not apply).  ``max_tokens=None`` generates up to the context
    length.  ``logprobs=-1`` returns the whole vocabulary's log-probabilities.

    Fields octet does not implement (``best_of`` other than ``n``,
    ``bad_words``, ``logits_processors``, ``structured_outputs`` /
    ``guided_decoding``, ``spaces_between_special_tokens=False``) raise a
    ValueError naming them when set.
    """

    n: int = 1
    best_of: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    bad_words: Optional[List[str]] = None
    ignore_eos: bool = False
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    logits_processors: Optional[List[Any]] = None
    include_stop_str_in_output: bool = False
    truncate_prompt_tokens: Optional[int] = None
    logit_bias: Optional[Dict[int, float]] = None
    allowed_token_ids: Optional[List[int]] = None
    structured_outputs: Optional[Any] = None
    guided_decoding: Optional[Any] = None
    extra_args: Optional[Dict[str, Any]] = field(default=None)

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        elif self.stop is None:
            self.stop = []
        else:
            self.stop = list(self.stop)
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.top_k == -1:
            self.top_k = 0
        if self.logit_bias is not None:
            self.logit_bias = {int(k): float(v) for k, v in self.logit_bias.items()}
        self._verify()
        if self.temperature < _SAMPLING_EPS:
            # Greedy: what vLLM does with a zero temperature.
            self.temperature = 0.0
            self.top_p = 1.0
            self.top_k = 0
            self.min_p = 0.0

    def _verify(self) -> None:
        def bad(msg: str) -> ValueError:
            return ValueError(msg)

        if not isinstance(self.n, int) or self.n < 1:
            raise bad(f"n must be at least 1, got {self.n}.")
        if self.best_of is not None and self.best_of != self.n:
            raise bad("best_of is not supported by octet (it must be None or equal n).")
        if not -2.0 <= self.presence_penalty <= 2.0:
            raise bad(f"presence_penalty must be in [-2, 2], got {self.presence_penalty}.")
        if not -2.0 <= self.frequency_penalty <= 2.0:
            raise bad(f"frequency_penalty must be in [-2, 2], got {self.frequency_penalty}.")
        if not self.repetition_penalty > 0.0:
            raise bad(
                f"repetition_penalty must be greater than zero, got {self.repetition_penalty}."
            )
        if not self.temperature >= 0.0:
            raise bad(f"temperature must be non-negative, got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise bad(f"top_p must be in (0, 1], got {self.top_p}.")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise bad(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if not 0.0 <= self.min_p <= 1.0:
            raise bad(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise bad(f"seed must be a non-negative integer or None, got {self.seed}.")
        if self.max_tokens is not None and (
            not isinstance(self.max_tokens, int) or self.max_tokens < 1
        ):
            raise bad(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if not isinstance(self.min_tokens, int) or self.min_tokens < 0:
            raise bad(f"min_tokens must be greater than or equal to 0, got {self.min_tokens}.")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise bad(
                f"min_tokens must be less than or equal to max_tokens={self.max_tokens}, "
                f"got {self.min_tokens}."
            )
        for name in ("logprobs", "prompt_logprobs"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < -1):
                raise bad(f"{name} must be non-negative or -1, got {v}.")
        if self.truncate_prompt_tokens is not None and (
            not isinstance(self.truncate_prompt_tokens, int) or self.truncate_prompt_tokens < 1
        ):
            raise bad(
                f"truncate_prompt_tokens must be >= 1, got {self.truncate_prompt_tokens}"
            )
        assert isinstance(self.stop, list) and isinstance(self.stop_token_ids, list)
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise bad("stop strings must be non-empty strings.")
        if any(not isinstance(t, int) or t < 0 for t in self.stop_token_ids):
            raise bad("stop_token_ids must be non-negative integers.")
        if self.stop and not self.detokenize:
            raise bad("stop strings are only supported when detokenize is True.")
        if self.bad_words:
            raise bad("bad_words is not supported by octet.")
        if self.logits_processors:
            raise bad("logits_processors is not supported by octet.")
        if self.structured_outputs is not None or self.guided_decoding is not None:
            raise bad("structured outputs (guided decoding) are not supported by octet.")
        if not self.spaces_between_special_tokens:
            raise bad("spaces_between_special_tokens=False is not supported by octet.")
        if self.allowed_token_ids is not None and not self.allowed_token_ids:
            raise bad("allowed_token_ids is not allowed to be empty.")

    @property
    def sampling_type(self) -> str:
        """"greedy", "random_seed" or "random", as vLLM classifies a request."""
        if self.temperature == 0.0:
            return "greedy"
        return "random" if self.seed is None else "random_seed"

    def clone(self) -> "SamplingParams":
        """A deep copy."""
        return copy.deepcopy(self)
