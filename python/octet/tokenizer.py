"""Tokenizer: a Hugging Face tokenizer.json (BPE) and chat template, run by octet."""

from __future__ import annotations

import ctypes
import json
from ctypes import byref, c_size_t, c_void_p
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _lib
from .errors import check

Message = Mapping[str, Any]


def _take_text(lib: ctypes.CDLL, ptr: c_void_p, n: c_size_t) -> str:
    """The text the library handed over, released."""
    try:
        return ctypes.string_at(ptr.value, n.value).decode("utf-8", "replace") if ptr.value else ""
    finally:
        lib.oct_tokenizer_text_free(ptr)


class Tokenizer:
    """A model folder's tokenizer (tokenizer.json, tokenizer_config.json,
    chat_template.jinja), with the methods of a transformers tokenizer that
    vLLM users call: :meth:`encode`, :meth:`decode` and
    :meth:`apply_chat_template`.

    Immutable once loaded; safe to use from several threads.
    """

    def __init__(self, path: str) -> None:
        """Loads the tokenizer of the folder `path`."""
        self._lib = _lib.lib()
        self._free = self._lib.oct_tokenizer_free
        self._h = c_void_p()
        self.path = str(path)
        err = _lib.OctError()
        st = self._lib.oct_tokenizer_load(_lib.enc(self.path), byref(self._h), byref(err))
        check(st, err, filename=self.path)

    # ---- lifetime -------------------------------------------------------
    def close(self) -> None:
        """Frees the tokenizer now (it is freed with the object otherwise)."""
        if self._h:
            self._free(self._h)
            self._h = c_void_p()

    def __del__(self) -> None:
        if getattr(self, "_h", None):
            self.close()

    @property
    def handle(self) -> c_void_p:
        """The ``oct_tokenizer *`` (for the package's own use)."""
        if not self._h:
            raise ValueError("the tokenizer is closed")
        return self._h

    # ---- encode / decode ------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of `text`; ``add_special_tokens`` applies the
        post-processor (a BOS token, where the tokenizer adds one)."""
        data = text.encode("utf-8")
        ids = _lib.OctTokenIds()
        err = _lib.OctError()
        try:
            st = self._lib.oct_tokenizer_encode(
                self.handle, data, len(data), add_special_tokens, byref(ids), byref(err)
            )
            check(st, err)
            return ids.ids[: ids.n] if ids.n else []
        finally:
            self._lib.oct_token_ids_free(byref(ids))

    def __call__(self, text: str, add_special_tokens: bool = True) -> Dict[str, List[int]]:
        """``{"input_ids": encode(text)}``, as a transformers tokenizer returns."""
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of `token_ids` (unknown ids are skipped)."""
        ids = list(token_ids)
        arr = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        out, n = c_void_p(), c_size_t()
        err = _lib.OctError()
        st = self._lib.oct_tokenizer_decode(
            self.handle, arr, len(ids), skip_special_tokens, byref(out), byref(n), byref(err)
        )
        if st != _lib.OCT_OK:
            self._lib.oct_tokenizer_text_free(out)
            check(st, err)
        return _take_text(self._lib, out, n)

    def batch_decode(
        self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True
    ) -> List[str]:
        """:meth:`decode` of each sequence."""
        return [self.decode(s, skip_special_tokens) for s in sequences]

    # ---- chat -----------------------------------------------------------
    def apply_chat_template(
        self,
        conversation: Sequence[Message],
        tools: Optional[List[Dict[str, Any]]] = None,
        chat_template: Optional[str] = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        tokenize: bool = True,
        **kwargs: Any,
    ) -> Union[str, List[int]]:
        """Renders `conversation` (a list of ``{"role", "content", ...}``
        messages) with the model's chat template, or `chat_template` when
        given, as transformers does: the text when ``tokenize=False``, else its
        token ids (encoded without adding special tokens).  Further keyword
        arguments are template variables (``enable_thinking=False``, ...).
        """
        if continue_final_message:
            raise ValueError("continue_final_message is not supported by octet")
        extra: Dict[str, Any] = dict(kwargs)
        if tools is not None:
            extra["tools"] = tools
        text = self.render_chat(conversation, add_generation_prompt, extra, chat_template)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def render_chat(
        self,
        conversation: Sequence[Message],
        add_generation_prompt: bool,
        extra: Optional[Mapping[str, Any]] = None,
        chat_template: Optional[str] = None,
    ) -> str:
        """The chat template's text for `conversation` (template variables in
        `extra`)."""
        messages = json.dumps([dict(m) for m in conversation])
        extra_json = json.dumps(dict(extra)) if extra else None
        out, n = c_void_p(), c_size_t()
        err = _lib.OctError()
        st = self._lib.oct_chat_render_json(
            self.handle,
            _lib.enc(chat_template),
            messages.encode("utf-8"),
            _lib.enc(extra_json),
            add_generation_prompt,
            byref(out),
            byref(n),
            byref(err),
        )
        if st != _lib.OCT_OK:
            self._lib.oct_tokenizer_text_free(out)
            check(st, err, "chat template")
        return _take_text(self._lib, out, n)

    # ---- vocabulary -----------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Vocabulary size including added tokens (largest id + 1)."""
        return int(self._lib.oct_tokenizer_vocab_size(self.handle))

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def bos_token_id(self) -> Optional[int]:
        """Id of tokenizer_config.json's bos_token (None when absent)."""
        v = int(self._lib.oct_tokenizer_bos_id(self.handle))
        return v if v >= 0 else None

    @property
    def eos_token_id(self) -> Optional[int]:
        """Id of tokenizer_config.json's eos_token (None when absent)."""
        v = int(self._lib.oct_tokenizer_eos_id(self.handle))
        return v if v >= 0 else None

    @property
    def bos_token(self) -> Optional[str]:
        """tokenizer_config.json's bos_token."""
        return _lib.dec(self._lib.oct_tokenizer_bos_token(self.handle))

    @property
    def eos_token(self) -> Optional[str]:
        """tokenizer_config.json's eos_token."""
        return _lib.dec(self._lib.oct_tokenizer_eos_token(self.handle))

    @property
    def chat_template(self) -> Optional[str]:
        """The chat template text (None when the model has none)."""
        return _lib.dec(self._lib.oct_tokenizer_chat_template(self.handle))

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]]) -> Any:
        """Token strings of ids (None for an unknown id)."""
        if isinstance(ids, int):
            return _lib.dec(self._lib.oct_tokenizer_id_to_token(self.handle, ids))
        return [_lib.dec(self._lib.oct_tokenizer_id_to_token(self.handle, i)) for i in ids]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]) -> Any:
        """Ids of token strings (None for an unknown token)."""

        def one(t: str) -> Optional[int]:
            v = int(self._lib.oct_tokenizer_token_to_id(self.handle, t.encode("utf-8")))
            return v if v >= 0 else None

        if isinstance(tokens, str):
            return one(tokens)
        return [one(t) for t in tokens]

    def is_special(self, token_id: int) -> bool:
        """Whether an id is an added token marked special."""
        return bool(self._lib.oct_tokenizer_is_special(self.handle, token_id))


