"""Flower strategies whose aggregation is a Ballot robust rule or pipeline (needs ``flwr``).

:class:`RobustStrategy` is a Flower 1.42 Message-API strategy (``flwr.serverapp.strategy``, used
by a ``ServerApp`` through ``strategy.start(grid, initial_arrays, ...)``): a subclass of Flower's
``FedAvg`` in which only the aggregation of the clients' training replies changes. Sampling,
configuration, client-side and server-side evaluation and the metric aggregation stay Flower's.
:class:`LegacyRobustStrategy` does the same for the legacy ``flwr.server.strategy.FedAvg``
(``aggregate_fit`` over ``Parameters``/``FitRes``), which Flower 1.42 still ships.

Every round, each client's arrays are flattened into one float32 vector in a fixed order (the
order of the global model's arrays), the Ballot rule named by a registry string (``"median"``,
``"trimmed_mean:f=2"``, ``"nnm:f=2 > krum:f=2"``, ...; see docs/robust.md) aggregates the vectors,
and the result is cut back into the model's arrays with their shapes and dtypes.

- **Updates, not weights** (``delta=True``, the default): the rule aggregates each client's model
  delta ``w_client - w_global`` and the new model is ``w_global + aggregate``; robust rules are
  designed for updates (gradients), and the clipping-based ones (centered clipping, ``clipping``)
  are not translation-invariant. ``delta=False`` aggregates the raw weights, as Flower's own
  FedMedian and Krum do.
- **Example counts are ignored**: robust rules weight every accepted client equally; a Byzantine
  client could otherwise claim a huge ``num-examples``. The count still weights the aggregated
  *metrics* (Flower's ``train_metrics_aggr_fn``), which are informational.
- **Malformed replies never crash a round**, training or evaluation: a reply whose arrays have other names, shapes or a
  dtype than the global model's (or no, or several ArrayRecords) is treated as Byzantine: left
  out of the rule and named in the report as *rejected*. Non-finite updates (NaN, ±Inf) are
  handled by the rule (never used, named in ``non_finite``). If too few usable replies are left
  for the rule's precondition (e.g. trimmed_mean:f=2 needs 5), the round keeps the global model
  and logs why.
- **Report**: the train MetricRecord of each round gains ``ballot-accepted``, ``ballot-rejected``,
  ``ballot-non-finite``, ``ballot-excluded`` and ``ballot-selected`` (counts) and, with a
  ``-nodes`` suffix, the node IDs in each group (Flower node IDs; for the legacy strategy, the
  client IDs, comma-separated). The full :class:`RoundReport` of every round is kept in
  :attr:`RobustStrategy.reports`.

>>> from ballot.flower import RobustStrategy
>>> strategy = RobustStrategy("trimmed_mean:f=1", fraction_evaluate=0.0)   # FedAvg's options
>>> # in a ServerApp's main(grid, context):
>>> # result = strategy.start(grid=grid, initial_arrays=ArrayRecord(model), num_rounds=10)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from logging import INFO, WARNING
from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

try:
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
    from flwr.common import (
        FitIns,
        FitRes,
        Parameters,
        Scalar,
        ndarrays_to_parameters,
        parameters_to_ndarrays,
    )
    from flwr.common.logger import log
    from flwr.server.client_manager import ClientManager
    from flwr.server.client_proxy import ClientProxy
    from flwr.server.strategy import FedAvg as _LegacyFedAvg
    from flwr.serverapp import Grid
    from flwr.serverapp.strategy import FedAvg as _FedAvg
except ImportError as error:  # pragma: no cover - exercised only without flwr
    raise ImportError(
        "ballot.flower needs the Flower package (pip install 'flwr[simulation]==1.42.0'; "
        "scripts/python_flower_env.sh makes a virtual environment with it)"
    ) from error

from ballot.robust import AggregationReport, Aggregator

__all__ = ["RobustStrategy", "LegacyRobustStrategy", "RoundReport", "Layout"]

#: The structure of a model: (name, shape, dtype) of each array, in the model's order.
Layout = Tuple[Tuple[str, Tuple[int, ...], str], ...]


@dataclass(frozen=True)
class RoundReport:
    """What the robust aggregation did in one round. Clients are named by their Flower node ID
    (legacy strategy: client ID); ``accepted`` is in the order the rule saw its inputs."""

    server_round: int
    accepted: List[Hashable]
    """Clients whose update had the model's structure and went into the rule."""
    rejected: Dict[Hashable, str]
    """Clients left out before the rule, with the reason (wrong names, shapes, dtype, ...)."""
    non_finite: List[Hashable] = field(default_factory=list)
    """Accepted clients whose update had a NaN or infinite value (never used by the rule)."""
    excluded: List[Hashable] = field(default_factory=list)
    """Accepted clients that did not contribute to the aggregate."""
    selected: List[Hashable] = field(default_factory=list)
    """Selection rules (Krum, Bulyan, ...): the clients the aggregate is built from."""
    rule_report: Optional[AggregationReport] = None
    """The rule's own report (indices into ``accepted``); None if the rule did not run."""
    error: Optional[str] = None
    """Why no aggregate was produced (too few usable clients), or None."""


