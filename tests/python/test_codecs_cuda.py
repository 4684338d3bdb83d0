"""ballot.codecs on CUDA tensors: the bytes, memory and sums of the CPU codecs (skips without a GPU)."""

import numpy as np
import pytest

import ballot
from ballot import codecs, signs
from conftest import torch_or_skip

ON_GPU = ["qsgd:s=16", "qsgd:s=5,granularity=layer", "terngrad", "terngrad:clip=2.5,granularity=model",
          "topk:ratio=0.01", "topk:k=100,granularity=layer", "topk:ratio=0.05,ef=1",
          "sign", "scaled_sign", "scaled_sign:granularity=model,ef=1", "randomk:ratio=0.01",
          "randomk:k=50,granularity=layer", "threshold:tau=1.5", "threshold:tau=2,ef=1", "fp32", "fp16",
          "bf16", "fp16:ef=1", "onebit", "onebit:granularity=model,ef=0", "signum", "signum:beta=0.5",
          "dgc:ratio=0.01", "dgc:ratio=0.05,clip=2,granularity=model,warmup=2", "gtopk:ratio=0.01",
          "gtopk:k=100,granularity=layer", "qsgd:s=16,elias=1", "qsgd:s=3,elias=1,granularity=layer",
          "signum:ef=1", "signum:beta=0.5,ef=1"]
LAYOUT = [("conv", 4099), ("empty", 0), ("fc", 40000), ("out", 3)]


def cuda_torch():
    torch = torch_or_skip()
    if not ballot.has_cuda or signs.cuda_device_count() == 0 or not torch.cuda.is_available():
        pytest.skip("no CUDA device (or a Ballot or torch without CUDA)")
    return torch


@pytest.mark.parametrize("spec", ON_GPU)
def test_a_cuda_gradient_encodes_and_decodes_as_on_the_cpu(rng, spec):
    torch = cuda_torch()
    d = sum(size for _, size in LAYOUT)
    cpu, gpu = codecs.Codec(spec, seed=7, stream=2), codecs.Codec(spec, seed=7, stream=2)
    cpu_sum = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
    gpu_sum = cpu_sum.cuda()
    for round in range(3):
        g = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
        message = cpu.encode(g, LAYOUT)
        assert gpu.encode(g.cuda(), LAYOUT) == message, f"round {round}"
        cpu.decode_add(message, cpu_sum, LAYOUT, weight=0.5)
        gpu.decode_add(message, gpu_sum, LAYOUT, weight=0.5)
    torch.cuda.synchronize()
    assert torch.equal(gpu_sum.cpu(), cpu_sum)
    assert gpu.save_state() == cpu.save_state()
    if cpu.memory is not None:
        np.testing.assert_array_equal(gpu.memory, cpu.memory)


def test_error_feedback_moves_between_host_and_gpu(rng):
    torch = cuda_torch()
    d = 50000
    reference, mixed = codecs.Codec("topk:ratio=0.02,ef=1"), codecs.Codec("topk:ratio=0.02,ef=1")
    for round in range(6):
        g = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
        expected = reference.encode(g)
        # CPU, GPU, GPU, CPU, ...: the memory follows the gradient.
        got = mixed.encode(g.cuda() if round % 3 else g)
        assert got == expected, f"round {round}"
    np.testing.assert_array_equal(mixed.memory, reference.memory)
    state = reference.save_state()
    fresh = codecs.Codec("topk:ratio=0.02,ef=1")
    fresh.load_state(state, d)
    g = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
    assert fresh.encode(g.cuda()) == reference.encode(g)


def test_error_feedback_restarts_when_the_gradient_size_changes(rng):
    torch = cuda_torch()
    reference, mixed = codecs.Codec("topk:ratio=0.05,ef=1", seed=3), codecs.Codec("topk:ratio=0.05,ef=1", seed=3)
    for d, on_gpu in ((1000, False), (1500, True), (1500, False), (700, True)):
        g = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
        assert mixed.encode(g.cuda() if on_gpu else g) == reference.encode(g), f"d = {d}"
    np.testing.assert_array_equal(mixed.memory, reference.memory)


@pytest.mark.parametrize("spec", ["gtopk:ratio=0.01", "gtopk:k=100,granularity=layer"])
def test_global_top_k_takes_its_global_set_on_the_gpu(rng, spec):
    """accept_global after a CUDA encode works on the residual there: the same messages and the
    same residual as the CPU codec, round after round (and across a host encode in between)."""
    torch = cuda_torch()
    d = sum(size for _, size in LAYOUT)
    workers = [codecs.Codec(spec) for _ in range(3)]
    cpu, gpu = codecs.Codec(spec), codecs.Codec(spec)
    for round in range(4):
        others = [w.encode(rng.standard_normal(d).astype(np.float32), LAYOUT) for w in workers]
        g = torch.from_numpy(rng.standard_normal(d).astype(np.float32))
        message = cpu.encode(g, LAYOUT)
        on_gpu = gpu.encode(g, LAYOUT) if round == 2 else gpu.encode(g.cuda(), LAYOUT)
        assert on_gpu == message, f"round {round}"
        global_message = codecs.global_topk_reduce(others + [message], LAYOUT, spec)
        if round == 1:  # a save between the encode and the global set leaves the selection in place
            assert gpu.save_state() == cpu.save_state()
        for codec in workers + [cpu, gpu]:
            codec.accept_global(global_message, LAYOUT)
        assert gpu.save_state() == cpu.save_state(), f"round {round}"
