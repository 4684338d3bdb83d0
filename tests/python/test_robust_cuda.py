"""ballot.robust on CUDA tensors: the coordinate-wise rules on the GPU give the CPU rule's bits and
report, and so do Krum and multi-Krum (a cuBLAS Gram matrix: the same choice on inputs without
near-ties); every other rule and stage runs on the host and hands its result back on the vectors'
device (skips without a GPU)."""

import numpy as np
import pytest

import ballot
from ballot import robust, signs
from conftest import torch_or_skip

ON_GPU = ["mean", "median:f=2", "trimmed_mean:f=3", "meamed:f=1", "krum:f=1", "multi_krum:f=2,m=4", "multi_krum:f=2"]
ON_HOST = ["geometric_median", "nnm:f=2 > trimmed_mean:f=2", "centered_clipping", "bulyan:f=1"]


def cuda_torch():
    torch = torch_or_skip()
    if not ballot.has_cuda or signs.cuda_device_count() == 0 or not torch.cuda.is_available():
        pytest.skip("no CUDA device (or a Ballot or torch without CUDA)")
    return torch


def rows(rng, n, d, spoil=()):
    x = rng.standard_normal((n, d)).astype(np.float32)
    for i in spoil:
        x[i, d // 2] = np.nan
    return x


@pytest.mark.parametrize("spec", ON_GPU + ON_HOST)
@pytest.mark.parametrize("form", ["matrix", "views", "separate"])
def test_cuda_vectors_give_the_cpu_rule_on_their_device(rng, spec, form):
    torch = cuda_torch()
    x = rows(rng, 11, 70001, spoil=(4,))
    expected, expected_report = robust.Aggregator(spec).aggregate(x)
    gpu = torch.from_numpy(x).cuda()
    # A 2-D tensor and a list of its rows are read in place; separately allocated vectors are
    # gathered on the device first.
    vectors = {"matrix": gpu, "views": list(gpu), "separate": [row.clone() for row in gpu]}[form]
    value, report = robust.Aggregator(spec).aggregate(vectors)
    assert value.device == gpu.device and value.dtype == torch.float32
    np.testing.assert_array_equal(value.cpu().numpy().view(np.uint32), expected.view(np.uint32))
    assert report.non_finite == expected_report.non_finite
    assert report.excluded == expected_report.excluded


def test_more_than_64_vectors_run_on_the_host(rng):
    torch = cuda_torch()
    x = rows(rng, 65, 1000)
    expected = robust.Aggregator("median:f=10")(x)
    value = robust.Aggregator("median:f=10")(torch.from_numpy(x).cuda())
    np.testing.assert_array_equal(value.cpu().numpy(), expected)


def test_pre_aggregators_return_on_the_device(rng):
    torch = cuda_torch()
    x = rows(rng, 8, 5000)
    expected, non_finite = robust.PreAggregator("nnm:f=1").apply(x)
    value, gpu_non_finite = robust.PreAggregator("nnm:f=1").apply(torch.from_numpy(x).cuda())
    assert value.is_cuda and gpu_non_finite == non_finite
    np.testing.assert_array_equal(value.cpu().numpy(), expected)


def test_bad_cuda_inputs_are_errors(rng):
    torch = cuda_torch()
    rule = robust.Aggregator("median:f=1")
    with pytest.raises(TypeError):
        rule(torch.zeros((5, 10), dtype=torch.float64, device="cuda"))
    with pytest.raises(ValueError, match="precondition|2f"):
        rule(torch.zeros((2, 10), device="cuda"))
    with pytest.raises(ValueError):
        rule([torch.zeros(10, device="cuda"), torch.zeros(10)])  # mixed devices
    all_nan = torch.full((3, 10), float("nan"), device="cuda")
    with pytest.raises(ValueError, match="non-finite"):
        rule(all_nan)
    with pytest.raises(ValueError, match="2f"):
        robust.Aggregator("krum:f=2")(torch.zeros((6, 10), device="cuda"))
    with pytest.raises(ValueError, match="finite score"):
        robust.Aggregator("multi_krum:f=1")(torch.full((5, 10), float("inf"), device="cuda"))


def test_the_byzfl_adapter_returns_on_the_device(rng):
    torch = cuda_torch()
    from ballot.compat import byzfl

    x = rows(rng, 9, 3000)
    gpu = torch.from_numpy(x).cuda()
    # Every kind of class, those computed partly in numpy (Krum(f=0), CenteredClipping, the
    # Optimal attacks' norms) among them: CUDA rows are copied to the host there, not read as
    # numpy. A fresh instance for each input (CenteredClipping keeps its last aggregate).
    exact = [lambda: byzfl.TrMean(f=2), lambda: byzfl.Krum(f=2), lambda: byzfl.Clipping(c=0.0),
             lambda: byzfl.NNM(f=2), lambda: byzfl.Krum(f=0), lambda: byzfl.MultiKrum(f=2)]
    close = [lambda: byzfl.CenteredClipping(), lambda: byzfl.GeometricMedian(),
             lambda: byzfl.Optimal_InnerProductManipulation(), lambda: byzfl.Optimal_ALittleIsEnough()]
    for make_rule in exact + close:
        expected = make_rule()(torch.from_numpy(x))
        value = make_rule()(gpu)
        name = type(make_rule()).__name__
        assert value.device == gpu.device, name
        if make_rule in exact:
            np.testing.assert_array_equal(value.cpu().numpy(), expected.numpy(), err_msg=name)
        else:
            np.testing.assert_allclose(value.cpu().numpy(), expected.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
