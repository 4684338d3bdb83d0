import numpy as np
import pytest

import ballot
from ballot import robust
from conftest import torch_or_skip


def vectors(rng, n, d):
    return [rng.standard_normal(d).astype(np.float32) for _ in range(n)]


def test_rule_names_are_the_registry_names():
    names = robust.rule_names()
    for name in ("mean", "median", "trimmed_mean", "meamed", "krum", "multi_krum", "bulyan",
                 "geometric_median", "centered_clipping", "mda", "caf", "smea", "monna"):
        assert name in names
    assert set(robust.pre_aggregator_names()) >= {"nnm", "bucketing", "clipping", "arc"}


def test_every_rule_of_the_table_aggregates(rng):
    vectors = [rng.standard_normal(16).astype(np.float32) for _ in range(11)]
    for name in robust.rule_names():
        out = robust.Aggregator(name)(vectors)
        assert out.shape == (16,) and np.all(np.isfinite(out)), name
    for name in robust.pre_aggregator_names():
        out = robust.Aggregator(name + " > mean")(vectors)
        assert out.shape == (16,), name


def test_median_of_a_list_matches_numpy(rng):
    xs = vectors(rng, 7, 1000)
    out = robust.Aggregator("median")(xs)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (1000,)
    np.testing.assert_array_equal(out, np.median(np.stack(xs), axis=0).astype(np.float32))


def test_trimmed_mean_ignores_outliers(rng):
    xs = vectors(rng, 5, 64)
    xs[0][:] = 1e6
    out = robust.aggregate(xs, "trimmed_mean:f=1").value
    assert np.abs(out).max() < 10


def test_two_d_input_and_column_slices_are_read_in_place(rng):
    full = rng.standard_normal((9, 200)).astype(np.float32)
    view = full[:, 50:150]  # row stride 200, unit column stride: no copy needed
    out = robust.Aggregator("mean")(view)
    np.testing.assert_allclose(out, view.astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-6)


def test_krum_reports_selection_and_scores(rng):
    xs = vectors(rng, 7, 32)
    xs[3] = xs[3] + 100
    value, report = robust.aggregate(xs, "krum:f=2")
    assert report.selected and 3 not in report.selected
    assert len(report.scores) == 7
    np.testing.assert_array_equal(value, xs[report.selected[0]])


def test_pipeline_and_threads_give_identical_bits(rng):
    xs = vectors(rng, 12, 5000)
    one = robust.Aggregator("nnm:f=2 > trimmed_mean:f=2")(xs)
    two = robust.Aggregator("nnm:f=2 > trimmed_mean:f=2", threads=2)(xs)
    np.testing.assert_array_equal(one, two)
    assert "threads=2" in robust.Aggregator("median", threads=2).spec


def test_non_finite_inputs_are_reported_and_never_win(rng):
    xs = vectors(rng, 5, 16)
    xs[2][4] = np.nan
    agg = robust.Aggregator("median:f=1")
    out = agg(xs)
    assert np.isfinite(out).all()
    assert agg.last_report.non_finite == [2]


def test_centered_clipping_starts_from_the_centre_it_is_given(rng):
    xs = np.stack(vectors(rng, 9, 300))
    rule = robust.Aggregator("centered_clipping:tau=0.5,iterations=1")
    centre = np.full(300, 3.0, np.float32)
    rule.set_center(centre)
    shifted = rule(xs)
    # CC(x; m) = m + CC(x − m; 0): the same step taken from the origin on the translated inputs.
    want = centre + robust.Aggregator("centered_clipping:tau=0.5,iterations=1")(xs - centre)
    np.testing.assert_allclose(shifted, want, rtol=1e-5, atol=1e-5)
    assert np.linalg.norm(shifted - centre) <= 0.5 + 1e-5  # one step moves at most tau
    rule.set_center(None)
    np.testing.assert_array_equal(rule(xs), robust.Aggregator("centered_clipping:tau=0.5,iterations=1")(xs))
    rule.set_center(np.zeros(7, np.float32))
    with pytest.raises(ValueError, match="center has 7 values"):
        rule(xs)
    with pytest.raises(ValueError, match="is not centered_clipping"):
        robust.Aggregator("mean").set_center(centre)
    with pytest.raises(TypeError):
        rule.set_center(np.zeros(300, np.float64))


@pytest.mark.parametrize("spec, message", [
    ("no_such_rule", "no_such_rule"),
    ("krum:f=3", r"2f \+ 3"),
    ("median:bogus=1", "bogus"),
])
def test_bad_specs_and_preconditions_are_value_errors(rng, spec, message):
    with pytest.raises(ValueError, match=message):
        robust.Aggregator(spec)(vectors(rng, 5, 8))


def test_wrong_dtype_is_a_type_error(rng):
    with pytest.raises(TypeError, match="float32"):
        robust.Aggregator("mean")([np.zeros(4), np.zeros(4)])


