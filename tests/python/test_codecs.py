import numpy as np
import pytest

from ballot import codecs
from conftest import torch_or_skip


def grad(rng, d):
    return rng.standard_normal(d).astype(np.float32)


def test_codec_names_cover_the_registry():
    assert {"fp32", "sign", "topk", "qsgd", "terngrad", "onebit", "dgc"} <= set(codecs.codec_names())
    assert [spec.split(":")[0] for spec in codecs.codec_examples()] == codecs.codec_names()


# Every codec of the C++ table (its example), then a few variants: a new codec is covered here too.
_SPECS = codecs.codec_examples() + ["topk:ratio=0.1", "qsgd:s=4,elias=1", "threshold:tau=0.5"]


@pytest.mark.parametrize("spec", _SPECS)
def test_encode_decode_round_trip_sizes(rng, spec):
    c = codecs.Codec(spec, seed=3)
    g = grad(rng, 1000)
    data = c.encode(g)
    assert isinstance(data, bytes)
    if c.exact_wire_size:
        assert len(data) == c.wire_size(1000)
    else:
        assert len(data) <= c.wire_size(1000)
    out = c.decode(data, 1000)
    assert out.dtype == np.float32 and out.shape == (1000,)


def test_fp32_is_lossless_and_decode_add_accumulates(rng):
    c = codecs.Codec("fp32")
    g = grad(rng, 300)
    np.testing.assert_array_equal(c.decode(c.encode(g), 300), g)
    acc = np.ones(300, np.float32)
    c.decode_add(c.encode(g), acc, weight=2.0)
    np.testing.assert_allclose(acc, 1 + 2 * g, rtol=1e-6)


def test_topk_keeps_the_largest(rng):
    g = grad(rng, 1000)
    out = codecs.Codec("topk:k=10").decode(codecs.Codec("topk:k=10").encode(g), 1000)
    kept = np.flatnonzero(out)
    assert set(kept) == set(np.argsort(-np.abs(g))[:10])


def test_stochastic_codecs_are_reproducible_from_seed(rng):
    g = grad(rng, 2048)
    a = codecs.Codec("qsgd:s=4", seed=7).encode(g)
    b = codecs.Codec("qsgd:s=4", seed=7).encode(g)
    c = codecs.Codec("qsgd:s=4", seed=8).encode(g)
    assert a == b and a != c


def test_qsgd_is_unbiased(rng):
    g = grad(rng, 256)
    c = codecs.Codec("qsgd:s=2", seed=1)
    mean = np.mean([c.decode(c.encode(g), 256) for _ in range(2000)], axis=0)
    np.testing.assert_allclose(mean, g, atol=0.15 * np.linalg.norm(g) / np.sqrt(256) * 4)


def test_error_feedback_memory_and_state_round_trip(rng):
    g = grad(rng, 500)
    c = codecs.Codec("scaled_sign:granularity=model,ef=1")
    assert c.stateful and c.memory is not None and not c.memory.any()
    sent = c.decode(c.encode(g), 500)
    np.testing.assert_allclose(c.memory, g - sent, rtol=1e-5, atol=1e-6)
    state = c.save_state()
    fresh = codecs.Codec("scaled_sign:granularity=model,ef=1")
    fresh.load_state(state, 500)
    np.testing.assert_array_equal(fresh.memory, c.memory)
    assert fresh.encode(g) == c.encode(g)
    c.reset_state()
    assert not c.memory.any()
    assert codecs.Codec("sign").memory is None


def test_layouts_per_layer(rng):
    g = grad(rng, 30)
    c = codecs.Codec("scaled_sign:granularity=layer")
    for layout in ([10, 20], [("a", 10), ("b", 20)], {"a": 10, "b": 20}):
        out = c.decode(c.encode(g, layout), layout)
        assert np.allclose(np.abs(out[:10]), np.abs(g[:10]).mean(), rtol=1e-5)
        assert np.allclose(np.abs(out[10:]), np.abs(g[10:]).mean(), rtol=1e-5)
    with pytest.raises(ValueError, match="layout"):
        c.encode(g, [10, 10])


def test_layout_of_a_torch_module():
    torch = torch_or_skip()
    model = torch.nn.Linear(3, 2)
    assert codecs.layout_of(model) == [("weight", 6), ("bias", 2)]


def test_bad_bytes_are_value_errors_and_leave_the_accumulator(rng):
    c = codecs.Codec("topk:k=5")
    data = bytearray(c.encode(grad(rng, 100)))
    acc = np.zeros(100, np.float32)
    for bad in (bytes(data[:10]), bytes(data[:-1]), b"", bytes([0xFF]) * len(data)):
        with pytest.raises(ValueError):
            c.decode_add(bad, acc)
    assert not acc.any()
    with pytest.raises(TypeError):
        c.decode("text", 100)


def test_bad_specs_and_inputs():
    with pytest.raises(ValueError, match="nope"):
        codecs.Codec("nope")
    with pytest.raises(ValueError, match="bogus"):
        codecs.Codec("qsgd:bogus=1")
    c = codecs.Codec("sign")
    with pytest.raises(TypeError, match="float32"):
        c.encode(np.zeros(4))
    with pytest.raises(ValueError, match="elements"):
        c.encode(np.zeros(4, np.float32), 5)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(4, np.float32)
        ro.setflags(write=False)
        c.decode_add(c.encode(np.ones(4, np.float32)), ro)
    with pytest.raises(TypeError, match="gradient: expected an array"):
        c.encode([1.0, 2.0])
    with pytest.raises(ValueError, match="gradient: expected a 1-D array"):
        c.encode(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="seed: must be non-negative"):
        codecs.Codec("sign", seed=-1)
    # A layout whose byte size would wrap is refused, not sized at 20 bytes.
    with pytest.raises(ValueError, match="2\\^56"):
        codecs.Codec("fp32").wire_size([2**63 - 1])
    acc = np.zeros(4, np.float32)
    for weight in (1e39, float("nan"), float("inf")):  # 1e39 is +inf as a float32
        with pytest.raises(ValueError, match="weight"):
            codecs.Codec("fp32").decode_add(codecs.Codec("fp32").encode(np.ones(4, np.float32)), acc, weight=weight)
    assert not acc.any()


