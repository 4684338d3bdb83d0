"""ballot.compat.byzfl against the real ByzFL (0.0.11): the same class, the same constructor
arguments, the same inputs (numpy and torch, list and 2-D), equal results up to float32 rounding.

Tolerances: ByzFL computes in float32 (torch; numpy float32 sums) and Ballot accumulates in
float64, so means of n values differ by a few float32 ulps of the largest partial sum: rtol = atol
= 2e-5 for unit-variance inputs. The geometric median and centered clipping also carry that
rounding through their distances into their weights (rtol = atol = 1e-4). Randomised ByzFL rules
cannot agree number for number: Gaussian is tested by its distribution, CAF/SMEA where the choice
is clear-cut, and the Optimal_* searches compare their objective (ties in a saturated objective
are decided by rounding, see test_optimal_attacks_search_like_byzfl)."""

import math

import numpy as np
import pytest

byzfl = pytest.importorskip("byzfl", reason="ByzFL is not installed (pip install byzfl --no-deps)")
torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")

from ballot import robust  # noqa: E402
from ballot.compat import byzfl as compat  # noqa: E402

RTOL = ATOL = 2e-5
FORMS = ["numpy-2d", "numpy-list", "torch-2d", "torch-list"]


def make(rng, n, d, form):
    x = rng.standard_normal((n, d)).astype(np.float32)
    if form.startswith("torch"):
        x = torch.from_numpy(x)
    return list(x) if form.endswith("list") else x


def copy(vectors):
    """A deep copy for ByzFL (its Clipping and ARC clip a 2-D input in place)."""
    if isinstance(vectors, list):
        return [v.clone() if torch.is_tensor(v) else v.copy() for v in vectors]
    return vectors.clone() if torch.is_tensor(vectors) else vectors.copy()


def as_np(x):
    return x.double().numpy() if torch.is_tensor(x) else np.asarray(x, dtype=np.float64)


def check_type(ours, vectors):
    first = vectors[0] if isinstance(vectors, list) else vectors
    if torch.is_tensor(first):
        assert torch.is_tensor(ours) and ours.dtype == torch.float32
    else:
        assert isinstance(ours, np.ndarray) and ours.dtype == np.float32


def compare(name, kwargs, vectors, rtol=RTOL, atol=ATOL):
    ours = getattr(compat, name)(**kwargs)(vectors)
    theirs = getattr(byzfl, name)(**kwargs)(copy(vectors))
    check_type(ours, vectors)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(as_np(ours), as_np(theirs), rtol=rtol, atol=atol, err_msg=f"{name}({kwargs})")
    return ours


