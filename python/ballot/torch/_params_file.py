"""Ballot parameter files ("init files"): ballot.torch's face of the C++ reader and writer.

The format is C++'s ``learning/parameter_file.h`` (all integers little-endian)::

    8 bytes   magic b"BALLOTP1"
    u32       format version = 1
    u32       T, the tensor count (1 .. 65536)
    T times:  u16 name length L (1 .. 1024), L bytes of UTF-8 name (no NUL),
              u8 rank R (0 .. 8), R x u64 dims (each 1 .. 2**31; rank 0 is a scalar)
    u64       D, the element count (the sum of the tensors' products of dims), 1 .. 2**31
    D x f32   the values, tensor after tensor, row-major
    32 bytes  SHA-256 of every byte before it

The layout digest is the SHA-256 of the bytes from T through the last tensor's dims: names and
shapes, not values. The trusted server builds a parameters-only model from such a file
(``init:file=PATH``) and needs neither torch nor the model's code. Never pickle. Reading, writing
and the layout digest are the C++ code's (``ballot._native``), so Python and C++ cannot disagree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, List, Tuple, Union

import numpy as np

from ballot import _native

Shape = Tuple[int, ...]


@dataclass
class InitFile:
    """A decoded parameter file: ``tensors`` as (name, shape, offset, size) in file order,
    ``values`` every tensor's float32 elements in one flat array, ``layout_digest`` in hex."""

    tensors: List[Tuple[str, Shape, int, int]] = field(default_factory=list)
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    layout_digest: str = ""


def trained_parameters(model: Any) -> List[Tuple[str, Any]]:
    """``model.named_parameters()`` (torch's order) that require grad: what Ballot trains. A
    parameter frozen when the Node is built (``requires_grad=False``) is the script's, not the
    cluster's: not in the init file, never updated (a vote's +1 for its zero gradient would move it
    by the learning rate every round)."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def _named_shapes(model_or_named_shapes: Any) -> List[Tuple[str, List[int]]]:
    """(name, dims) pairs the native functions take; what they cannot even represent (a negative or
    huge dim, a name that is not UTF-8) is a ValueError here, the format's own limits there."""
    if hasattr(model_or_named_shapes, "named_parameters"):
        pairs = [(name, [int(d) for d in p.shape]) for name, p in trained_parameters(model_or_named_shapes)]
    else:
        pairs = [(str(name), [int(d) for d in shape]) for name, shape in model_or_named_shapes]
    for index, (name, dims) in enumerate(pairs):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"parameter file: tensor {index}: the name is not valid UTF-8") from None
        for d, dim in enumerate(dims):
            if not 0 <= dim < 2**64:
                raise ValueError(f"parameter file: tensor {index} ({name!r}): dim {d} is {dim}, not in 1..2^31")
    return pairs


def layout_digest(model_or_named_shapes: Any) -> str:
    """The layout digest (hex) of a model (its :func:`trained_parameters`) or of (name, shape) pairs. Equal for models with the same names and shapes, whatever their values.
    Names and shapes outside the format's limits are a ValueError."""
    return _native.parameter_layout_digest(_named_shapes(model_or_named_shapes))


def export_init(model: Any, path: Union[str, "os.PathLike[str]"]) -> str:
    """Writes the parameters Ballot trains (:func:`trained_parameters`: ``named_parameters()`` in
    torch's order, those that require grad) to the Ballot parameter file ``path``, atomically (a
    temporary file beside it, fsynced, then renamed).

    Every parameter must be ``torch.float32`` (a TypeError names the first that is not) and finite
    (a ValueError names the first element that is not). Returns the layout digest in hex;
    ``make_model("init:file=PATH")`` in C++ builds the same layout from it.
    """
    import torch

    named = trained_parameters(model)
    if not named:
        raise ValueError("the model has no parameter that requires grad: nothing for Ballot to train")
    arrays = []
    for name, p in named:
        if p.dtype != torch.float32:
            raise TypeError(
                f"parameter {name!r} has dtype {p.dtype}; Ballot parameter files hold float32 only "
                "(convert the model with .float() first)"
            )
        array = p.detach().cpu().contiguous().numpy().reshape(-1)
        if not np.isfinite(array).all():
            raise ValueError(f"parameter {name!r} has a non-finite value at element "
                             f"{int(np.flatnonzero(~np.isfinite(array))[0])}: training cannot start from it")
        arrays.append(array)
    tensors = _named_shapes(model)
    digest = _native.parameter_layout_digest(tensors)  # the layout's errors before any copy
    values = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.float32)
    _native.write_parameter_file(os.fspath(path), tensors, values)
    return digest


def read_init(path: Union[str, "os.PathLike[str]"]) -> InitFile:
    """Reads and validates the Ballot parameter file ``path``: a ValueError names what is wrong
    (and the path); a missing file is a FileNotFoundError."""
    read = _native.read_parameter_file(os.fspath(path))
    tensors = [(name, tuple(int(d) for d in shape), int(offset), int(size)) for name, shape, offset, size in read["tensors"]]
    return InitFile(tensors=tensors, values=read["values"], layout_digest=read["layout_digest"])