class Detokenizer:
    """Incremental decoding: :meth:`push` one id at a time, each call returns
    the newly completed text (never half a character)."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer  # the C detokenizer keeps the tokenizer: it must outlive it
        self._lib = tokenizer._lib
        self._free = self._lib.oct_detokenizer_free
        self._h = c_void_p()
        self._piece, self._n = c_void_p(), c_size_t()
        err = _lib.OctError()
        st = self._lib.oct_detokenizer_new(
            tokenizer.handle, skip_special_tokens, byref(self._h), byref(err)
        )
        check(st, err)

    def push(self, token_id: int) -> bytes:
        """The UTF-8 bytes `token_id` completes."""
        err = _lib.OctError()
        st = self._lib.oct_detokenizer_push(
            self._h, token_id, byref(self._piece), byref(self._n), byref(err)
        )
        check(st, err)
        return ctypes.string_at(self._piece.value, self._n.value) if self._n.value else b""

    def flush(self) -> bytes:
        """Whatever is still held back."""
        err = _lib.OctError()
        st = self._lib.oct_detokenizer_flush(self._h, byref(self._piece), byref(self._n), byref(err))
        check(st, err)
        return ctypes.string_at(self._piece.value, self._n.value) if self._n.value else b""

    def close(self) -> None:
        """Frees the decoder."""
        if self._h:
            self._free(self._h)
            self._h = c_void_p()

    def __del__(self) -> None:
        if getattr(self, "_h", None):
            self.close()
