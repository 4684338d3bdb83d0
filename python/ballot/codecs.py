"""Gradient compression codecs (C++ ``ballot::coding``): what a gradient becomes on the wire.

Codecs are named by the registry strings of the C++ library (``"topk:ratio=0.01"``,
``"qsgd:s=16"``, ``"terngrad"``, ``"onebit"``, ``"scaled_sign:ef=1"``, ...; :func:`codec_names`
lists them, docs/codecs.md specifies each encoding byte for byte). ``ef=1`` wraps a codec in
error feedback (Karimireddy et al., 2019); its memory is node state, readable through
:attr:`Codec.memory` and saved and restored with :meth:`Codec.save_state` /
:meth:`Codec.load_state`.

A *layout* names the segments of the flat gradient that per-layer codecs treat separately: an
int ``d`` (one segment), a list of sizes, a list of ``(name, size)`` pairs, a dict, or a torch
module (its ``named_parameters()``).

Encodings are deterministic: stochastic codecs (QSGD, TernGrad, random-k, and DGC's sampled threshold) draw from the
codec's own Philox stream ``(seed, stream)``, exactly as the C++ runtime does. Decoding checks
every length, index and level of the bytes (they may come from a peer): a bad message is a
ValueError and leaves an accumulator untouched.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ballot import _native
from ballot._arrays import count, cuda_stream, current_cuda_stream, vector_size

Layout = Union[int, Sequence[int], Sequence[Tuple[str, int]], dict, Any]


def codec_names() -> List[str]:
    """The registry names of the codecs."""
    return list(_native.codec_names())


def codec_examples() -> List[str]:
    """One valid spec of each codec (its line's example in the C++ table), in table order."""
    return list(_native.codec_examples())


def layout_of(layout: Layout) -> List[Tuple[str, int]]:
    """Normalises a layout to ``[(name, size), ...]``."""
    if isinstance(layout, bool):
        raise TypeError("layout: expected an int, a list of sizes or (name, size) pairs, a dict or a torch module")
    if isinstance(layout, (int, np.integer)):
        if layout < 0:
            raise ValueError(f"layout: a size must be non-negative, got {layout}")
        return [("model", int(layout))]
    if hasattr(layout, "named_parameters"):
        return [(name, int(p.numel())) for name, p in layout.named_parameters()]
    if isinstance(layout, dict):
        items = list(layout.items())
    else:
        items = list(layout)
    out = []
    for i, item in enumerate(items):
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            name, size = f"layer{i}", int(item)
        elif isinstance(item, tuple) and len(item) == 2:
            name, size = str(item[0]), int(item[1])
        else:
            raise TypeError(f"layout[{i}]: expected a size or a (name, size) pair, got {item!r}")
        if size < 0:
            raise ValueError(f"layout[{i}]: a size must be non-negative, got {size}")
        out.append((name, size))
    return out


def _bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, np.ndarray) and data.dtype == np.uint8:
        return data.tobytes()
    raise TypeError(f"data: expected bytes, bytearray, memoryview or a uint8 array, got {type(data).__name__}")


def global_topk_reduce(messages: Sequence[Any], layout: Layout, spec: str, average: bool = False) -> bytes:
    """Global top-k's aggregator (Shi et al., 2019): validates every worker message of the gtopk
    codec ``spec`` (a bad one is a ValueError naming its position), sums them (or averages, with
    ``average``) and returns the global message: the k largest ``|sum|`` by the spec's budget and
    granularity. Every worker passes it to :meth:`Codec.accept_global`; decoding it gives the
    update."""
    return _native.global_topk_reduce([_bytes(m) for m in messages], layout_of(layout), spec, bool(average))


def keep_global_top_k(aggregate: np.ndarray, layout: Layout, spec: str) -> bytes:
    """Global top-k after a robust rule: keeps the k largest ``|aggregate|`` (the gtopk ``spec``'s
    budget and granularity; ties to the lowest index, NaN as +inf) of a 1-D float32 numpy array and
    sets the rest to 0, in place, as a Ballot cluster's server does with its rule's output. Returns
    the global message of what remains (its non-zero coordinates) for :meth:`Codec.accept_global`."""
    return _native.keep_global_top_k(aggregate, layout_of(layout), spec)


