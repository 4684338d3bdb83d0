"""Robust aggregation rules and pre-aggregators (C++ ``ballot::robust``).

Rules and pipelines are named by the same registry strings as the C++ library and the
``ballot`` program, e.g. ``"median"``, ``"trimmed_mean:f=2"``, ``"nnm:f=2 > krum:f=2"``;
:func:`rule_names` and :func:`pre_aggregator_names` list them and docs/robust.md documents each
rule, its paper, precondition and cost. Rules follow their papers (where ByzFL differs, see
:mod:`ballot.compat.byzfl`).

Inputs are a list of 1-D float32 vectors or one 2-D float32 array (rows = vectors), as numpy
arrays or torch tensors; on the CPU rows are read in place, never stacked or copied. The result
has the input's type and device: a torch tensor for torch input, a numpy array otherwise.
Non-finite inputs never win: they are left out and named in the report. The GIL is released
while a rule runs.

CUDA tensors (a build with CUDA, ``ballot.has_cuda``): ``mean``, ``median``, ``trimmed_mean`` and
``meamed`` over at most 64 vectors run on the GPU, on torch's current stream, bit for bit the CPU
rule (a 2-D tensor's rows are read in place; a list is first gathered into one device buffer).
Every other rule, pipeline and pre-aggregator copies the vectors to the host, runs there and
returns its result on the vectors' device. Either way the call waits for the GPU before it
returns (the report needs the non-finite rows).

>>> import numpy as np, ballot.robust as robust
>>> rule = robust.Aggregator("trimmed_mean:f=1")
>>> rule([np.ones(4, np.float32), np.zeros(4, np.float32), np.full(4, 100, np.float32)])
array([1., 1., 1., 1.], dtype=float32)
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

from ballot import _native
from ballot._arrays import count, cuda_stream, first_of, is_cuda, like


class AggregationReport(NamedTuple):
    """What a rule did with its inputs (ascending indices into the rule's inputs)."""

    non_finite: List[int]
    """Inputs with a NaN or infinite coordinate (never used)."""
    selected: List[int]
    """Selection rules (Krum, Multi-Krum, Bulyan, ...): the inputs the output is built from."""
    excluded: List[int]
    """Inputs that do not contribute to the output at all."""
    scores: List[float]
    """Per-input scores where the rule has them (Krum scores, geometric-median weights, ...)."""
    iterations: int
    """Iterations run by iterative rules (geometric median, centered clipping)."""


class Aggregation(NamedTuple):
    value: Any
    """The aggregate: d float32 values, of the input's array type and device."""
    report: AggregationReport


def rule_names() -> List[str]:
    """The registry names of the aggregation rules."""
    return list(_native.rule_names())


def pre_aggregator_names() -> List[str]:
    """The registry names of the pre-aggregators (used before a rule with ``>``)."""
    return list(_native.pre_aggregator_names())


def _with_threads(spec: str, threads: Optional[int]) -> str:
    if threads is None:
        return spec
    if isinstance(threads, bool) or count(threads, "threads") < 1:
        raise ValueError(f"threads: must be a positive integer, got {threads!r}")
    threads = int(threads)
    stages = []
    for stage in spec.split(">"):
        stage = stage.strip()
        if "threads=" in stage:
            raise ValueError(f"threads: given both as an argument and in the spec stage '{stage}'")
        stages.append(f"{stage},threads={threads}" if ":" in stage else f"{stage}:threads={threads}")
    return " > ".join(stages)


class Aggregator:
    """A robust aggregation rule or pipeline, built from a registry string.

    ``Aggregator(spec, threads=None)``: ``threads`` splits the work of every stage over that many
    threads (results are bit-identical for any value). Calling the object aggregates and returns
    the value; :meth:`aggregate` returns the value with its :class:`AggregationReport`, which is
    also kept in :attr:`last_report`. An Aggregator keeps per-call state for some rules
    (bucketing's round counter, centered clipping's center): use one per thread.

    Raises ValueError for an unknown name or option, a violated precondition (e.g. Krum needs
    n >= 2f + 3) or mismatched inputs; TypeError for a dtype other than float32.
    """

    def __init__(self, spec: str, threads: Optional[int] = None) -> None:
        self._native = _native.Aggregator(_with_threads(spec, threads))
        self._last: Optional[tuple] = None

    @property
    def last_report(self) -> Optional[AggregationReport]:
        """The report of the last call (None before the first)."""
        return None if self._last is None else AggregationReport(*self._last)

    @property
    def spec(self) -> str:
        """The canonical registry string of this rule with its options."""
        return self._native.spec

    def check(self, n: int) -> None:
        """Raises ValueError if the rule's precondition does not hold for n inputs."""
        self._native.check(count(n, "n"))

    def set_center(self, center: Any) -> None:
        """Centered clipping only: the centre v₀ the next calls start from (a 1-D float32 CPU
        array or tensor of the inputs' length, copied), e.g. the previous round's aggregate as in
        Karimireddy et al.; None returns to the spec's ``start``. A centre of the wrong length or
        with a non-finite value makes the next call raise ValueError."""
        self._native.set_center(center)

    def aggregate(self, vectors: Any) -> Aggregation:
        """Aggregates a list of 1-D vectors or the rows of a 2-D array."""
        value = self._run(vectors)
        return Aggregation(value, AggregationReport(*self._last))

    def __call__(self, vectors: Any) -> Any:
        return self._run(vectors)

    def _run(self, vectors: Any) -> Any:
        reference = first_of(vectors)
        if is_cuda(reference):
            import torch

            d = reference.shape[-1] if reference.dim() > 0 else 0
            out = torch.empty(d, dtype=torch.float32, device=reference.device)
            self._last = self._native.aggregate_into(vectors, out, cuda_stream(reference))
            return out
        value, self._last = self._native.aggregate(vectors)
        return like(value, reference)

    def __repr__(self) -> str:
        return f"Aggregator({self.spec!r})"


class PreAggregator:
    """A pre-aggregator on its own (``"nnm:f=2"``, ``"bucketing:s=2"``, ``"clipping:tau=5"``,
    ``"arc:f=1"``): n vectors in, the stacked n' output vectors out as one new 2-D float32 array
    of the input's type (as ByzFL's pre-aggregators return them). In a pipeline string
    (``"nnm:f=2 > krum:f=2"``) the stages run inside :class:`Aggregator` without this round trip.
    Non-finite inputs are never mixed into finite outputs; :meth:`apply` names them."""

    def __init__(self, spec: str, threads: Optional[int] = None) -> None:
        self._native = _native.PreAggregator(_with_threads(spec, threads))

    @property
    def spec(self) -> str:
        return self._native.spec

    def check(self, n: int) -> None:
        """Raises ValueError if the precondition does not hold for n inputs."""
        self._native.check(count(n, "n"))

    def outputs(self, n: int) -> int:
        """The number of output vectors for n inputs (bucketing: ceil(n / s))."""
        return self._native.outputs(n)

    def apply(self, vectors: Any) -> Tuple[Any, List[int]]:
        """(stacked outputs, indices of the non-finite inputs)."""
        reference = first_of(vectors)
        matrix, non_finite = self._native.apply(vectors, cuda_stream(reference))
        return like(matrix, reference), list(non_finite)

    def __call__(self, vectors: Any) -> Any:
        return self.apply(vectors)[0]

    def __repr__(self) -> str:
        return f"PreAggregator({self.spec!r})"


def aggregate(vectors: Any, spec: str, threads: Optional[int] = None) -> Aggregation:
    """One aggregation with a fresh :class:`Aggregator`: returns (value, report)."""
    return Aggregator(spec, threads=threads).aggregate(vectors)
