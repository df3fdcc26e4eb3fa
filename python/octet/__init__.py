"""octet: FP8 inference for large language models, from Python.

Pure Python over the C library liboctet.so (ctypes); the interface is vLLM's::

    from octet import LLM, SamplingParams

    llm = LLM("models/demo", quantization="fp8_per_block")
    outputs = llm.generate(["The jury said"], SamplingParams(temperature=0.8, top_p=0.95))
    print(outputs[0].outputs[0].text)

See docs/PYTHON.md of the octet repository for what differs from vLLM.
"""

from ._export import convert, quantize
from ._lib import lib_path
from ._plan import Checkpoint, CheckpointLinear, Plan, PlanLayer, inspect
from .errors import (
    CancelledError,
    FormatError,
    InvalidArgumentError,
    LimitError,
    ModelNotFoundError,
    NotFoundError,
    OctetError,
    OctetMemoryError,
    OctetOSError,
    UnsupportedError,
)
from .llm import LLM, PromptType
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

__version__ = "0.1.0"

__all__ = [
    "LLM",
    "SamplingParams",
    "RequestOutput",
    "CompletionOutput",
    "Logprob",
    "Tokenizer",
    "PromptType",
    "inspect",
    "quantize",
    "convert",
    "Plan",
    "PlanLayer",
    "Checkpoint",
    "CheckpointLinear",
    "OctetError",
    "InvalidArgumentError",
    "FormatError",
    "UnsupportedError",
    "LimitError",
    "NotFoundError",
    "ModelNotFoundError",
    "OctetOSError",
    "OctetMemoryError",
    "CancelledError",
    "lib_path",
    "__version__",
]
