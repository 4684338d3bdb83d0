"""Array plumbing shared by the modules: recognising torch tensors without importing torch, and
handing results back in the caller's array type and on its device."""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np


def is_torch(x: Any) -> bool:
    """True for a torch.Tensor (checked by type, so torch is never imported here)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "device") and hasattr(x, "dtype")


def shape_of(x: Any, what: str) -> tuple:
    """x's shape as ints; TypeError naming the argument when x is not an array or tensor."""
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{what}: expected an array or tensor (numpy, torch or any DLPack exporter), got "
                        f"{type(x).__name__}")
    return tuple(int(s) for s in shape)


def vector_size(x: Any, what: str) -> int:
    """The length of the 1-D array x: TypeError for a non-array, ValueError for another shape, each
    naming the argument."""
    shape = shape_of(x, what)
    if len(shape) != 1:
        raise ValueError(f"{what}: expected a 1-D array, got {len(shape)} dimensions")
    return shape[0]


def count(x: Any, what: str) -> int:
    """A size, count or seed from the caller: a non-negative integer (numpy integers too), else
    TypeError or ValueError naming the argument (never a silent truncation of 2.5 to 2)."""
    try:
        value = operator.index(x)
    except TypeError:
        raise TypeError(f"{what}: expected a non-negative integer, got {type(x).__name__}") from None
    if value < 0:
        raise ValueError(f"{what}: must be non-negative, got {value}")
    return value


def first_of(vectors: Any) -> Any:
    """The first vector of a list of vectors, or the 2-D array itself."""
    if isinstance(vectors, (list, tuple)):
        if not vectors:
            raise ValueError("vectors: at least one vector is needed")
        return vectors[0]
    return vectors


def like(value: np.ndarray, reference: Any) -> Any:
    """`value` (a numpy array Ballot produced) as the reference's type and device: a torch tensor
    on the reference's device (zero-copy on the CPU), else the numpy array itself."""
    if is_torch(reference):
        import torch

        tensor = torch.from_numpy(value)
        return tensor if reference.device.type == "cpu" else tensor.to(reference.device)
    return value


def is_cuda(x: Any) -> bool:
    return is_torch(x) and x.device.type == "cuda"


def cuda_stream(x: Any) -> int:
    """The raw handle of torch's current stream on x's device (0 for CPU arrays)."""
    if not is_cuda(x):
        return 0
    import torch

    return int(torch.cuda.current_stream(x.device).cuda_stream)



def current_cuda_stream() -> int:
    """The raw handle of torch's current stream on the current CUDA device, for a call that takes no
    tensor; 0 (the default stream) when torch is not imported or has not initialised CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return 0
    return int(torch.cuda.current_stream().cuda_stream)
