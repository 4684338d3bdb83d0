"""What a :class:`ballot.torch.Node` computes and submits each round.

The trusted server defines the run (the cluster file's ``training`` section: rule, codec, update,
learning rate); an algorithm is the node's side of it and is checked against that definition when
the node opens, so a node never computes something the server does not expect.

* :class:`SignVote` -- Signum / signSGD with majority vote through the cluster's election code
  (rule ``"vote"``): the node computes the partitions of its row of G (replicated placement) or
  its own partition (exchange placement), folds each gradient into that partition's worker
  momentum (the cluster's ``worker_momentum``) and submits the signs. 1 bit per coordinate.
  ``pieces=k`` sends the vote in k signed pieces while the last partition's backward still runs
  (BAGUA's overlap of communication with backward), each as soon as its parameters' gradients are
  in; the vote and the model are the same bits as without. ``work_on`` says where the momentum,
  the packing and the update run: on the model's device (a CUDA model's default: only the packed
  signs and votes, d/8 bytes each, cross between host and device) or in the session on the host.
* :class:`RobustGradient` -- the gradient path: the gradient of the node's own partition through
  the cluster's codec; the server aggregates with its robust rule. A CUDA model's gradient is
  encoded on its GPU where the codec has a device encoder (``work_on``): only the encoded bytes
  cross to the host.
* :class:`RobustLocalSGD` -- the federated setting: ``sync_every`` local SGD steps on the node's
  own partition stream, then the model delta goes through the codec and the robust rule; the
  server's update applies the aggregated delta (``sgd`` with ``lr`` 1 is FedAvg's averaging step,
  another rate a server learning rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

__all__ = ["SignVote", "RobustGradient", "RobustLocalSGD", "Algorithm"]


def _same_spec(a: str, b: str) -> bool:
    return "".join(a.split()) == "".join(b.split())


@dataclass(frozen=True)
class SignVote:
    """Majority vote of signs through the election code (the cluster's ``rule`` must be ``vote``).

    ``pieces``: 0 (the default) packs and sends the vote after backward; k > 0 sends it in k pieces
    (at most one per 64 coordinates) during the last partition's backward, which pays when the
    network is the bottleneck. It applies to an honest node in the replicated placement without a
    group, of a CPU model or of a CUDA model whose work is on the model (each piece is folded and
    packed on the GPU as soon as its gradients are complete, and its d/8 bytes cross); elsewhere the
    vote goes whole.

    ``work_on``: where the node's work beside forward and backward runs.

    - ``"model"``: on the model's device. Each partition's worker momentum and sign packing run
      there in one pass (:func:`ballot.signs.momentum_pack`), and only the packed signs go to the
      host. The momentum is copied to the host only when the node saves its state file, and back
      after the node restores it; it takes 4 bytes per parameter and partition of the device's
      memory. With the ``sign``, ``heavyball``, ``sgd`` or ``signum`` update rule, each
      decision's vote is applied to the model's copy of the parameters there too
      (:func:`ballot.signs.apply_update`, with the rule's momentum buffer on the device), checked
      against the replica's every ``digest_every`` rounds.
    - ``"host"``: in the session, as ``ballot node`` does. The gradient is copied to the host and
      the replica's parameters back.
    - ``"auto"`` (the default): ``"model"`` for a CUDA model, ``"host"`` for a CPU one.

    Both give the same bits (the same kernels' arithmetic), whole or in ``pieces``."""

    pieces: int = 0
    work_on: str = "auto"

    def check(self, training: Dict[str, Any]) -> None:
        if training["rule"] != "vote":
            raise ValueError(f"SignVote needs a cluster whose rule is 'vote'; this cluster's rule is "
                             f"'{training['rule']}' (use RobustGradient)")
        if isinstance(self.pieces, bool) or not isinstance(self.pieces, int) or self.pieces < 0:
            raise ValueError(f"SignVote: pieces must be an integer >= 0, got {self.pieces!r}")
        if self.work_on not in ("auto", "model", "host"):
            raise ValueError(f"SignVote: work_on must be 'auto', 'model' or 'host', got {self.work_on!r}")


@dataclass(frozen=True)
class RobustGradient:
    """The gradient of the node's partition through ``codec``, aggregated by the server with
    ``rule``. ``None`` takes the cluster's; a value must equal the cluster's spec.

    ``work_on``: where a CUDA model's gradient is encoded.

    - ``"model"``: on its GPU, on torch's current stream
      (:attr:`ballot.session.NodeSession.encodes_on_device`), into the bytes the host would
      write; only they are copied to the host.
      The codec's state (error feedback's memory, Signum's momentum, DGC's accumulation, global
      top-k's residual) stays on the GPU and goes to the host when the node saves its state file.
      Every codec has a device encoder in a Ballot built with CUDA.
    - ``"host"``: the gradient is copied to the host (4 bytes a parameter) and the session encodes it.
    - ``"auto"`` (the default): ``"model"`` where the codec has a device encoder, else ``"host"``.

    A CPU model's gradient is always encoded in the session, where it lies; so is a Byzantine
    node's (its attack acts on the gradient). The update is the replica's: the decision is the fp32
    aggregate, and its parameters are copied to the GPU after each decision (the same 4 bytes a
    parameter the decision itself carries)."""

    rule: Optional[str] = None
    codec: Optional[str] = None
    work_on: str = "auto"

    def check(self, training: Dict[str, Any]) -> None:
        if self.work_on not in ("auto", "model", "host"):
            raise ValueError(f"{type(self).__name__}: work_on must be 'auto', 'model' or 'host', "
                             f"got {self.work_on!r}")
        if training["rule"] == "vote":
            raise ValueError("RobustGradient needs a cluster with a robust rule; this cluster votes signs "
                             "(rule 'vote': use SignVote)")
        if self.rule is not None and not _same_spec(self.rule, training["rule"]):
            raise ValueError(f"RobustGradient(rule='{self.rule}') but the cluster's server aggregates with "
                             f"'{training['rule']}'")
        if self.codec is not None and not _same_spec(self.codec, training["codec"]):
            raise ValueError(f"RobustGradient(codec='{self.codec}') but the cluster's codec is "
                             f"'{training['codec']}'")


@dataclass(frozen=True)
class RobustLocalSGD(RobustGradient):
    """``sync_every`` local SGD steps (rate ``local_lr``) per round, then the model delta through
    the codec and the server's robust rule."""

    sync_every: int = 1
    local_lr: float = 0.05

    def check(self, training: Dict[str, Any]) -> None:
        RobustGradient.check(self, training)
        if int(self.sync_every) < 1:
            raise ValueError(f"RobustLocalSGD: sync_every must be at least 1, got {self.sync_every}")
        if not float(self.local_lr) > 0.0:
            raise ValueError(f"RobustLocalSGD: local_lr must be positive, got {self.local_lr}")


Algorithm = Any  # SignVote | RobustGradient | RobustLocalSGD
