"""ballot.torch's parameter files (read_init, export_init, layout_digest: the C++ reader and writer of
learning/parameter_file.h, bound as ballot._native) against an independent encoder of the format
written here (_raw), and against the native functions called directly."""

import hashlib
import os
import struct

import numpy as np
import pytest

from ballot import _native
from ballot.torch import export_init, layout_digest, read_init
from conftest import torch_or_skip


def _model(torch):
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 8),
        nn.LayerNorm(8),
        nn.Linear(8, 3, bias=False),
    )


def _seal(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()


def _raw(tensors, values, count=None, declared=None, magic=b"BALLOTP1", version=1):
    parts = [magic, struct.pack("<II", version, len(tensors) if count is None else count)]
    for name, dims in tensors:
        parts.append(struct.pack("<H", len(name)) + name + struct.pack("<B", len(dims)))
        parts.append(struct.pack(f"<{len(dims)}Q", *dims))
    parts.append(struct.pack("<Q", len(values) if declared is None else declared))
    parts.append(np.asarray(values, dtype="<f4").tobytes())
    return _seal(b"".join(parts))


def test_python_export_reads_identically_in_cpp(tmp_path):
    torch = torch_or_skip()
    model = _model(torch)
    path = tmp_path / "init.ballot"
    digest = export_init(model, path)
    assert os.listdir(tmp_path) == ["init.ballot"]  # no temporary file stays

    ours = read_init(path)
    theirs = _native.read_parameter_file(str(path))
    assert digest == ours.layout_digest == theirs["layout_digest"] == layout_digest(model)
    expected = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    assert [(t[0], t[1]) for t in ours.tensors] == expected
    assert [tuple(t) for t in theirs["tensors"]] == [tuple(t) for t in ours.tensors]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    assert ours.values.dtype == np.float32 and theirs["values"].dtype == np.float32
    assert ours.values.tobytes() == flat.tobytes() == theirs["values"].tobytes()
    for name, shape, offset, size in ours.tensors:
        param = dict(model.named_parameters())[name].detach().numpy()
        np.testing.assert_array_equal(ours.values[offset : offset + size].reshape(shape), param)

    # The same names and shapes give the same digest whatever the values.
    other = _model(torch)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    assert layout_digest(other) == digest
    assert layout_digest([(n, s) for n, s in expected]) == digest
    assert layout_digest(expected[:-1]) != digest


def test_cpp_writer_reads_identically_in_python(tmp_path):
    path = tmp_path / "cpp.ballot"
    tensors = [("conv.weight", [2, 1, 2, 2]), ("conv.bias", [2]), ("scale", [])]
    values = np.arange(11, dtype=np.float32) * 0.5 - 1.0
    values[3] = np.nan
    _native.write_parameter_file(str(path), tensors, values)
    ours = read_init(path)
    theirs = _native.read_parameter_file(str(path))
    assert ours.tensors == [("conv.weight", (2, 1, 2, 2), 0, 8), ("conv.bias", (2,), 8, 2), ("scale", (), 10, 1)]
    assert ours.values.tobytes() == values.tobytes() == theirs["values"].tobytes()
    assert ours.layout_digest == theirs["layout_digest"] == layout_digest([(n, s) for n, s in tensors])
    # Byte-identical to what the pure-Python writer makes from the same tensors.
    assert path.read_bytes() == _raw([(n.encode(), d) for n, d in tensors], values)


MALFORMED = {
    "magic": _raw([(b"w", [2])], [1, 2], magic=b"BALLOTP2"),
    "format version": _raw([(b"w", [2])], [1, 2], version=2),
    "tensor count 0": _raw([], []),
    "tensor count 65537": _raw([(b"w", [2])], [1, 2], count=65537),
    "name length 0": _raw([(b"", [2])], [1, 2]),
    "duplicate name": _raw([(b"w", [1]), (b"w", [1])], [1, 2]),
    "NUL": _raw([(b"a\0b", [2])], [1, 2]),
    "rank 9": _raw([(b"w", [1] * 8 + [2])], [1, 2]),
    "dim 0 is 0": _raw([(b"w", [0]), (b"b", [2])], [1, 2]),
    "element count 3 differs": _raw([(b"w", [2])], [1, 2], declared=3),
    "checksum": _raw([(b"w", [2])], [1, 2])[:-1] + b"\0",
    "trailing": _raw([(b"w", [2])], [1, 2]) + b"\0",
    "truncated": _raw([(b"w", [2])], [1, 2])[:20],
}


@pytest.mark.parametrize("reason", sorted(MALFORMED))
def test_malformed_files_raise_value_error_in_both(tmp_path, reason):
    path = tmp_path / "bad.ballot"
    path.write_bytes(MALFORMED[reason])
    with pytest.raises(ValueError, match=reason):
        read_init(path)
    with pytest.raises(ValueError, match=reason):
        _native.read_parameter_file(str(path))


def test_every_truncation_raises_value_error(tmp_path):
    data = _raw([(b"w", [2, 1]), (b"s", [])], [1, 2, 3])
    path = tmp_path / "cut.ballot"
    for n in range(len(data)):
        path.write_bytes(data[:n])
        with pytest.raises(ValueError):
            read_init(path)
        with pytest.raises(ValueError):
            _native.read_parameter_file(str(path))


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ballot"):
        read_init(tmp_path / "nope.ballot")
    with pytest.raises(FileNotFoundError, match="nope.ballot"):
        _native.read_parameter_file(str(tmp_path / "nope.ballot"))


def test_float64_parameters_are_a_type_error(tmp_path):
    torch = torch_or_skip()
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1).double())
    with pytest.raises(TypeError, match=r"'1.weight'.*float64"):
        export_init(model, tmp_path / "f64.ballot")
    assert not os.path.exists(tmp_path / "f64.ballot")


