"""Driving a node of a real Ballot cluster from Python (C++ ``ballot::runtime::NodeSession``).

The server and the other nodes are ``ballot server`` / ``ballot node`` processes over mutual TLS;
this process is node ``index`` of the same cluster file. It speaks the protocol with the very code
the C++ worker loop (``ballot node``) runs -- Join and rejoin, round starts, the signed record,
decisions, state transfers -- while the caller decides what is computed and submitted::

    from ballot.session import NodeSession

    with NodeSession.from_cluster_file("cluster.json", index=3) as node:
        node.start()
        while True:
            event = node.next_round()
            if event.kind != "compute":          # "finished" or "crashed"
                break
            out = node.compute()                   # the built-in C++ NodeWorker
            node.submit(out)                       # or submit_vote(loss, signs, d) with your own signs
            node.await_decision()
        print(node.model_digest())

Waits on the network (start, poll, next_round, await_decision) and compute() release the GIL.
Errors of the protocol or the network raise with Ballot's error text (ValueError for bad
arguments, FileNotFoundError for missing files, OSError when the system or the network fails,
RuntimeError otherwise). Input from Python is
checked before it reaches the protocol: a wrong dtype is a TypeError; a wrong length or a
submission of another kind than the round's is a ValueError and leaves the round open; a
submission with no round open, or a second compute() of one round, is a RuntimeError.

If the cluster file's attack spec makes node ``index`` Byzantine, its session carries that
adversary, as ``ballot node`` would (:attr:`NodeSession.byzantine`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

import numpy as np

from ballot import _native
from ballot._arrays import cuda_stream

__all__ = ["NodeSession", "RoundWork", "NodeEvent", "Computed"]


@dataclass(frozen=True)
class RoundWork:
    """What to compute for a round: ``kind`` is ``"vote"`` (submit_vote), ``"gradient"``
    (submit_gradient) or ``"partition_signs"`` (submit_partition_signs); ``partitions`` are the
    data partitions (batches) to compute it on; ``state_digest`` (hex) the state digest of the model
    it is computed on (the server's; see :meth:`NodeSession.state_digest`)."""

    round: int
    kind: str
    partitions: List[int]
    deadline_ms: int
    state_digest: str

    @staticmethod
    def _of(raw: Dict[str, Any]) -> "RoundWork":
        return RoundWork(int(raw["round"]), str(raw["kind"]), list(raw["partitions"]), int(raw["deadline_ms"]),
                         str(raw["state_digest"]))


@dataclass(frozen=True)
class NodeEvent:
    """An event of the session: ``kind`` is ``"compute"`` (``work`` is set), ``"decided"`` (the
    decision of round ``round - 1`` was applied), ``"state_installed"`` (a state transfer
    replaced the model; ``moved``: the node was in another round), ``"finished"`` or ``"crashed"``.
    ``round`` is the round the replica is in after the event."""

    kind: str
    round: int
    moved: bool = False
    work: Optional[RoundWork] = None

    @property
    def over(self) -> bool:
        """Whether the run is over for this node."""
        return self.kind in ("finished", "crashed")

    @staticmethod
    def _of(raw: Dict[str, Any]) -> "NodeEvent":
        work = raw.get("work")
        return NodeEvent(str(raw["kind"]), int(raw["round"]), bool(raw["moved"]),
                         RoundWork._of(work) if work is not None else None)


@dataclass(frozen=True)
class Computed:
    """What :meth:`NodeSession.compute` computed for a round: the packed signs (``uint64`` words,
    ``d`` coordinates) of a vote or partition signs, or the ``float32`` gradient; and the loss."""

    kind: str
    round: int
    loss: float
    signs: Optional[np.ndarray] = None
    d: Optional[int] = None
    gradient: Optional[np.ndarray] = None


class NodeSession:
    """Node ``index`` of a Ballot cluster, driven by the caller (see the module docstring)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def from_cluster_file(cls, path: Union[str, os.PathLike], index: int) -> "NodeSession":
        """Opens node ``index`` of the cluster file ``path`` as ``ballot node --cluster PATH
        --index INDEX`` does: its data, keys (mutual TLS to the server, Ed25519-signed messages),
        node state directory and signed record. Nothing is sent before :meth:`start`."""
        if int(index) < 0:
            raise ValueError(f"node index {index}: a node index is 0 .. nodes - 1")
        return cls(_native.NodeSession.from_cluster_file(os.fspath(path), int(index)))

    # ---- the protocol
    def start(self) -> None:
        """Opens the signed record and sends the first Join."""
        self._native.start()

    def poll(self) -> NodeEvent:
        """Handles messages until the next event. Once the run is over every call returns its end
        again (``finished`` or ``crashed``): stop on ``event.over``."""
        return NodeEvent._of(self._native.poll())

    def poll_for(self, timeout: float) -> Optional[NodeEvent]:
        """Handles messages until the next event, or returns None when none came within
        ``timeout`` seconds (``0``: only what has already arrived) — for a caller with its own loop
        (asyncio, a GUI, other sockets) that must not block. After the run's end it returns that end
        again, as :meth:`poll` does. ValueError outside [0, 86400]."""
        raw = self._native.poll_for(float(timeout))
        return NodeEvent._of(raw) if raw is not None else None

    def next_round(self) -> NodeEvent:
        """Waits for work to compute (``"compute"``) or the end (``"finished"``, ``"crashed"``)."""
        return NodeEvent._of(self._native.next_round())

    def await_decision(self) -> NodeEvent:
        """Waits until the decision of the submitted round is applied (``"decided"``) or the round
        was overtaken (a state transfer, another round's work, the end)."""
        return NodeEvent._of(self._native.await_decision())

    @property
    def work(self) -> Optional[RoundWork]:
        """The open round's work (None when no round is open)."""
        raw = self._native.work()
        return RoundWork._of(raw) if raw is not None else None

    def compute(self) -> Computed:
        """Computes the open round's work with the built-in C++ NodeWorker (its partitions, its
        worker momentum). Once per round."""
        raw = self._native.compute()
        return Computed(kind=raw["kind"], round=int(raw["round"]), loss=float(raw["loss"]), signs=raw.get("signs"),
                        d=int(raw["d"]) if "d" in raw else None, gradient=raw.get("gradient"))

    def submit(self, computed: Computed) -> None:
        """Submits what :meth:`compute` returned, by its kind. ValueError when it was computed for
        another round than the open one (a stale vote would be signed with this round's state)."""
        work = self.work  # None: no round is open, which the submit below reports
        if work is not None and work.round != computed.round:
            raise ValueError(f"submit: this Computed is of round {computed.round} and the open round is "
                             f"{work.round}; compute the open round's work again")
        if computed.kind == "vote":
            self.submit_vote(computed.loss, computed.signs, computed.d)
        elif computed.kind == "partition_signs":
            self.submit_partition_signs(computed.loss, computed.signs, computed.d)
        else:
            self.submit_gradient(computed.loss, computed.gradient)

    def submit_vote(self, loss: float, signs: Any, d: int) -> None:
        """The round's vote: ``d`` packed signs (uint64 or int64 words, bit set = +1)."""
        self._native.submit_vote(float(loss), signs, int(d))

    def submit_partition_signs(self, loss: float, signs: Any, d: int) -> None:
        """Exchange placement: the signs of the node's own partition (packed like submit_vote)."""
        self._native.submit_partition_signs(float(loss), signs, int(d))

    def submit_gradient(self, loss: float, gradient: Any) -> None:
        """The gradient path: the float32 gradient, encoded with the run's codec. A CUDA tensor is
        encoded on its GPU, on torch's current stream, into the bytes the host would write (only
        they are copied to the host): an honest node's, with a codec that has a device encoder
        (:attr:`encodes_on_device`); a CPU array otherwise, read in place during the call (do not
        write it from another thread meanwhile)."""
        self._native.submit_gradient(float(loss), gradient, cuda_stream(gradient))

    @property
    def encodes_on_device(self) -> bool:
        """Whether :meth:`submit_gradient` takes a CUDA tensor: the run's codec has a device encoder
        in this build (every codec has one in a build with CUDA), and this node is
        honest (an attack acts on the gradient on the host)."""
        return bool(self._native.encodes_on_device)

    @property
    def global_set(self) -> bytes:
        """Global top-k (codec ``gtopk``): the last decision's global set, the coordinates it
        changed, as the aggregator's global message (:meth:`ballot.codecs.Codec.accept_global`
        takes it); empty before the first decision and for other codecs. The run's codec took it
        when the decision was applied, on the GPU too after a CUDA :meth:`submit_gradient`."""
        return bytes(self._native.global_set)

    # ---- state
    @property
    def round(self) -> int:
        """The next round the replica will apply."""
        return int(self._native.round)

    @property
    def dimension(self) -> int:
        """The model's dimension d (the length of the signs and gradients)."""
        return int(self._native.dimension)

    @property
    def index(self) -> int:
        return int(self._native.index)

    @property
    def nodes(self) -> int:
        return int(self._native.nodes)

    @property
    def rounds(self) -> int:
        """The rounds of the run."""
        return int(self._native.rounds)

    @property
    def byzantine(self) -> bool:
        """Whether the cluster file's attack spec makes this node an attacker."""
        return bool(self._native.byzantine)

    @property
    def stats(self) -> Dict[str, int]:
        """Decisions applied (``rounds``), votes sent, rejoins (of which ``resynchronised``: states of
        the node's own round that replaced other parameters), states restored, and with relayed
        decisions the pieces handed on, rejected and the decisions asked for whole, ..."""
        return dict(self._native.stats())

    def model_digest(self) -> str:
        """SHA-256 of the replica's parameters (hex): equal to the server's when in sync."""
        return str(self._native.model_digest())

    def state_digest(self) -> str:
        """The digest the protocol compares (hex): the SHA-256 tree of the parameters every
        ``digest_every`` rounds of the cluster (so not :meth:`model_digest`'s plain SHA-256 even
        then), a chain over the decisions in between."""
        return str(self._native.state_digest())

    # ---- lifetime
    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def close(self) -> None:
        """Closes the transport (idempotent)."""
        self._native.close()

    def __enter__(self) -> "NodeSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
