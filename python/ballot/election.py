"""Election codes (Sohn et al., NeurIPS 2020; C++ ``ballot::coding``).

An allocation matrix G (n x n over {0, 1}; ``G[i][j] = 1`` iff node i computes data partition j)
makes nodes take intermediate majority votes that the server votes over again. This module
builds codes by spec (``"identity"``, ``"bernoulli:r=2"``, ``"paper5"``, ``"deterministic:b=1"``),
certifies exactly which number of Byzantine nodes a code tolerates (exhaustive over the 2**n
sign patterns, with a replayable counter-example when it does not), searches the
minimum-redundancy code for small n, and estimates error probabilities by Monte Carlo.

Threat models: ``"votes_only"`` (replicated placement; Byzantine nodes lie in their votes) and
``"votes_and_sources"`` (exchange placement; Byzantine nodes also source their partitions).
docs/election_coding.md explains both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Union

import numpy as np

from ballot import _native
from ballot._arrays import count

#: Largest n the exhaustive certificates accept.
MAX_CERTIFIED_NODES: int = int(_native.max_certified_nodes)
#: Largest n the minimum-redundancy search accepts.
MAX_SEARCH_NODES: int = int(_native.max_search_nodes)


@dataclass(frozen=True)
class CounterExample:
    """An attack that defeats a code: the partition signs, the target sign, the coalition."""

    partition_signs: List[int]
    target: int
    byzantine: List[int]
    correct_votes: int
    text: str


@dataclass(frozen=True)
class Certificate:
    model: str
    n: int
    b: int
    tolerant: bool
    counter_example: Optional[CounterExample]
    patterns_checked: int


@dataclass(frozen=True)
class ToleranceProfile:
    model: str
    max_b: int
    """Largest tolerated b (-1: fails even with no Byzantine node)."""
    breaking: Optional[CounterExample]
    min_correct_votes: int


@dataclass(frozen=True)
class MonteCarloEstimate:
    trials: int
    errors: int
    error: float
    standard_error: float
    mean_redundancy: float


def _example(d: Optional[dict]) -> Optional[CounterExample]:
    return None if d is None else CounterExample(**d)


class Code:
    """An allocation matrix. Build with :meth:`from_spec`, :meth:`from_rows` or :meth:`parse`."""

    def __init__(self, native: "_native.AllocationMatrix") -> None:
        self._native = native

    @classmethod
    def from_spec(cls, spec: str, n: int, seed: int = 1) -> "Code":
        return cls(_native.AllocationMatrix.from_spec(spec, n, seed))

    @classmethod
    def from_rows(cls, rows: Sequence[Iterable[int]], n: Optional[int] = None) -> "Code":
        """rows[i] lists the partitions of node i; n defaults to len(rows)."""
        rows = [[count(j, f"rows[{i}]") for j in row] for i, row in enumerate(rows)]
        if not rows:
            raise ValueError("rows: a code needs at least one node")
        return cls(_native.AllocationMatrix.from_rows(len(rows) if n is None else count(n, "n"), rows))

    @classmethod
    def from_matrix(cls, matrix: Union[np.ndarray, Sequence[Sequence[int]]]) -> "Code":
        m = np.asarray(matrix)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError("matrix: expected a square 0/1 matrix")
        if not np.isin(m, (0, 1)).all():
            raise ValueError("matrix: entries must be 0 or 1")
        return cls.from_rows([np.flatnonzero(row).tolist() for row in m])

    @classmethod
    def parse(cls, text: str) -> "Code":
        """A code in the text format of ``ballot code`` (one row of 0/1 per line)."""
        return cls(_native.AllocationMatrix.parse(text))

    @property
    def n(self) -> int:
        return self._native.n

    @property
    def ones(self) -> int:
        return self._native.ones

    @property
    def redundancy(self) -> float:
        """r = ones / n."""
        return self._native.redundancy

    def rows(self) -> List[List[int]]:
        return [list(r) for r in self._native.rows()]

    @property
    def matrix(self) -> np.ndarray:
        """G as an n x n uint8 array."""
        g = np.zeros((self.n, self.n), dtype=np.uint8)
        for i, row in enumerate(self.rows()):
            g[i, row] = 1
        return g

    def to_text(self) -> str:
        return self._native.to_text()

    def certify(self, b: int, model: str = "votes_only") -> Certificate:
        """Does the code tolerate every coalition of at most b Byzantine nodes? (exhaustive)"""
        c = _native.certify(self._native, count(b, "b"), model)
        return Certificate(c["model"], c["n"], c["b"], c["tolerant"], _example(c["counter_example"]), c["patterns_checked"])

    def max_tolerated_b(self, model: str = "votes_only") -> ToleranceProfile:
        p = _native.max_tolerated_b(self._native, model)
        return ToleranceProfile(p["model"], p["max_b"], _example(p["breaking"]), p["min_correct_votes"])

    def structural_bound(self) -> int:
        """A proof-based lower bound on the tolerated b for any n (no enumeration); -1: none."""
        return int(_native.structural_bound(self._native)["guaranteed_b"])

    def monte_carlo(self, b: int, q: float = 0.9, attack: str = "reverse", ties: str = "plus_one",
                    trials: int = 1 << 16, seed: int = 1) -> MonteCarloEstimate:
        """P(final vote wrong) when each partition sign is right with probability q and b random
        nodes attack (``reverse``, ``directional``, ``random`` or ``opposite``)."""
        return MonteCarloEstimate(**_native.monte_carlo(self._native, count(b, "b"), float(q), attack, ties, count(trials, "trials"), count(seed, "seed")))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Code) and self._native == other._native

    def __repr__(self) -> str:
        return f"Code(n={self.n}, ones={self.ones}, rows={self.rows()})"


def code(spec: str, n: int, seed: int = 1) -> Code:
    """A code by spec: ``identity``, ``bernoulli:r=R[,seed=S]``, ``paper5``, ``deterministic:b=B``,
    ``file:path=P``."""
    return Code.from_spec(spec, n, seed)


@dataclass(frozen=True)
class SearchResult:
    code: Code
    ones: int
    proven_optimal: bool
    visits: int
    construction_ones: int
    """Ones of the general deterministic construction (0 for even n)."""


def find_minimum_redundancy_code(n: int, b: int, max_visits: int = 0) -> SearchResult:
    """The b-tolerant code with the fewest ones for n <= MAX_SEARCH_NODES, proven minimal unless
    ``max_visits`` stopped the search first."""
    r = _native.find_minimum_redundancy_code(count(n, "n"), count(b, "b"), count(max_visits, "max_visits"))
    return SearchResult(Code.from_rows(r["rows"], n), r["ones"], r["proven_optimal"], r["visits"], r["construction_ones"])


def monte_carlo_bernoulli(n: int, r: float, b: int, q: float = 0.9, attack: str = "reverse",
                          ties: str = "plus_one", trials: int = 1 << 16, seed: int = 1) -> MonteCarloEstimate:
    """Monte Carlo over the Bernoulli(r) ensemble (a fresh code every 64 trials), as the paper plots."""
    return MonteCarloEstimate(**_native.monte_carlo_bernoulli(count(n, "n"), float(r), count(b, "b"), float(q), attack, ties, count(trials, "trials"), count(seed, "seed")))


def monte_carlo_table(n: int, bs: Sequence[int], codes: Sequence[str], q: float = 0.9, attack: str = "reverse",
                      ties: str = "plus_one", trials: int = 1 << 16, seed: int = 1) -> List[dict]:
    """Rows ``{code, b, error, standard_error, redundancy}`` for each code spec and b; a
    ``bernoulli:r=R`` spec is evaluated over the ensemble, every other spec as a fixed code."""
    rows = []
    for spec in codes:
        for b in bs:
            if spec.startswith("bernoulli:") and "seed=" not in spec:
                options = dict(kv.partition("=")[::2] for kv in spec.split(":", 1)[1].split(","))
                if set(options) != {"r"}:
                    raise ValueError(f"codes: {spec!r}: the Bernoulli ensemble takes r only (bernoulli:r=R), or a "
                                     "seed for one fixed code")
                e = monte_carlo_bernoulli(n, float(options["r"]), b, q, attack, ties, trials, seed)
            else:
                e = code(spec, n, seed).monte_carlo(b, q, attack, ties, trials, seed)
            rows.append({"code": spec, "b": b, "error": e.error, "standard_error": e.standard_error,
                         "redundancy": e.mean_redundancy})
    return rows