SIZES = [(5, 1, 16), (10, 3, 257), (25, 6, 1000)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f, d", SIZES)
@pytest.mark.parametrize("name", ["Average", "Median", "TrMean", "Meamed", "Krum", "MultiKrum"])
def test_coordinate_wise_and_krum_rules_match_byzfl(rng, name, n, f, d, form):
    vectors = make(rng, n, d, form)
    kwargs = {} if name in ("Average", "Median") else {"f": f}
    compare(name, kwargs, vectors)


@pytest.mark.parametrize("form", ["numpy-2d", "torch-list"])
@pytest.mark.parametrize("name", ["TrMean", "Meamed", "Krum", "MultiKrum"])
def test_f_zero_and_largest_f_match_byzfl(rng, name, form):
    for n, f in [(6, 0), (7, 0), (7, 3), (8, 3)]:
        compare(name, {"f": f}, make(rng, n, 33, form))


def test_krum_scores_byzfls_neighbour_count(rng):
    # ByzFL's Krum scores n − f − 1 neighbours, the paper's (Ballot's krum:f=f) n − f − 2: find
    # inputs where the two choices differ and check that the adapter makes ByzFL's.
    for _ in range(500):
        x = rng.standard_normal((7, 2)).astype(np.float32)
        paper = robust.Aggregator("krum:f=2")(x)
        if not np.array_equal(paper, byzfl.Krum(f=2)(x.copy())):
            break
    else:
        pytest.fail("no input separating the two neighbour counts was found")
    ours = compat.Krum(f=2)(x)
    np.testing.assert_array_equal(ours, byzfl.Krum(f=2)(x.copy()))
    np.testing.assert_array_equal(ours, robust.Aggregator("krum:f=1")(x))
    assert not np.array_equal(ours, paper)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, d", [(5, 16), (12, 500), (25, 2000)])
@pytest.mark.parametrize("kwargs", [{}, {"nu": 1e-6, "T": 10}, {"nu": 5.0, "T": 1}, {"nu": 0.1, "T": 0}])
def test_geometric_median_matches_byzfl(rng, kwargs, n, d, form):
    compare("GeometricMedian", kwargs, make(rng, n, d, form), rtol=1e-4, atol=1e-4)


def test_geometric_median_leaves_out_infinite_rows(rng):
    x = rng.standard_normal((7, 40)).astype(np.float32)
    x[2, 5] = np.inf
    compare("GeometricMedian", {}, x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, d", [(5, 16), (12, 500), (25, 2000)])
@pytest.mark.parametrize("kwargs", [{}, {"L": 1, "tau": 1.0}, {"L": 3, "tau": 1.0}, {"L": 5, "tau": 30.0},
                                    {"L": 0, "tau": 1.0}])
def test_centered_clipping_matches_byzfl_across_calls(rng, kwargs, n, d, form):
    ours, theirs = compat.CenteredClipping(**kwargs), byzfl.CenteredClipping(**kwargs)
    for _ in range(3):  # the centre is the previous aggregate: the state must follow ByzFL's
        vectors = make(rng, n, d, form)
        a, b = ours(vectors), theirs(copy(vectors))
        check_type(a, vectors)
        np.testing.assert_allclose(as_np(a), as_np(b), rtol=1e-4, atol=1e-4)


def test_centered_clipping_accepts_an_initial_centre(rng):
    x = rng.standard_normal((9, 64)).astype(np.float32)
    m = rng.standard_normal(64).astype(np.float32)
    theirs = byzfl.CenteredClipping(L=2, tau=1.0)
    theirs.m = m.copy()  # ByzFL 0.0.11's constructor rejects every m, so set it afterwards
    ours = compat.CenteredClipping(m=m, L=2, tau=1.0)
    np.testing.assert_allclose(ours(x), theirs(x.copy()), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f, d", [(5, 1, 16), (7, 2, 100), (10, 3, 500)])
def test_mda_matches_byzfl(rng, n, f, d, form):
    compare("MDA", {"f": f}, make(rng, n, d, form))


def test_mda_refuses_too_many_subsets(rng):
    with pytest.raises(ValueError, match="max_subsets"):
        compat.MDA(f=12)(rng.standard_normal((40, 4)).astype(np.float32))


# ---- pre-aggregators


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f, d", SIZES)
def test_nnm_matches_byzfl(rng, n, f, d, form):
    out = compare("NNM", {"f": f}, make(rng, n, d, form))
    assert tuple(out.shape) == (n, d)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f", [(6, 3), (5, 4), (2, 1)])
def test_nnm_below_two_f_plus_one_matches_byzfl(rng, n, f, form):
    """ByzFL's NNM takes any f < n; Ballot's stage needs n >= 2f + 1, so compat computes it."""
    out = compare("NNM", {"f": f}, make(rng, n, 33, form))
    assert tuple(out.shape) == (n, 33)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("c", [0.0, 1.0, 2.0, 100.0])
def test_clipping_matches_byzfl_and_leaves_the_input_alone(rng, c, form):
    vectors = make(rng, 9, 40, form)
    before = copy(vectors)
    compare("Clipping", {"c": c}, vectors)
    for a, b in zip(vectors, before):
        np.testing.assert_array_equal(as_np(a), as_np(b))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f", [(5, 0), (5, 1), (10, 3), (25, 6), (4, 3), (6, 6), (242, 33)])
def test_arc_matches_byzfl(rng, n, f, form):
    vectors = make(rng, n, 64, form)
    scale = np.exp(np.linspace(-1, 2, n)).astype(np.float32)  # distinct norms
    vectors = [v * float(s) for v, s in zip(vectors, scale)] if isinstance(vectors, list) else \
        vectors * (torch.from_numpy(scale) if torch.is_tensor(vectors) else scale)[:, None]
    compare("ARC", {"f": f}, vectors)


def test_arc_ties_at_the_threshold_match_byzfl(rng):
    # Rows that are permutations of one vector have equal norms: ByzFL's stable sort clips some of
    # the tied rows and not others, to the norm they already have.
    base = rng.standard_normal(32).astype(np.float32)
    x = np.stack([rng.permutation(base) * (3.0 if i < 4 else 1.0) for i in range(11)]).astype(np.float32)
    compare("ARC", {"f": 3}, x)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, s", [(10, 1), (10, 2), (11, 3), (25, 4), (5, 7)])
def test_bucketing_draws_byzfls_permutation(rng, n, s, form):
    # Same global RNG call as ByzFL (torch.randperm / numpy.random.permutation): same buckets.
    vectors = make(rng, n, 50, form)
    torch.manual_seed(7)
    np.random.seed(7)
    ours = compat.Bucketing(s)(vectors)
    torch.manual_seed(7)
    np.random.seed(7)
    theirs = byzfl.Bucketing(s)(copy(vectors))
    check_type(ours, vectors)
    assert tuple(ours.shape) == (math.ceil(n / s), 50)
    np.testing.assert_allclose(as_np(ours), as_np(theirs), rtol=RTOL, atol=ATOL)


def test_bucketing_is_a_partition_into_bucket_means(rng):
    x = rng.standard_normal((11, 20)).astype(np.float32)
    out = compat.Bucketing(3)(x)  # buckets of 3, 3, 3 and the 2 left over
    np.testing.assert_allclose(3 * out[:3].sum(axis=0) + 2 * out[3], x.sum(axis=0), rtol=1e-4, atol=1e-4)


# ---- MoNNA, SMEA and CAF


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f, d", SIZES)
def test_monna_matches_byzfl(rng, n, f, d, form):
    for idx in (0, n - 1):
        compare("MoNNA", {"f": f, "idx": idx}, make(rng, n, d, form))


@pytest.mark.parametrize("form", FORMS)
def test_label_flipping_is_byzfls_mean_of_the_given_vectors(rng, form):
    compare("LabelFlipping", {}, make(rng, 7, 40, form))
    assert "LabelFlipping" in compat.__all__


def outliers(rng, n, f, d, form):
    x = rng.standard_normal((n, d)).astype(np.float32)
    x[:f] += 50 * rng.standard_normal((f, d)).astype(np.float32)
    if form.startswith("torch"):
        x = torch.from_numpy(x)
    return (list(x) if form.endswith("list") else x), x[f:]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f, d", [(5, 1, 16), (8, 2, 100)])
def test_smea_matches_byzfl_on_clear_outliers(rng, n, f, d, form):
    # ByzFL's eigenvalue is one power step from a random vector; with f far outliers every
    # estimate ranks the honest subset first.
    vectors, honest = outliers(rng, n, f, d, form)
    compare("SMEA", {"f": f}, vectors)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, f, d", [(10, 2, 50), (25, 6, 200)])
def test_caf_is_near_the_honest_mean_like_byzfl(rng, n, f, d, form):
    # ByzFL's CAF is random (one power step from a random vector): compare both with the honest
    # mean, not with each other number for number.
    vectors, honest = outliers(rng, n, f, d, form)
    ours = compat.CAF(f=f)(vectors)
    check_type(ours, vectors)
    honest_mean = as_np(honest).mean(axis=0)
    theirs = byzfl.CAF(f=f)(copy(vectors))
    spread = np.linalg.norm(as_np(honest) - honest_mean, axis=1).mean()
    assert np.linalg.norm(as_np(ours) - honest_mean) < spread
    assert np.linalg.norm(as_np(ours) - honest_mean) <= 2 * np.linalg.norm(as_np(theirs) - honest_mean) + 0.1 * spread


# ---- attacks


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name, kwargs", [
    ("SignFlipping", {}),
    ("InnerProductManipulation", {}), ("InnerProductManipulation", {"tau": 0.5}),
    ("InnerProductManipulation", {"tau": 0.0}), ("InnerProductManipulation", {"tau": -3.0}),
    ("ALittleIsEnough", {}), ("ALittleIsEnough", {"tau": -2.0}), ("ALittleIsEnough", {"tau": 0.0}),
    ("Mimic", {}), ("Mimic", {"epsilon": 4}),
])
@pytest.mark.parametrize("n, d", [(5, 16), (20, 1000)])
def test_attacks_match_byzfl(rng, name, kwargs, n, d, form):
    compare(name, kwargs, make(rng, n, d, form))


@pytest.mark.parametrize("form", FORMS)
def test_inf_is_float32_infinity(rng, form):
    vectors = make(rng, 4, 30, form)
    out = compat.Inf()(vectors)
    check_type(out, vectors)
    assert tuple(out.shape) == (30,) and np.isposinf(as_np(out)).all()
    assert np.isposinf(as_np(byzfl.Inf()(copy(vectors)))).all()


@pytest.mark.parametrize("form", ["numpy-2d", "torch-list"])
@pytest.mark.parametrize("mu, sigma", [(0.0, 1.0), (3.0, 0.5), (-1.0, 200.0)])
def test_gaussian_has_byzfls_distribution(rng, mu, sigma, form):
    from scipy import stats

    d = 200_000
    vectors = make(rng, 3, d, form)
    torch.manual_seed(1)
    np.random.seed(1)
    out = compat.Gaussian(mu=mu, sigma=sigma)(vectors)
    check_type(out, vectors)
    sample = as_np(out)
    assert abs(sample.mean() - mu) < 5 * sigma / math.sqrt(d)
    assert abs(sample.std() / sigma - 1) < 5 / math.sqrt(2 * d)
    assert stats.kstest(sample, "norm", args=(mu, sigma)).pvalue > 1e-4
    theirs = as_np(byzfl.Gaussian(mu=mu, sigma=sigma)(copy(vectors)))
    assert stats.ks_2samp(sample[:20_000], theirs[:20_000]).pvalue > 1e-4
    # Reproducible from the framework's seed, fresh on every call.
    torch.manual_seed(1)
    np.random.seed(1)
    again = compat.Gaussian(mu=mu, sigma=sigma)
    first = as_np(again(vectors))
    np.testing.assert_array_equal(first, sample)
    assert not np.array_equal(as_np(again(vectors)), first)


def optimal_setups(setup):
    if setup == "default":  # ByzFL's defaults: Average after Clipping(c=2.0)
        return {}, {}
    if setup == "wide-clip":
        return {"pre_agg_list": [compat.Clipping(c=1e5)]}, {"pre_agg_list": [byzfl.Clipping(c=1e5)]}
    return ({"agg": compat.TrMean(f=3), "pre_agg_list": [compat.NNM(f=3)]},
            {"agg": byzfl.TrMean(f=3), "pre_agg_list": [byzfl.NNM(f=3)]})


@pytest.mark.parametrize("name", ["Optimal_InnerProductManipulation", "Optimal_ALittleIsEnough"])
@pytest.mark.parametrize("form", ["numpy-2d", "torch-list"])
@pytest.mark.parametrize("setup", ["default", "wide-clip", "nnm-trmean"])
def test_optimal_attacks_evaluate_like_byzfl(rng, name, form, setup):
    honest = make(rng, 8, 64, form)
    ours_kw, their_kw = optimal_setups(setup)
    ours, theirs = getattr(compat, name)(f=3, **ours_kw), getattr(byzfl, name)(f=3, **their_kw)
    avg = byzfl.Average()(copy(honest))
    for tau in (0.0, 1.0, 10.0, 30.0, 310.0, -5.0):
        np.testing.assert_allclose(ours._evaluate(honest, avg, tau), theirs._evaluate(copy(honest), avg, tau),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["Optimal_InnerProductManipulation", "Optimal_ALittleIsEnough"])
@pytest.mark.parametrize("form", ["numpy-2d", "torch-list"])
def test_optimal_attacks_search_like_byzfl(rng, name, form):
    # The whole search agrees where the objective keeps growing (wide clipping, 8 evaluations).
    # Under ByzFL's default Clipping(c=2.0) the objective saturates after the first step: every
    # later factor gives the same distance up to float rounding, so which factor "wins" is
    # decided by the last bits of each library's sums and cannot be compared.
    honest = make(rng, 8, 64, form)
    ours_kw, their_kw = optimal_setups("wide-clip")
    ours = getattr(compat, name)(f=3, evals=8, **ours_kw)
    theirs = getattr(byzfl, name)(f=3, evals=8, **their_kw)
    np.testing.assert_allclose(as_np(ours(honest)), as_np(theirs(copy(honest))), rtol=1e-4, atol=1e-4)


# ---- errors and Ballot's contract


@pytest.mark.parametrize("name", ["TrMean", "Krum", "MultiKrum", "MDA", "Meamed", "NNM", "ARC", "MoNNA", "CAF", "SMEA"])
@pytest.mark.parametrize("f", [-1, 1.5, "2"])
def test_bad_f_is_a_value_error(name, f):
    with pytest.raises(ValueError, match="f must be a non-negative integer"):
        getattr(compat, name)(f=f)


@pytest.mark.parametrize("name", ["TrMean", "Krum", "MultiKrum", "MDA", "Meamed"])
def test_f_too_large_for_n_is_a_value_error(rng, name):
    with pytest.raises(ValueError, match=r"Cannot tolerate 2f ≥ n. Got f=3, n=6"):
        getattr(compat, name)(f=3)(rng.standard_normal((6, 4)).astype(np.float32))


@pytest.mark.parametrize("name", ["Average", "Median", "Krum", "GeometricMedian", "CenteredClipping", "NNM",
                                  "Bucketing", "Clipping", "SignFlipping", "ALittleIsEnough", "Gaussian", "Inf"])
def test_float64_is_a_type_error_naming_float32(rng, name):
    x = rng.standard_normal((5, 8))
    for vectors in (x, list(x), torch.from_numpy(x), list(torch.from_numpy(x))):
        with pytest.raises(TypeError, match=r"float32.*float64|float64.*float32"):
            getattr(compat, name)()(vectors)


def test_other_bad_inputs(rng):
    with pytest.raises(TypeError, match="should be a 'list'"):
        compat.Median()("not vectors")
    with pytest.raises(TypeError, match="should be a 'list'"):
        compat.Median()([[1.0, 2.0]])
    with pytest.raises(ValueError, match="2-D"):
        compat.Median()(np.zeros((2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="at least one"):
        compat.Average()([])
    for rule in (compat.ARC(f=0), compat.Clipping()):
        with pytest.raises(ValueError, match="at least one"):
            rule(np.zeros((0, 4), np.float32))
    with pytest.raises(ValueError, match="epsilon must be smaller"):
        compat.Mimic(epsilon=3)(rng.standard_normal((3, 4)).astype(np.float32))
    with pytest.raises(ValueError, match="idx must be smaller"):
        compat.MoNNA(f=1, idx=5)(rng.standard_normal((5, 4)).astype(np.float32))
    with pytest.raises(TypeError, match="tau must be a float"):
        compat.InnerProductManipulation(tau=2)
    with pytest.raises(TypeError, match="nu must be a float"):
        compat.GeometricMedian(nu=1)
    with pytest.raises(ValueError, match="s must be a positive integer"):
        compat.Bucketing(s=0)
    with pytest.raises(ValueError, match="c must be a non-negative float"):
        compat.Clipping(c=-1.0)
    with pytest.raises(ValueError, match="tau must be a non-negative float"):
        compat.CenteredClipping(tau=1)
    with pytest.raises(ValueError, match="at least 2 honest"):
        compat.ALittleIsEnough()(rng.standard_normal((1, 4)).astype(np.float32))


def test_non_finite_inputs_follow_ballots_contract(rng):
    x = rng.standard_normal((5, 16)).astype(np.float32)
    x[4] = compat.Inf()(x[:4])  # ByzFL's Inf attack
    np.testing.assert_array_equal(compat.Median()(x), np.median(x[:4], axis=0).astype(np.float32))
    for rule in (compat.TrMean(f=1), compat.Krum(f=1), compat.MultiKrum(f=1), compat.Meamed(f=1),
                 compat.GeometricMedian(), compat.CenteredClipping(tau=1.0)):
        assert np.isfinite(rule(x)).all(), type(rule).__name__
