"""Ballot parameter files ("init files"), written and read in pure Python.

The format is C++'s ``learning/parameter_file.h`` byte for byte (all integers little-endian)::

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
(``init:file=PATH``) and needs neither torch nor the model's code. Never pickle.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Sequence, Tuple, Union

import numpy as np

MAGIC = b"BALLOTP1"
VERSION = 1
MAX_TENSORS = 65536
MAX_NAME_BYTES = 1024
MAX_RANK = 8
MAX_ELEMENTS = 1 << 31
_DIGEST_BYTES = 32
# The largest valid file: the header at its limits, 2**31 values and the checksum.
_MAX_FILE_BYTES = (
    len(MAGIC) + 4 + 4 + MAX_TENSORS * (2 + MAX_NAME_BYTES + 1 + 8 * MAX_RANK) + 8 + 4 * MAX_ELEMENTS + _DIGEST_BYTES
)

Shape = Tuple[int, ...]


@dataclass
class InitFile:
    """A decoded parameter file: ``tensors`` as (name, shape, offset, size) in file order,
    ``values`` every tensor's float32 elements in one flat array, ``layout_digest`` in hex."""

    tensors: List[Tuple[str, Shape, int, int]] = field(default_factory=list)
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    layout_digest: str = ""


def _label(index: int, name: Union[str, bytes, None]) -> str:
    if isinstance(name, bytes):
        try:
            name = name.decode("utf-8")
        except UnicodeDecodeError:
            name = None
    if name and "\0" not in name and len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES:
        return f"tensor {index} ({name!r})"
    return f"tensor {index}"


def _check_count(count: int) -> None:
    if not 1 <= count <= MAX_TENSORS:
        raise ValueError(f"parameter file: tensor count {count} is not in 1..{MAX_TENSORS}")


def _check_tensor(index: int, name: bytes, shape: Sequence[int]) -> int:
    """Checks one record against the format; returns its element count."""
    label = _label(index, name)
    if not 1 <= len(name) <= MAX_NAME_BYTES:
        raise ValueError(f"parameter file: {label}: name length {len(name)} is not in 1..{MAX_NAME_BYTES}")
    if b"\0" in name:
        raise ValueError(f"parameter file: {label}: the name holds a NUL byte")
    if len(shape) > MAX_RANK:
        raise ValueError(f"parameter file: {label}: rank {len(shape)} is above {MAX_RANK}")
    elements = 1
    for d, dim in enumerate(shape):
        if not 1 <= dim <= MAX_ELEMENTS:
            raise ValueError(f"parameter file: {label}: dim {d} is {dim}, not in 1..2^31")
        elements *= dim
        if elements > MAX_ELEMENTS:
            raise ValueError(f"parameter file: {label}: more than 2^31 elements")
    return elements


def _layout_bytes(records: Sequence[Tuple[bytes, Shape]]) -> Tuple[bytes, int]:
    """Validates (name bytes, shape) records; returns the bytes from T through the last dims and D."""
    _check_count(len(records))
    seen = set()
    total = 0
    parts = [struct.pack("<I", len(records))]
    for index, (name, shape) in enumerate(records):
        total += _check_tensor(index, name, shape)
        if name in seen:
            raise ValueError(f"parameter file: {_label(index, name)}: duplicate name")
        seen.add(name)
        parts.append(struct.pack("<H", len(name)) + name + struct.pack("<B", len(shape)))
        parts.append(struct.pack(f"<{len(shape)}Q", *shape))
    if total > MAX_ELEMENTS:
        raise ValueError("parameter file: more than 2^31 elements in all")
    return b"".join(parts), total


def _named_shapes(model_or_named_shapes: Any) -> List[Tuple[str, Shape]]:
    if hasattr(model_or_named_shapes, "named_parameters"):
        return [(name, tuple(int(d) for d in p.shape)) for name, p in model_or_named_shapes.named_parameters()]
    return [(str(name), tuple(int(d) for d in shape)) for name, shape in model_or_named_shapes]


def _records(named_shapes: Iterable[Tuple[str, Shape]]) -> List[Tuple[bytes, Shape]]:
    return [(name.encode("utf-8"), tuple(shape)) for name, shape in named_shapes]


def layout_digest(model_or_named_shapes: Any) -> str:
    """The layout digest (hex) of a model (``named_parameters()`` in torch's order) or of
    (name, shape) pairs. Equal for models with the same names and shapes, whatever their values.
    Names and shapes outside the format's limits are a ValueError."""
    layout, _ = _layout_bytes(_records(_named_shapes(model_or_named_shapes)))
    return hashlib.sha256(layout).hexdigest()