def _layout(named: Sequence[Tuple[str, np.ndarray]]) -> Layout:
    return tuple((name, tuple(int(s) for s in a.shape), np.dtype(a.dtype).str) for name, a in named)


def _describe_mismatch(layout: Layout, reference: Layout) -> str:
    names, wanted = [n for n, _, _ in layout], [n for n, _, _ in reference]
    if sorted(names) != sorted(wanted):
        return f"array names {names} differ from the model's {wanted}"
    ref = {n: (s, d) for n, s, d in reference}
    for name, shape, dtype in layout:
        if (shape, dtype) != ref[name]:
            return (f"array '{name}' has shape {shape} and dtype {np.dtype(dtype).name}, the model "
                    f"has {ref[name][0]} and {np.dtype(ref[name][1]).name}")
    return "arrays in a different order"  # not reached: arrays are matched by name


def _flatten(named: Mapping[str, np.ndarray], reference: Layout, dtype: Any = np.float32) -> np.ndarray:
    """One vector of the arrays in the reference's order (float32 for the rule: values outside its
    range become infinite and so non-finite; float64 for the global model a delta is added to)."""
    if not reference:
        return np.zeros(0, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.concatenate([np.asarray(named[name], dtype=dtype).ravel()
                               for name, _, _ in reference])


def _unflatten(vector: np.ndarray, reference: Layout) -> List[Tuple[str, np.ndarray]]:
    """The arrays of the reference layout cut out of ``vector``, cast back to their dtypes
    (integer arrays rounded, booleans thresholded at 0.5)."""
    out, offset = [], 0
    for name, shape, dtype_str in reference:
        size = int(np.prod(shape, dtype=np.int64))
        part = vector[offset:offset + size].reshape(shape)
        offset += size
        dtype = np.dtype(dtype_str)
        if dtype.kind == "b":
            part = part >= 0.5
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            part = np.clip(np.rint(part), info.min, info.max)
        # np.array, not np.ascontiguousarray: that makes a 0-d array (a BatchNorm's
        # num_batches_tracked) 1-d, and every client's next reply would then be refused.
        out.append((name, np.array(part, dtype=dtype, order="C")))
    return out


class _RobustCore:
    """The aggregation shared by both strategies: checks structures, flattens, runs the rule."""

    def __init__(self, spec: str, delta: bool, threads: Optional[int]) -> None:
        self.aggregator = Aggregator(spec, threads=threads)
        self.delta = bool(delta)

    def aggregate(
        self,
        server_round: int,
        clients: Sequence[Tuple[Hashable, Any]],
        global_model: Optional[Sequence[Tuple[str, np.ndarray]]],
    ) -> Tuple[Optional[List[Tuple[str, np.ndarray]]], RoundReport]:
        """``clients``: (client id, list of (name, array)) or (client id, reason string) for a
        reply that could not even be read. Returns the new model's named arrays (None when the
        rule could not run) and the round's report."""
        rejected: Dict[Hashable, str] = {}
        readable: List[Tuple[Hashable, List[Tuple[str, np.ndarray]], Layout]] = []
        for client, named in clients:
            if isinstance(named, str):
                rejected[client] = named
                continue
            readable.append((client, list(named), _layout(named)))

        if global_model is not None:
            reference = _layout(global_model)
        elif self.delta:
            raise ValueError("delta=True needs the global model of this round: call "
                             "configure_train (configure_fit) first, as Strategy.start does")
        elif readable:  # no global model known: the most common structure (ties: the first)
            counts = Counter(layout for _, _, layout in readable)
            reference = max(counts, key=lambda layout: counts[layout])
        else:
            reference = ()

        accepted: List[Hashable] = []
        vectors: List[np.ndarray] = []
        # The global model in float64: the deltas go to the rule as float32, and what the rule gives
        # is added back to the model as it was (a parameter no client moved comes back unchanged).
        base = (_flatten(dict(global_model), reference, np.float64)
                if self.delta and global_model is not None else None)
        for client, named, layout in readable:
            if sorted(layout) != sorted(reference):
                rejected[client] = _describe_mismatch(layout, reference)
                continue
            if base is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    vector = (_flatten(dict(named), reference, np.float64) - base).astype(np.float32)
            else:
                vector = _flatten(dict(named), reference)
            accepted.append(client)
            vectors.append(vector)

        for client, reason in rejected.items():
            log(WARNING, "ballot: round %s: rejected the update of client %s: %s",
                server_round, client, reason)
        if not vectors:
            return None, RoundReport(server_round, accepted, rejected, error="no usable update")
        try:
            value, report = self.aggregator.aggregate(vectors)
        except ValueError as error:  # precondition (too few usable inputs for the rule)
            log(WARNING, "ballot: round %s: %s kept the global model: %s",
                server_round, self.aggregator.spec, error)
            non_finite = [accepted[i] for i, v in enumerate(vectors) if not np.isfinite(v).all()]
            return None, RoundReport(server_round, accepted, rejected, non_finite, error=str(error))
        if base is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                value = np.asarray(value, dtype=np.float64) + base
        names = lambda indices: [accepted[i] for i in indices]  # noqa: E731
        round_report = RoundReport(server_round, accepted, rejected, names(report.non_finite),
                                   names(report.excluded), names(report.selected), report)
        log(INFO, "ballot: round %s: %s over %d updates (%d rejected, %d non-finite, %d excluded)",
            server_round, self.aggregator.spec, len(accepted), len(rejected),
            len(report.non_finite), len(report.excluded))
        return _unflatten(np.asarray(value), reference), round_report


def _counts(report: RoundReport) -> Dict[str, int]:
    return {"ballot-accepted": len(report.accepted), "ballot-rejected": len(report.rejected),
            "ballot-non-finite": len(report.non_finite), "ballot-excluded": len(report.excluded),
            "ballot-selected": len(report.selected)}


def _groups(report: RoundReport) -> Dict[str, List[Hashable]]:
    return {"ballot-accepted-nodes": list(report.accepted),
            "ballot-rejected-nodes": list(report.rejected),
            "ballot-non-finite-nodes": list(report.non_finite),
            "ballot-excluded-nodes": list(report.excluded),
            "ballot-selected-nodes": list(report.selected)}


class RobustStrategy(_FedAvg):
    """Flower's message-based FedAvg with a Ballot robust rule as the aggregation of updates.

    Parameters
    ----------
    spec : str
        A Ballot rule or pipeline registry string: ``"median"``, ``"trimmed_mean:f=2"``,
        ``"nnm:f=2 > krum:f=2"``, ... (docs/robust.md). Unknown names raise ValueError here.
    delta : bool (default: True)
        Aggregate each client's model delta relative to the current global model (what robust
        rules assume) and add the aggregate to the global model; False aggregates the raw
        weights.
    threads : int, optional
        Threads for the rule (results are bit-identical for any value).
    **fedavg_options
        Flower FedAvg's options (``fraction_train``, ``min_available_nodes``, ``arrayrecord_key``,
        ``train_metrics_aggr_fn``, ...), used as FedAvg uses them. ``weighted_by_key`` only
        weights the aggregated metrics: robust rules ignore clients' example counts.

    Attributes
    ----------
    reports : dict[int, RoundReport]
        The report of every aggregated round, by server round.
    """

    def __init__(self, spec: str, *, delta: bool = True, threads: Optional[int] = None,
                 **fedavg_options: Any) -> None:
        super().__init__(**fedavg_options)
        self._core = _RobustCore(spec, delta, threads)
        self._global: Dict[int, List[Tuple[str, np.ndarray]]] = {}
        self.reports: Dict[int, RoundReport] = {}

    @property
    def spec(self) -> str:
        """The canonical registry string of the rule."""
        return self._core.aggregator.spec

    @property
    def delta(self) -> bool:
        """Whether the rule aggregates model deltas (True) or raw weights (False)."""
        return self._core.delta

    def __repr__(self) -> str:
        return f"RobustStrategy({self.spec!r}, delta={self.delta})"

    def summary(self) -> None:
        """Log the configuration (Flower's FedAvg summary plus the rule)."""
        log(INFO, "\t├──> Ballot robust aggregation: %s (%s)", self.spec,
            "model deltas" if self.delta else "raw weights")
        super().summary()

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """FedAvg's configure_train; also remembers the global model the round starts from."""
        self._global = {server_round: [(k, a.numpy()) for k, a in arrays.items()]}
        return super().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> Tuple[Optional[ArrayRecord], Optional[MetricRecord]]:
        """Aggregate the replies' ArrayRecords with the robust rule (see the module docstring);
        the MetricRecords of the accepted replies with ``train_metrics_aggr_fn``."""
        valid, _ = self._check_and_log_replies(replies, is_train=True, validate=False)
        if not valid:
            return None, None
        clients: List[Tuple[Hashable, Any]] = []
        for message in valid:
            clients.append((message.metadata.src_node_id, _message_arrays(message)))
        arrays, report = self._core.aggregate(server_round, clients,
                                              self._global.get(server_round))
        self.reports[server_round] = report

        accepted = set(report.accepted)
        contents = [m.content for m in valid if m.metadata.src_node_id in accepted]
        metrics = MetricRecord()
        try:
            if contents:
                metrics = self.train_metrics_aggr_fn(contents, self.weighted_by_key)
        except Exception as error:  # a client's malformed metrics must not stop the round
            log(WARNING, "ballot: round %s: train metrics not aggregated: %s", server_round, error)
        for key, value in {**_counts(report), **_groups(report)}.items():
            metrics[key] = value
        if arrays is None:
            return None, metrics
        return ArrayRecord({name: Array(a) for name, a in arrays}), metrics

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> Optional[MetricRecord]:
        """FedAvg's aggregation of the evaluation MetricRecords (weighted by each reply's claimed
        example count, as Flower does: informational, and a Byzantine client can skew it), except
        that a malformed reply cannot stop the run: the replies are not checked as a whole (FedAvg
        raises when one reply's metrics have other keys), and an aggregation that fails (a count of
        0 or below) is logged and gives no metrics for the round."""
        return _aggregate_evaluate_safely(self, server_round, replies)


def _aggregate_evaluate_safely(strategy: Any, server_round: int, replies: Iterable[Message]
                               ) -> Optional[MetricRecord]:
    valid, _ = strategy._check_and_log_replies(replies, is_train=False, validate=False)
    if not valid:
        return None
    try:
        return strategy.evaluate_metrics_aggr_fn([m.content for m in valid], strategy.weighted_by_key)
    except Exception as error:  # a client's malformed metrics must not stop the run
        log(WARNING, "ballot: round %s: evaluate metrics not aggregated: %s", server_round, error)
        return None


def _message_arrays(message: Message) -> Any:
    """The (name, array) pairs of a reply's only ArrayRecord, or why they cannot be read."""
    try:
        records = message.content.array_records
        if len(records) != 1:
            return f"expected exactly one ArrayRecord, got {len(records)}"
        record = next(iter(records.values()))
        return [(name, array.numpy()) for name, array in record.items()]
    except Exception as error:  # undecodable arrays
        return f"unreadable arrays: {error}"


class LegacyRobustStrategy(_LegacyFedAvg):
    """Flower's legacy FedAvg (``flwr.server.strategy``, ``aggregate_fit`` over
    ``Parameters``/``FitRes``) with a Ballot robust rule as the aggregation.

    Same rule, options and behaviour as :class:`RobustStrategy`; the arrays are named by their
    position ("0", "1", ...); ``FitRes.num_examples`` is ignored by the rule. The round's report
    goes into the returned metrics: counts, and client IDs comma-separated (legacy metrics are
    scalars). ``**fedavg_options`` are the legacy FedAvg's (``min_fit_clients``,
    ``initial_parameters``, ``fit_metrics_aggregation_fn``, ...).
    """

    def __init__(self, spec: str, *, delta: bool = True, threads: Optional[int] = None,
                 **fedavg_options: Any) -> None:
        super().__init__(**fedavg_options)
        self._core = _RobustCore(spec, delta, threads)
        self._global: Dict[int, List[Tuple[str, np.ndarray]]] = {}
        self.reports: Dict[int, RoundReport] = {}

    @property
    def spec(self) -> str:
        return self._core.aggregator.spec

    def __repr__(self) -> str:
        return f"LegacyRobustStrategy({self.spec!r}, delta={self._core.delta})"

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: ClientManager) -> List[Tuple[ClientProxy, FitIns]]:
        """FedAvg's configure_fit; also remembers the global model the round starts from."""
        self._global = {server_round: _named(parameters_to_ndarrays(parameters))}
        return super().configure_fit(server_round, parameters, client_manager)

    def aggregate_fit(self, server_round: int, results: List[Tuple[ClientProxy, FitRes]],
                      failures: List[Any]) -> Tuple[Optional[Parameters], Dict[str, Scalar]]:
        """Aggregate the clients' parameters with the robust rule."""
        if not results or (failures and not self.accept_failures):
            return None, {}
        clients: List[Tuple[Hashable, Any]] = []
        for proxy, fit_res in results:
            try:
                named: Any = _named(parameters_to_ndarrays(fit_res.parameters))
            except Exception as error:
                named = f"unreadable parameters: {error}"
            clients.append((proxy.cid, named))
        arrays, report = self._core.aggregate(server_round, clients, self._global.get(server_round))
        self.reports[server_round] = report

        metrics: Dict[str, Scalar] = {}
        accepted = set(report.accepted)
        if self.fit_metrics_aggregation_fn is not None:
            try:
                metrics = dict(self.fit_metrics_aggregation_fn(
                    [(r.num_examples, r.metrics) for p, r in results if p.cid in accepted]))
            except Exception as error:
                log(WARNING, "ballot: round %s: fit metrics not aggregated: %s", server_round, error)
        metrics.update(_counts(report))
        for key, ids in _groups(report).items():
            metrics[key] = ",".join(str(i) for i in ids)
        if arrays is None:
            return None, metrics
        return ndarrays_to_parameters([a for _, a in arrays]), metrics

    def aggregate_evaluate(self, server_round: int, results: List[Tuple[ClientProxy, Any]],
                           failures: List[Any]) -> Tuple[Optional[float], Dict[str, Scalar]]:
        """FedAvg's weighted loss and metrics (by the claimed example counts: informational), except
        that a malformed reply (a count of 0 or below, metrics the aggregation function cannot
        take) is logged and gives no evaluation for the round instead of stopping the run."""
        try:
            return super().aggregate_evaluate(server_round, results, failures)
        except Exception as error:
            log(WARNING, "ballot: round %s: evaluation not aggregated: %s", server_round, error)
            return None, {}


def _named(ndarrays: Sequence[np.ndarray]) -> List[Tuple[str, np.ndarray]]:
    return [(str(i), np.asarray(a)) for i, a in enumerate(ndarrays)]
