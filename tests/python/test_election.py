import numpy as np
import pytest

from ballot import election


def test_paper_code_tolerates_one_not_two():
    g = election.code("paper5", 5)
    assert g.ones == 19 and g.redundancy == pytest.approx(3.8)
    assert g.certify(1).tolerant
    c = g.certify(2)
    assert not c.tolerant and c.counter_example is not None
    assert len(c.counter_example.byzantine) == 2 and len(c.counter_example.partition_signs) == 5
    assert g.max_tolerated_b().max_b == 1
    assert g.structural_bound() == 1


def test_identity_does_not_tolerate_one_and_matrix_round_trip():
    g = election.code("identity", 5)
    assert not g.certify(1).tolerant
    np.testing.assert_array_equal(g.matrix, np.eye(5, dtype=np.uint8))
    assert election.Code.from_matrix(g.matrix) == g
    assert election.Code.parse(g.to_text()) == g


def test_threat_model_b_for_identity():
    g = election.code("identity", 7)
    assert g.certify(3, model="votes_and_sources").tolerant


def test_minimum_redundancy_search_known_answers():
    r = election.find_minimum_redundancy_code(5, 1)
    assert r.ones == 19 and r.proven_optimal and r.code.certify(1).tolerant
    r7 = election.find_minimum_redundancy_code(7, 1)
    assert r7.ones == 29 and r7.construction_ones == 33


def test_monte_carlo_sanity_numbers():
    # ALGORITHMS.md §3 sanity numbers use the reference script's tie arithmetic.
    e = election.monte_carlo_bernoulli(15, 3.0, 6, q=0.9, ties="abstain", trials=1 << 16)
    assert e.error == pytest.approx(0.071, abs=0.01)
    signsgd = election.code("identity", 15).monte_carlo(6, ties="abstain")
    assert signsgd.error == pytest.approx(0.140, abs=0.01)
    rows = election.monte_carlo_table(9, [1, 2], ["identity", "deterministic:b=2"], trials=4096)
    assert len(rows) == 4 and {r["code"] for r in rows} == {"identity", "deterministic:b=2"}


def test_errors():
    with pytest.raises(ValueError):
        election.code("paper5", 7)
    with pytest.raises(ValueError, match="threat model"):
        election.code("identity", 5).certify(1, model="nope")
    with pytest.raises(ValueError):
        election.Code.from_rows([[0, 9]], n=3)
    with pytest.raises(ValueError):
        election.Code.from_matrix([[0, 2], [1, 1]])
    with pytest.raises(ValueError):
        election.find_minimum_redundancy_code(15, 1)
    with pytest.raises(ValueError):
        election.code("identity", 5).monte_carlo(1, ties="sometimes")
    with pytest.raises(ValueError, match="at least one node"):
        election.Code.from_rows([])
    with pytest.raises(ValueError, match="non-negative"):
        election.Code.from_rows([[0], [-1]])
    with pytest.raises(ValueError, match="non-negative"):
        election.code("identity", 5).certify(-1)
    with pytest.raises(ValueError, match="r only"):
        election.monte_carlo_table(5, [1], ["bernoulli:x=3"], trials=10)
