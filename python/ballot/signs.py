"""Signs packed 1 bit per coordinate, and their (weighted) majority vote (C++ ``ballot::kernels``).

A packed sign vector of ``d`` coordinates is ``ceil(d / 64)`` 64-bit words: bit ``k`` of word
``w`` is coordinate ``64w + k``, bit 1 means non-negative (``+0``, ``-0`` and NaN pack to +1),
padding bits are zero. Words are uint64 numpy arrays, or int64 torch tensors (torch has no
uint64; the bits are the same).

CPU arrays use the AVX2/AVX-512 kernels chosen at run time. On a build with CUDA
(``ballot.has_cuda``), CUDA tensors are packed, unpacked and voted by the CUDA kernels on the
caller's current torch stream, without synchronising; results are bit-identical to the CPU. The
arrays of one call must be on one CUDA device, the current one (``torch.cuda.device(i)``);
others are a ValueError.

The node's hot path has the same two versions: ``momentum_pack`` (Signum's worker momentum fused
with the pack) and ``apply_update`` (the sign, SGD and heavy-ball rules applied from a decision),
whose float arithmetic is the C++ replicas' (round to nearest, no fused multiply-add), so a GPU
replica stays bit-identical to a CPU one.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, Sequence

import numpy as np

from ballot import _native
from ballot._arrays import count, cuda_stream, first_of, is_cuda, is_torch, vector_size


def words_for(d: int) -> int:
    """Number of 64-bit words that hold d signs."""
    return (count(d, "d") + 63) // 64


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
    d = vector_size(values, "values")
    out = _words_like(values, words_for(d))
    _native.pack_signs(values, out, cuda_stream(values))
    return out


def unpack(signs: Any, d: int, scale: float = 1.0) -> Any:
    """The float32 vector ``+scale`` / ``-scale`` of d packed signs (same array type and device)."""
    out = _floats_like(signs, count(d, "d"))
    _native.unpack_signs(signs, count(d, "d"), out, float(scale), cuda_stream(signs))
    return out


def _weight(x: Any) -> int:
    """A voter's weight: a non-negative integer (0.6 is not truncated to 0)."""
    try:
        w = operator.index(x)
    except TypeError:
        raise TypeError(f"weights: expected non-negative integers, got {x!r}") from None
    if w < 0:
        raise ValueError("weights: must be non-negative")
    return w


def majority_vote(inputs: Any, d: int, weights: Optional[Sequence[int]] = None) -> Any:
    """Coordinate-wise majority of packed sign vectors: bit 1 iff the (weighted) count of ones is
    at least half the total weight (ties and an empty vote give +1). ``inputs`` is a list of word
    arrays or one 2-D array (rows = voters); weights are non-negative integers, total < 2**32."""
    w = None if weights is None else [_weight(x) for x in weights]
    if w is not None and sum(w) >= 2**32:
        raise ValueError(f"weights: the total must be below 2**32, got {sum(w)}")
    reference = first_of(inputs)
    out = _words_like(reference, words_for(d))
    device_weights = None
    if is_cuda(reference):
        import torch

        if isinstance(inputs, (list, tuple)):
            inputs = torch.stack(list(inputs))
        inputs = inputs.contiguous()
        if w is not None:
            device_weights = torch.tensor(w, dtype=torch.int32, device=reference.device)
    _native.majority_vote(inputs, count(d, "d"), w, device_weights, out, cuda_stream(reference))
    return out


def momentum_pack(momentum: Any, gradient: Any, beta: float = 0.9) -> Any:
    """Signum's worker momentum and its signs in one pass: ``momentum`` (float32, updated in place)
    becomes ``beta * momentum + (1 - beta) * gradient`` and the packed signs of the new momentum
    are returned (same array type and device)."""
    out = _words_like(momentum, words_for(vector_size(momentum, "momentum")))
    vector_size(gradient, "gradient")
    _native.momentum_pack(momentum, gradient, float(beta), out, cuda_stream(momentum))
    return out


def apply_update(
    params: Any,
    *,
    lr: float,
    vote: Any = None,
    direction: Any = None,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    buffer: Any = None,
    dampening: float = 0.0,
    nesterov: bool = False,
    first_step: bool = False,
) -> None:
    """Applies one update to the float32 ``params`` in place, from the packed ``vote`` (bit 1 is
    +1) or the float32 ``direction`` — exactly one of them:

    - ``momentum == 0``: ``x <- x - lr * (v + weight_decay * x)`` (the ``sign`` rule on a vote,
      plain SGD on a direction);
    - ``momentum > 0``: SGD with momentum as PyTorch defines it over ``buffer`` (float32, updated
      in place; it starts as the decayed direction when ``first_step``): the ``heavyball`` rule on a
      vote, ``sgd`` on a direction.

    ``lr`` and ``weight_decay`` are used as float32, as the signed decision carries them."""
    _native.apply_update(
        params,
        vote,
        direction,
        buffer,
        float(lr),
        float(weight_decay),
        float(momentum),
        float(dampening),
        bool(nesterov),
        bool(first_step),
        cuda_stream(params),
    )


def agreement(a: Any, b: Any, d: int) -> int:
    """Number of the d coordinates where two packed sign vectors agree (CUDA tensors are copied
    to the host: d/8 bytes each)."""
    if is_cuda(a):
        a = a.cpu()
    if is_cuda(b):
        b = b.cpu()
    return int(_native.agreement(a, b, count(d, "d")))


def cuda_device_count() -> int:
    """CUDA devices usable by Ballot's kernels (0 without a GPU or on a build without CUDA)."""
    return int(_native.cuda_device_count())