def test_non_finite_parameters_are_a_value_error(tmp_path):
    torch = torch_or_skip()
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    with torch.no_grad():
        model[1].bias[0] = float("nan")
    with pytest.raises(ValueError, match=r"'1.bias' has a non-finite value at element 0"):
        export_init(model, tmp_path / "nan.ballot")
    assert not os.path.exists(tmp_path / "nan.ballot")


def test_a_write_that_fails_is_an_os_error_naming_the_path(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(OSError, match="a-file"):
        _native.write_parameter_file(str(tmp_path / "a-file" / "x.ballot"), [("a", [2])], np.ones(2, np.float32))
    torch = torch_or_skip()
    with pytest.raises(OSError, match="a-file"):
        export_init(torch.nn.Linear(2, 1), tmp_path / "a-file" / "x.ballot")


def test_layouts_outside_the_format_are_value_errors_before_anything_is_written(tmp_path):
    for shapes, reason in [
        ([("w", (2,)), ("w", (3,))], "duplicate name"),
        ([("", (2,))], "name length 0"),
        ([("x" * 1025, (2,))], "name length 1025"),
        ([("w", (1,) * 9)], "rank 9"),
        ([("w", (0,))], "dim 0 is 0"),
        ([], "tensor count 0"),
        ([("w", (-1,))], "dim 0 is -1"),
        ([("w", (2**64,))], "dim 0 is 18446744073709551616"),
        ([("w\udc80", (2,))], "not valid UTF-8"),
    ]:
        with pytest.raises(ValueError, match=reason):
            layout_digest(shapes)
    torch = torch_or_skip()

    class Empty(torch.nn.Module):
        pass

    with pytest.raises(ValueError, match="no parameter that requires grad"):
        export_init(Empty(), tmp_path / "empty.ballot")
    assert not os.path.exists(tmp_path / "empty.ballot")


def test_cpp_writer_refuses_invalid_tensors(tmp_path):
    with pytest.raises(ValueError, match="duplicate name"):
        _native.write_parameter_file(str(tmp_path / "x"), [("a", [1]), ("a", [1])], np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="values"):
        _native.write_parameter_file(str(tmp_path / "x"), [("a", [2])], np.zeros(3, np.float32))
