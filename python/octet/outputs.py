"""The results of LLM.generate and LLM.chat (vLLM's RequestOutput and friends)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class Logprob:
    """Log-probability of one token under the model's distribution (log-softmax
    of the raw logits, before penalties and temperature).

    Attributes:
        logprob: the log-probability.
        rank: 1 + the number of tokens with a larger logit.
        decoded_token: the token's text (None without detokenization).
    """

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


SampleLogprobs = List[Dict[int, Logprob]]
PromptLogprobs = List[Optional[Dict[int, Logprob]]]


@dataclass
class CompletionOutput:
    """One completion of a prompt.

    Attributes:
        index: which of the request's ``n`` completions this is.
        text: the generated text (a matched stop string is cut off, unless
            ``include_stop_str_in_output``).
        token_ids: the generated token ids, including an end-of-sequence or
            stop token that ended the completion.
        cumulative_logprob: the sum of the sampled tokens' log-probabilities
            when ``logprobs`` was asked for, else None.
        logprobs: per generated token, the sampled token's and the top
            ``logprobs`` tokens' log-probabilities, or None.
        finish_reason: "stop" (end-of-sequence, stop token or stop string) or
            "length" (max_tokens or the context length).
        stop_reason: the stop string or stop token id that ended it; None for
            end-of-sequence and length.
    """

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[SampleLogprobs]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None

    def finished(self) -> bool:
        """Whether the completion has ended."""
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """The output of one prompt.

    Attributes:
        request_id: a number, as a string, counted per LLM ("0", "1", ...).
        prompt: the prompt text (for token-id prompts: None; for chat: the
            rendered template).
        prompt_token_ids: the prompt's token ids.
        prompt_logprobs: with ``prompt_logprobs``: None for the first token,
            then per prompt token its and the top tokens' log-probabilities.
        outputs: the ``n`` completions.
        finished: whether every completion has ended.
    """

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    prompt_logprobs: Optional[PromptLogprobs]
    outputs: List[CompletionOutput] = field(default_factory=list)
    finished: bool = False
