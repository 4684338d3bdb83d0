"""Signs packed 1 bit per coordinate, and their (weighted) majority vote (C++ ``ballot::kernels``).

A packed sign vector of ``d`` coordinates is ``ceil(d / 64)`` 64-bit words: bit ``k`` of word
``w`` is coordinate ``64w + k``, bit 1 means non-negative (``+0``, ``-0`` and NaN pack to +1),
padding bits are zero. Words are uint64 numpy arrays, or int64 torch tensors (torch has no
uint64; the bits are the same).

CPU arrays use the AVX2/AVX-512 kernels chosen at run time. On a build with CUDA
(``ballot.has_cuda``), CUDA tensors are packed, unpacked and voted by the CUDA kernels on the
caller's current torch stream, without synchronising; results are bit-identical to the CPU.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ballot import _native
from ballot._arrays import cuda_stream, first_of, is_cuda, is_torch


def words_for(d: int) -> int:
    """Number of 64-bit words that hold d signs."""
    return (int(d) + 63) // 64


def _words_like(reference: Any, count: int) -> Any:
    if is_torch(reference):
        import torch

        return torch.empty(count, dtype=torch.int64, device=reference.device)
    return np.empty(count, dtype=np.uint64)


def _floats_like(reference: Any, count: int) -> Any:
    if is_torch(reference):
        import torch

        return torch.empty(count, dtype=torch.float32, device=reference.device)
    return np.empty(count, dtype=np.float32)


def pack(values: Any) -> Any:
    """Packs a 1-D float32 array into sign words (same array type and device)."""
    d = int(values.shape[0]) if len(values.shape) == 1 else -1
    if d < 0:
        raise ValueError("values: expected a 1-D array")
    out = _words_like(values, words_for(d))
    _native.pack_signs(values, out, cuda_stream(values))
    return out


def unpack(signs: Any, d: int, scale: float = 1.0) -> Any:
    """The float32 vector ``+scale`` / ``-scale`` of d packed signs (same array type and device)."""
    out = _floats_like(signs, int(d))
    _native.unpack_signs(signs, int(d), out, float(scale), cuda_stream(signs))
    return out


def majority_vote(inputs: Any, d: int, weights: Optional[Sequence[int]] = None) -> Any:
    """Coordinate-wise majority of packed sign vectors: bit 1 iff the (weighted) count of ones is
    at least half the total weight (ties and an empty vote give +1). ``inputs`` is a list of word
    arrays or one 2-D array (rows = voters); weights are non-negative integers, total < 2**32."""
    reference = first_of(inputs)
    out = _words_like(reference, words_for(d))
    device_weights = None
    if is_cuda(reference):
        import torch

        if isinstance(inputs, (list, tuple)):
            inputs = torch.stack(list(inputs))
        inputs = inputs.contiguous()
        if weights is not None:
            device_weights = torch.tensor(list(weights), dtype=torch.int32, device=reference.device)
    w = None if weights is None else [int(x) for x in weights]
    if w is not None and any(x < 0 for x in w):
        raise ValueError("weights: must be non-negative")
    _native.majority_vote(inputs, int(d), w, device_weights, out, cuda_stream(reference))
    return out


def agreement(a: Any, b: Any, d: int) -> int:
    """Number of the d coordinates where two packed sign vectors agree (CUDA tensors are copied
    to the host: d/8 bytes each)."""
    if is_cuda(a):
        a = a.cpu()
    if is_cuda(b):
        b = b.cpu()
    return int(_native.agreement(a, b, int(d)))


def cuda_device_count() -> int:
    """CUDA devices usable by Ballot's kernels (0 without a GPU or on a build without CUDA)."""
    return int(_native.cuda_device_count())
