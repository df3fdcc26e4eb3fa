"""Exceptions raised by octet.

Every error the library reports is an :class:`OctetError` carrying octet's own
message and status.  Each status also derives from the built-in exception a
Python caller expects: a bad argument or a malformed file is a ``ValueError``,
a missing model folder a ``FileNotFoundError``, an allocation failure a
``MemoryError``.
"""

from __future__ import annotations

import errno
from typing import Dict, Optional, Type

from . import _lib


class OctetError(Exception):
    """Base of every error octet raises.

    Attributes:
        status: the C library's ``oct_status`` name ("invalid argument", ...).
        offset: the byte offset into the input the error refers to, or -1.
    """

    status: str = "internal error"
    offset: int = -1

    def __init__(self, message: str, status: Optional[str] = None, offset: int = -1) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.offset = offset

    @property
    def message(self) -> str:
        """octet's message text."""
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(OctetError, ValueError):
    """An argument out of contract (``OCT_ERR_INVALID_ARG``)."""


class FormatError(OctetError, ValueError):
    """Malformed input bytes: a file, JSON, a header (``OCT_ERR_FORMAT``)."""


class UnsupportedError(OctetError, ValueError):
    """Well formed, but a feature octet does not implement (``OCT_ERR_UNSUPPORTED``)."""


class LimitError(OctetError, ValueError):
    """A hard limit exceeded: a prompt longer than max_model_len, ... (``OCT_ERR_LIMIT``)."""


class OverflowSizeError(OctetError, OverflowError):
    """Size arithmetic would overflow (``OCT_ERR_OVERFLOW``)."""


class NotFoundError(OctetError, LookupError):
    """A named tensor, key or file is absent (``OCT_ERR_NOT_FOUND``)."""


class OctetOSError(OctetError, OSError):
    """Opening, reading, writing or mapping a file failed (``OCT_ERR_IO``)."""

    def __init__(self, message: str, status: Optional[str] = None, offset: int = -1) -> None:
        OctetError.__init__(self, message, status, offset)


class ModelNotFoundError(OctetError, FileNotFoundError):
    """The model folder (or a file it must hold) does not exist."""

    def __init__(self, message: str, filename: Optional[str] = None) -> None:
        FileNotFoundError.__init__(self, errno.ENOENT, message, filename)
        self.status = "i/o error"
        self.offset = -1

    @property
    def message(self) -> str:
        return str(self.strerror)

    def __str__(self) -> str:
        return str(self.strerror)


class OctetMemoryError(OctetError, MemoryError):
    """An allocation failed (``OCT_ERR_NOMEM``)."""


class CancelledError(OctetError):
    """The operation was cancelled (``OCT_ERR_CANCELLED``)."""


_BY_STATUS: Dict[int, Type[OctetError]] = {
    _lib.OCT_ERR_INVALID_ARG: InvalidArgumentError,
    _lib.OCT_ERR_NOMEM: OctetMemoryError,
    _lib.OCT_ERR_IO: OctetOSError,
    _lib.OCT_ERR_FORMAT: FormatError,
    _lib.OCT_ERR_UNSUPPORTED: UnsupportedError,
    _lib.OCT_ERR_OVERFLOW: OverflowSizeError,
    _lib.OCT_ERR_NOT_FOUND: NotFoundError,
    _lib.OCT_ERR_LIMIT: LimitError,
    _lib.OCT_ERR_CANCELLED: CancelledError,
}


def from_status(
    status: int, err: Optional[_lib.OctError] = None, what: str = "", filename: Optional[str] = None
) -> OctetError:
    """The exception for a failed call: octet's message (or the status text when
    the call gave none), prefixed with `what` when given."""
    lib = _lib.lib()
    name = _lib.dec(lib.oct_status_str(status)) or "error"
    msg = err.message.decode("utf-8", "replace") if err is not None else ""
    offset = int(err.offset) if err is not None else -1
    text = msg or name
    if what:
        text = f"{what}: {text}"
    cls = _BY_STATUS.get(status, OctetError)
    if cls in (OctetOSError, NotFoundError) and "No such file or directory" in msg:
        return ModelNotFoundError(text, filename)
    return cls(text, name, offset)


def check(
    status: int, err: Optional[_lib.OctError] = None, what: str = "", filename: Optional[str] = None
) -> None:
    """Raises the exception for `status` unless it is OCT_OK."""
    if status != _lib.OCT_OK:
        raise from_status(status, err, what, filename)
