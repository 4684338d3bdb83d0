"""A PyTorch model as node ``index`` of a Ballot cluster.

The server is ``ballot server --init FILE`` (no torch, no model code: it holds the flat parameter
vector of the init file that :func:`ballot.torch.export_init` wrote). Each node runs the user's
script, which builds its model and hands it to :class:`Node`::

    model = Net()
    node = ballot.torch.Node(model, examples=len(train_x))      # cluster and index from the launcher
    node.run(lambda idx: F.cross_entropy(model(train_x[idx]), train_y[idx]))
    print(accuracy(model, test_x, test_y))                     # the final, agreed parameters

What :class:`Node` does:

* The parameters become views into the replica's flat buffer (the C++ session's, zero copy) and
  their gradients views into one flat gradient buffer. Decisions and state transfers write the
  parameters in place; the model sees them at once.
* The layout is checked first: the model's ``named_parameters()`` must have the names, shapes and
  order of the cluster's init file (the first difference is named) and be ``float32``.
* Each round the session (the same C++ protocol code as ``ballot node``: Join, signed votes over
  mutual TLS, decisions, state transfers, the signed record) says which data partitions to compute;
  ``step(indices)`` computes the loss of the examples ``indices`` of the training set (a
  ``torch.long`` tensor) and the node runs backward, then submits what the algorithm sends.
* A non-finite loss or gradient is never sent: the node abstains for that round.
* If the cluster's attack spec makes this node Byzantine, the session carries the adversary, as
  ``ballot node`` would.

Under ``python -m ballot.torch.run`` the environment names the cluster (``BALLOT_CLUSTER``,
``BALLOT_NODE_INDEX``); with ``BALLOT_EXPORT_INIT=PATH`` set (the launcher's first pass), the
constructor writes the init file and the example count to ``PATH`` and ``PATH.json`` and exits.

CPU tensors only in this version; a CUDA model is refused with a clear error.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ballot.session import NodeSession
from ballot.torch._params_file import export_init
from ballot.torch.algorithms import RobustGradient, RobustLocalSGD, SignVote

__all__ = ["Node", "CLUSTER_VARIABLE", "INDEX_VARIABLE", "EXPORT_VARIABLE"]

CLUSTER_VARIABLE = "BALLOT_CLUSTER"
INDEX_VARIABLE = "BALLOT_NODE_INDEX"
EXPORT_VARIABLE = "BALLOT_EXPORT_INIT"

Step = Callable[[torch.Tensor], torch.Tensor]


def _shape(shape: Any) -> Tuple[int, ...]:
    return tuple(int(x) for x in shape)


class Node:
    """Node ``index`` of the cluster file ``cluster`` with ``model``'s parameters (see the module
    docstring). ``algorithm`` defaults to the cluster's (SignVote for rule ``vote``, else
    RobustGradient); ``examples``, when given, must equal the cluster's training-set size."""

    def __init__(self, model: torch.nn.Module, cluster: Optional[Union[str, os.PathLike]] = None,
                 index: Optional[int] = None, *, algorithm: Any = None, examples: Optional[int] = None) -> None:
        named = list(model.named_parameters())
        if not named:
            raise ValueError("the model has no parameters")
        for name, p in named:
            if p.dtype != torch.float32:
                raise TypeError(f"parameter '{name}' is {p.dtype}: Ballot trains float32 parameters "
                                "(autocast inside step() is fine)")
            if p.device.type != "cpu":
                raise NotImplementedError(f"parameter '{name}' is on {p.device}: this version of ballot.torch "
                                          "trains CPU tensors; move the model to the CPU")
        export = os.environ.get(EXPORT_VARIABLE)
        if export:
            digest = export_init(model, export)
            with open(export + ".json", "w", encoding="utf-8") as meta:
                json.dump({"examples": examples, "layout_digest": digest, "parameters": sum(p.numel() for _, p in named)},
                          meta)
            raise SystemExit(0)
        if cluster is None:
            cluster = os.environ.get(CLUSTER_VARIABLE)
        if index is None and os.environ.get(INDEX_VARIABLE) is not None:
            index = int(os.environ[INDEX_VARIABLE])
        if index is None:  # under a launcher, as `ballot launch` reads it: rank 0 is the server
            for variable in ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK"):
                if os.environ.get(variable, "").isdigit() and int(os.environ[variable]) > 0:
                    index = int(os.environ[variable]) - 1
                    break
        if cluster is None or index is None:
            raise ValueError(f"no cluster: pass cluster= and index=, or start the script with "
                             f"`python -m ballot.torch.run` ({CLUSTER_VARIABLE}, {INDEX_VARIABLE})")
        self._session = NodeSession.from_cluster_file(cluster, int(index))
        native = self._session._native
        self.training: Dict[str, Any] = dict(native.training())
        try:
            self._check_layout(named, list(native.tensors()))
            if examples is not None and int(examples) != int(self.training["training_examples"]):
                raise ValueError(f"the script's training set has {examples} examples, the cluster's data "
                                 f"('{self.training['data']}') {self.training['training_examples']}")
            if algorithm is None:
                algorithm = SignVote() if self.training["rule"] == "vote" else RobustGradient()
            algorithm.check(self.training)
        except Exception:
            self._session.close()
            raise
        self.algorithm = algorithm
        self.model = model
        self._flat = torch.from_numpy(native.parameters())  # the replica's buffer: no copy
        self._grad = torch.zeros_like(self._flat)
        self._params: List[torch.nn.Parameter] = []
        self._grad_views: List[torch.Tensor] = []
        with torch.no_grad():
            for (_, p), (_, shape, offset, size) in zip(named, native.tensors()):
                view = self._flat[int(offset):int(offset) + int(size)].view(_shape(shape))
                p.data = view
                self._params.append(p)
                self._grad_views.append(self._grad[int(offset):int(offset) + int(size)].view(_shape(shape)))
        self._attach_grads()
        self.abstained = 0
        self._started = False

    # ---- the layout
    @staticmethod
    def _check_layout(named: List[Tuple[str, torch.Tensor]], tensors: List[Tuple[str, Any, int, int]]) -> None:
        for i, ((name, p), (t_name, t_shape, _, _)) in enumerate(zip(named, tensors)):
            if name != t_name or tuple(p.shape) != _shape(t_shape):
                raise ValueError(f"parameter {i}: the cluster's init file has '{t_name}' {list(_shape(t_shape))}, "
                                 f"this model '{name}' {list(p.shape)}: a different model")
        if len(named) != len(tensors):
            first = (f"the cluster's '{tensors[len(named)][0]}'" if len(tensors) > len(named) else
                     f"this model's '{named[len(tensors)][0]}'")
            raise ValueError(f"the cluster's init file has {len(tensors)} parameters, this model {len(named)} "
                             f"(first unmatched: {first}): a different model")

    def _attach_grads(self) -> None:
        for p, g in zip(self._params, self._grad_views):
            if p.grad is None or p.grad.data_ptr() != g.data_ptr():
                p.grad = g

    # ---- rounds
    def run(self, step: Step, on_round: Optional[Callable[["Node"], None]] = None) -> Dict[str, int]:
        """Takes part in the run until it ends: each round computes ``step(indices)`` (the loss of
        the training examples ``indices``) for the partitions the round asks for, runs backward and
        submits. ``on_round(node)`` is called after each round's work. Returns the session stats."""
        native = self._session._native
        # An attacker whose attack needs every honest message recomputes them with `step`.
        native.set_gradient_source(lambda round_, partition: self._honest(step, round_, partition))
        try:
            if not self._started:
                self._session.start()
                self._started = True
            while True:
                event = self._session.next_round()
                if event.over:
                    break
                assert event.work is not None
                self._compute(event.work, step)
                if on_round is not None:
                    on_round(self)
        finally:
            native.set_gradient_source(None)  # the session must not keep this node alive
        stats = self._session.stats
        stats["abstained_non_finite"] = self.abstained
        return stats

    def _indices(self, round_: int, partition: int) -> torch.Tensor:
        return torch.from_numpy(self._session._native.partition_indices(round_, partition).astype(np.int64))

    def _backward(self, step: Step, round_: int, partition: int) -> float:
        self._grad.zero_()
        self._attach_grads()
        loss = step(self._indices(round_, partition))
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("step(indices) must return the loss as a one-element tensor")
        loss.backward()
        for p, g in zip(self._params, self._grad_views):  # a grad torch replaced instead of accumulating
            if p.grad is not None and p.grad.data_ptr() != g.data_ptr():
                g.copy_(p.grad)
                p.grad = g
        return float(loss.detach())

    def _honest(self, step: Step, round_: int, partition: int) -> Tuple[float, np.ndarray]:
        """What an honest node sends for `partition` of `round_`: its gradient, or its local delta."""
        if isinstance(self.algorithm, RobustLocalSGD):
            loss, delta = self._local_delta(round_, partition, step)
            return loss, delta.numpy()
        return self._backward(step, round_, partition), self._grad.numpy()

    def _finite(self, loss: float, gradient: torch.Tensor) -> bool:
        # One read pass: a finite sum means finite entries (a NaN or Inf makes the sum non-finite);
        # only an overflowing sum of finite values needs the exact check (torch.isfinite costs ~40x).
        if not math.isfinite(loss):
            return False
        return math.isfinite(float(gradient.sum())) or bool(torch.isfinite(gradient).all())

    def _abstain(self, round_: int) -> None:
        self.abstained += 1
        print(f"ballot.torch: node {self.index}: round {round_}: non-finite loss or gradient, abstaining "
              f"(nothing sent)", file=sys.stderr, flush=True)

    def _compute(self, work: Any, step: Step) -> None:
        native = self._session._native
        if work.kind == "gradient":
            partition = work.partitions[0]
            if isinstance(self.algorithm, RobustLocalSGD):
                loss, direction = self._local_delta(work.round, partition, step)
            else:
                loss = self._backward(step, work.round, partition)
                direction = self._grad
            if not self._finite(loss, direction):
                self._abstain(work.round)
                return
            native.submit_gradient(loss, direction.numpy())
            return
        losses = []
        for partition in work.partitions:
            loss = self._backward(step, work.round, partition)
            if not self._finite(loss, self._grad):
                self._abstain(work.round)
                return
            native.fold(partition, self._grad.numpy())
            losses.append(loss)
        native.submit_folded(sum(losses) / len(losses) if losses else 0.0)

    def _local_delta(self, round_: int, partition: int, step: Step) -> Tuple[float, torch.Tensor]:
        algorithm = self.algorithm
        start = self._flat.clone()
        losses = []
        try:
            for h in range(int(algorithm.sync_every)):
                loss = self._backward(step, round_ * int(algorithm.sync_every) + h, partition)
                losses.append(loss)
                if not self._finite(loss, self._grad):
                    return float("nan"), self._grad
                with torch.no_grad():
                    self._flat.add_(self._grad, alpha=-float(algorithm.local_lr))
            delta = start - self._flat
        finally:
            with torch.no_grad():
                self._flat.copy_(start)  # the replica moves only by the server's decision
        return sum(losses) / len(losses), delta

    # ---- state
    @property
    def index(self) -> int:
        return self._session.index

    @property
    def round(self) -> int:
        """The next round the replica will apply."""
        return self._session.round

    @property
    def byzantine(self) -> bool:
        return self._session.byzantine

    @property
    def parameters(self) -> torch.Tensor:
        """The flat parameter vector (the model's parameters are views of it)."""
        return self._flat

    @property
    def stats(self) -> Dict[str, int]:
        return self._session.stats

    def model_digest(self) -> str:
        """SHA-256 of the parameters (hex): equal on every replica in sync, the server's included."""
        return self._session.model_digest()

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