def export_init(model: Any, path: Union[str, "os.PathLike[str]"]) -> str:
    """Writes every parameter of ``model.named_parameters()`` (torch's order, ``requires_grad`` or
    not) to the Ballot parameter file ``path``, atomically (a ``.tmp`` file, then ``os.replace``).

    Every parameter must be ``torch.float32`` (a TypeError names the first that is not). Returns the
    layout digest in hex; ``make_model("init:file=PATH")`` in C++ builds the same layout from it.
    """
    import torch

    named = list(model.named_parameters())
    arrays = []
    for name, p in named:
        if p.dtype != torch.float32:
            raise TypeError(
                f"parameter {name!r} has dtype {p.dtype}; Ballot parameter files hold float32 only "
                "(convert the model with .float() first)"
            )
        array = p.detach().cpu().contiguous().numpy().astype("<f4", copy=False).reshape(-1)
        if not np.isfinite(array).all():
            raise ValueError(f"parameter {name!r} has a non-finite value at element "
                             f"{int(np.flatnonzero(~np.isfinite(array))[0])}: training cannot start from it")
        arrays.append(array)
    layout, total = _layout_bytes(_records((name, tuple(int(d) for d in p.shape)) for name, p in named))
    values = np.concatenate(arrays) if arrays else np.zeros(0, dtype="<f4")
    assert values.size == total
    body = MAGIC + struct.pack("<I", VERSION) + layout + struct.pack("<Q", total) + values.tobytes()
    data = body + hashlib.sha256(body).digest()
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return hashlib.sha256(layout).hexdigest()


class _Reader:
    """A bounded cursor over the file's bytes: every read checks the remaining length first."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, count: int, field: str) -> bytes:
        if count > self.remaining():
            raise ValueError(f"parameter file truncated while reading {field} at byte {self.pos}")
        out = self.data[self.pos : self.pos + count]
        self.pos += count
        return out

    def unpack(self, fmt: str, field: str) -> Tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), field))


def _decode(data: bytes) -> InitFile:
    r = _Reader(data)
    if r.take(len(MAGIC), "magic") != MAGIC:
        raise ValueError('parameter file: bad magic (not "BALLOTP1")')
    (version,) = r.unpack("<I", "format version")
    if version != VERSION:
        raise ValueError(f"parameter file: format version {version} (this reader reads version {VERSION})")
    layout_start = r.pos
    (count,) = r.unpack("<I", "tensor count")
    _check_count(count)
    if count > r.remaining() // 4:
        raise ValueError(f"parameter file: tensor count {count} exceeds the file")
    tensors = []
    seen = set()
    total = 0
    for index in range(count):
        try:
            (length,) = r.unpack("<H", "tensor name length")
            name = r.take(length, "tensor name")
            (rank,) = r.unpack("<B", "tensor rank")
            if rank > MAX_RANK:
                raise ValueError(f"parameter file: {_label(index, name)}: rank {rank} is above {MAX_RANK}")
            shape = r.unpack(f"<{rank}Q", "tensor dims")
        except ValueError as e:
            if "truncated" in str(e):
                raise ValueError(f"{e} (tensor {index})") from None
            raise
        elements = _check_tensor(index, name, shape)
        if name in seen:
            raise ValueError(f"parameter file: {_label(index, name)}: duplicate name")
        seen.add(name)
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            text = name.decode("utf-8", "surrogateescape")
        tensors.append((text, tuple(shape), total, elements))
        total += elements
    layout_end = r.pos
    (declared,) = r.unpack("<Q", "element count")
    if declared != total:
        raise ValueError(f"parameter file: element count {declared} differs from the tensors' {total}")
    if not 1 <= total <= MAX_ELEMENTS:
        raise ValueError(f"parameter file: element count {total} is not in 1..2^31")
    raw = r.take(4 * total, "values")
    covered = r.pos
    stored = r.take(_DIGEST_BYTES, "checksum")
    if r.remaining():
        raise ValueError(f"{r.remaining()} trailing bytes after the parameter file")
    if hashlib.sha256(memoryview(data)[:covered]).digest() != stored:
        raise ValueError("parameter file: checksum (SHA-256) does not match the contents")
    values = np.frombuffer(raw, dtype="<f4").astype(np.float32, copy=True)
    digest = hashlib.sha256(memoryview(data)[layout_start:layout_end]).hexdigest()
    return InitFile(tensors=tensors, values=values, layout_digest=digest)


def read_init(path: Union[str, "os.PathLike[str]"]) -> InitFile:
    """Reads and validates the Ballot parameter file ``path`` as strictly as C++: a ValueError
    names what is wrong (and the path); a missing file is a FileNotFoundError."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no parameter file at '{path}'")
    size = os.path.getsize(path)
    if size > _MAX_FILE_BYTES:
        raise ValueError(f"parameter file '{path}' has {size} bytes, more than any valid one")
    with open(path, "rb") as f:
        data = f.read()
    try:
        return _decode(data)
    except ValueError as e:
        raise ValueError(f"{e} in '{path}'") from None