def test_torch_gradients(rng):
    torch = torch_or_skip()
    g = torch.from_numpy(grad(rng, 64))
    c = codecs.Codec("fp32")
    acc = torch.zeros(64)
    c.decode_add(c.encode(g), acc)
    assert torch.equal(acc, g)


def test_global_top_k_round_trip(rng):
    """gtopk's two sides from Python (Shi et al.): workers' local top-k, the aggregator's global
    set, and the residual that gets back what the global set left out."""
    d, spec = 500, "gtopk:k=25"
    workers = [codecs.Codec(spec) for _ in range(4)]
    gradients = [rng.standard_normal(d).astype(np.float32) for _ in workers]
    messages = [w.encode(g) for w, g in zip(workers, gradients)]
    sent = [w.decode(m, d) for w, m in zip(workers, messages)]
    total = np.sum(sent, axis=0, dtype=np.float32)

    global_message = codecs.global_topk_reduce(messages, d, spec)
    update = workers[0].decode(global_message, d)
    chosen = np.flatnonzero(update)
    assert len(chosen) == 25
    assert set(chosen) == set(np.argsort(-np.abs(total), kind="stable")[:25])
    np.testing.assert_array_equal(update[chosen], total[chosen])
    mean = workers[0].decode(codecs.global_topk_reduce(messages, d, spec, average=True), d)
    np.testing.assert_allclose(mean[chosen], total[chosen] / 4, rtol=1e-6)

    for worker, gradient, values in zip(workers, gradients, sent):
        worker.accept_global(global_message, d)
        # The residual (the state blob's last d floats, docs/codecs.md) is the gradient less what
        # the global set applied of this worker's message.
        state = worker.save_state()
        residual = np.frombuffer(state, np.float32, count=d, offset=len(state) - 4 * d)
        applied = np.where(update != 0, values, 0).astype(np.float32)
        np.testing.assert_array_equal(residual + applied, gradient)

    # After a robust rule: keep_global_top_k sparsifies its output in place and names what remains
    # (a dense output here, the mean of dense gradients, so that it has more than k non-zeros).
    aggregate = np.mean(np.stack(gradients), axis=0).astype(np.float32)
    before = aggregate.copy()
    keep = codecs.keep_global_top_k(aggregate, d, spec)
    assert np.count_nonzero(aggregate) == 25
    kept = np.flatnonzero(aggregate)
    np.testing.assert_array_equal(aggregate[kept], before[kept])
    assert np.all(np.abs(before[kept]).min() >= np.abs(np.delete(before, kept)).max())
    np.testing.assert_array_equal(workers[1].decode(keep, d), aggregate)


def test_global_top_k_bad_input_is_a_value_error(rng):
    d = 100
    worker = codecs.Codec("gtopk:k=5")
    message = worker.encode(rng.standard_normal(d).astype(np.float32))
    state = worker.save_state()
    with pytest.raises(ValueError, match="worker message"):
        worker.accept_global(message, d)  # a worker's message is not a global set
    with pytest.raises(ValueError):
        worker.accept_global(b"\x00" * 10, d)
    assert worker.save_state() == state  # nothing changed
    with pytest.raises(ValueError, match="message 1"):
        codecs.global_topk_reduce([message, message[:-1]], d, "gtopk:k=5")
    with pytest.raises(ValueError, match="gtopk"):
        codecs.global_topk_reduce([message], d, "topk:k=5")
    with pytest.raises(ValueError, match="gtopk"):
        codecs.Codec("topk:k=5").accept_global(message, d)
    with pytest.raises(ValueError, match="elements"):
        codecs.keep_global_top_k(np.zeros(d + 1, np.float32), d, "gtopk:k=5")


_RESIZE_UNDER_A_CALL = r"""
import array, threading
import numpy as np
from ballot import _native

D = 2_000_000
layout = [("w", D)]
codec = _native.Codec("fp32", 1, 0)
message = codec.encode(np.ones(D, dtype=np.float32), layout)
accumulator = array.array("f", bytes(4 * D))
stop = False
refused = 0

def resize():
    global refused
    while not stop:
        try:
            accumulator.extend(array.array("f", bytes(4 * D)))  # a realloc moves the buffer
            del accumulator[D:]
        except BufferError:
            refused += 1

thread = threading.Thread(target=resize)
thread.start()
try:
    for _ in range(150):
        try:
            codec.decode_add(message, accumulator, layout, 1.0, 0)
        except ValueError:
            pass  # caught between the extend and the del: the size is checked
finally:
    stop = True
    thread.join()
print("refused", refused)
"""


def test_a_buffer_in_use_cannot_be_resized_by_another_thread():
    """While a call reads or writes a caller's array with the GIL released, the array stays
    exported: another thread's resize of an array.array (any buffer exporter, through the native
    module, which takes them) is a BufferError, not a moved buffer under the call (which crashed
    the process)."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _RESIZE_UNDER_A_CALL],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused")