class Codec:
    """One codec instance with its node state and random stream.

    ``Codec(spec, seed=0, stream=0)``. Not thread-safe (encoding mutates the state and advances
    the stream); decoding may run on any instance of the same family.
    """

    def __init__(self, spec: str, seed: int = 0, stream: int = 0) -> None:
        self._native = _native.Codec(spec, count(seed, "seed"), count(stream, "stream"))

    @property
    def spec(self) -> str:
        """The canonical registry string, e.g. ``"qsgd:elias=0,granularity=model,s=16"``."""
        return self._native.spec

    @property
    def name(self) -> str:
        """The codec family's wire name."""
        return self._native.name

    @property
    def granularity(self) -> str:
        """``"model"`` (one scale or budget for all coordinates) or ``"layer"``."""
        return self._native.granularity

    @property
    def stateful(self) -> bool:
        return self._native.stateful

    @property
    def exact_wire_size(self) -> bool:
        """False for data-dependent sizes (threshold, Elias-coded QSGD): wire_size is then a bound."""
        return self._native.exact_wire_size

    @property
    def memory(self) -> Optional[np.ndarray]:
        """The error-feedback memory e (a copy), or None without error feedback."""
        return self._native.memory

    def wire_size(self, layout: Layout) -> int:
        """Bytes of an encoding for this layout (exact, or the largest possible)."""
        return self._native.wire_size(layout_of(layout))

    def encode(self, gradient: Any, layout: Optional[Layout] = None) -> bytes:
        """Encodes a 1-D float32 gradient (numpy, CPU or CUDA torch); layout defaults to one segment.

        A CUDA tensor is encoded on its GPU, on torch's current stream, into the same bytes the CPU
        would write (every codec of the registry has a CUDA encoder in a build with CUDA). The codec's state (error feedback's memory, Signum's momentum,
        DGC's momentum and accumulation, global top-k's residual) then stays on the GPU until
        :attr:`memory` or :meth:`save_state` asks for it.
        """
        layers = layout_of(vector_size(gradient, "gradient") if layout is None else layout)
        return self._native.encode(gradient, layers, cuda_stream(gradient))

    def decode(self, data: Any, layout: Layout) -> np.ndarray:
        """The decoded gradient as a new float32 numpy array."""
        return self._native.decode(_bytes(data), layout_of(layout))

    def decode_add(self, data: Any, accumulator: Any, layout: Optional[Layout] = None, weight: float = 1.0) -> None:
        """``accumulator += weight * decode(data)`` in place (float32, numpy or CPU or CUDA torch).

        A CUDA accumulator is added to on its GPU (the bytes are checked on the host first), for the
        codecs that encode on a GPU (see :meth:`encode`).
        """
        layers = layout_of(vector_size(accumulator, "accumulator") if layout is None else layout)
        self._native.decode_add(_bytes(data), accumulator, layers, float(weight), cuda_stream(accumulator))

    def save_state(self) -> bytes:
        """The node state (momentum, error-feedback memory, residuals) as bytes; empty if stateless."""
        return self._native.save_state()

    def load_state(self, state: Any, layout: Layout) -> None:
        """Restores a state saved by :meth:`save_state` (validated: a bad blob is a ValueError)."""
        self._native.load_state(_bytes(state), layout_of(layout))

    def reset_state(self) -> None:
        self._native.reset_state()

    def accept_global(self, global_message: Any, layout: Layout, stream: Optional[int] = None) -> None:
        """Global top-k (``gtopk``): takes the aggregator's global message for the last
        :meth:`encode` (from :func:`global_topk_reduce` or :func:`keep_global_top_k`). What that
        encode sent for a coordinate outside the global set goes back into the residual, so nothing
        is lost (Shi et al., 2019). After a CUDA encode this happens on the GPU, on ``stream`` (a raw
        CUDA stream handle; default: torch's current stream). A bad message is a ValueError and
        changes nothing; a codec other than gtopk is a ValueError."""
        handle = current_cuda_stream() if stream is None else int(stream)
        self._native.accept_global(_bytes(global_message), layout_of(layout), handle)

    def __repr__(self) -> str:
        return f"Codec({self.spec!r})"