def test_mismatched_sizes_and_bad_shapes_are_value_errors():
    with pytest.raises(ValueError, match=r"vectors\[1\]"):
        robust.Aggregator("mean")([np.zeros(4, np.float32), np.zeros(5, np.float32)])
    with pytest.raises(ValueError, match="2-D"):
        robust.Aggregator("mean")(np.zeros((2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="contiguous"):
        robust.Aggregator("mean")([np.zeros(8, np.float32)[::2]])
    with pytest.raises(ValueError, match="at least one"):
        robust.Aggregator("mean")([])
    with pytest.raises(TypeError, match="array or tensor"):
        robust.Aggregator("mean")(["not an array"])


def test_threads_argument_is_checked():
    with pytest.raises(ValueError, match="threads"):
        robust.Aggregator("mean", threads=0)
    with pytest.raises(ValueError, match="both"):
        robust.Aggregator("median:threads=2", threads=2)
    with pytest.raises(TypeError, match="threads"):
        robust.Aggregator("mean", threads=2.5)
    assert robust.Aggregator("mean", threads=np.int64(2)).spec == "mean:threads=2"


def test_many_threads_give_the_same_bits(rng):
    # (A thread that cannot start runs its chunk on the calling thread: tests/robust, ParallelFor.)
    x = vectors(rng, 5, 3000)
    np.testing.assert_array_equal(robust.Aggregator("median", threads=500)(x), robust.Aggregator("median")(x))


def test_huge_counts_are_refused_not_wrapped():
    # f = 2**63 - 1 made 2f + 3 wrap to 1, and 7 inputs "passed" krum's precondition.
    with pytest.raises(ValueError, match=r"2f \+ 3"):
        robust.Aggregator("krum:f=9223372036854775807").check(7)
    with pytest.raises(ValueError, match=r"4f \+ 3"):
        robust.Aggregator(f"bulyan:f={2**62}").check(7)
    assert robust.PreAggregator("bucketing:s=2").outputs(2**64 - 1) == 2**63
    with pytest.raises(ValueError, match="non-negative"):
        robust.Aggregator("mean").check(-1)


def test_read_only_inputs_are_accepted(rng):
    x = rng.standard_normal((3, 10)).astype(np.float32)
    expected = robust.Aggregator("median")(x.copy())
    x.setflags(write=False)
    np.testing.assert_array_equal(robust.Aggregator("median")(x), expected)
    np.testing.assert_array_equal(expected, np.median(x, axis=0).astype(np.float32))


def test_torch_tensors_in_torch_tensor_out(rng):
    torch = torch_or_skip()
    xs = [torch.from_numpy(v) for v in vectors(rng, 5, 100)]
    out = robust.Aggregator("meamed:f=1")(xs)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.device.type == "cpu"
    np.testing.assert_array_equal(out.numpy(), robust.Aggregator("meamed:f=1")([x.numpy() for x in xs]))
    stacked = torch.stack(xs)
    assert isinstance(robust.Aggregator("mean")(stacked), torch.Tensor)
    with pytest.raises(TypeError, match="float32"):
        robust.Aggregator("mean")([x.double() for x in xs])


def test_help_has_docstrings():
    assert "registry" in robust.__doc__
    assert robust.Aggregator.__doc__ and robust.aggregate.__doc__
    assert ballot.__version__


def test_one_aggregator_shared_by_threads_is_serialised(rng):
    import threading

    xs = np.stack(vectors(rng, 9, 20000))
    rule = robust.Aggregator("median")
    expected = rule(xs)
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(rule(xs))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 80
    assert all(np.array_equal(r, expected) for r in results)


def test_pre_aggregators_return_the_stacked_outputs(rng):
    xs = np.stack(vectors(rng, 6, 300))
    clipped = robust.PreAggregator("clipping:tau=1")(xs)
    assert clipped.shape == (6, 300) and clipped.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(clipped, axis=1), 1.0, rtol=1e-5)
    mixed = robust.PreAggregator("nnm:f=1")(xs)
    # NNM (Allouah et al. 2023): each row is the mean of its n - f nearest rows (itself included).
    d2 = ((xs[:, None, :].astype(np.float64) - xs[None, :, :]) ** 2).sum(-1)
    for i in range(6):
        nearest = np.argsort(d2[i], kind="stable")[:5]
        np.testing.assert_allclose(mixed[i], xs[nearest].astype(np.float64).mean(0), rtol=1e-5, atol=1e-6)
    bucketing = robust.PreAggregator("bucketing:s=4")
    assert bucketing.outputs(6) == 2 and bucketing(xs).shape == (2, 300)
    xs[2, 7] = np.inf
    out, non_finite = robust.PreAggregator("nnm:f=1").apply(xs)
    assert non_finite == [2]
    with pytest.raises(ValueError):
        robust.PreAggregator("median")
