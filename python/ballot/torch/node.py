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
* The layout is checked first: the model's trained parameters (``named_parameters()`` that
  require grad, :func:`ballot.torch.trained_parameters`) must have the names, shapes and order of
  the cluster's init file (the first difference is named) and be ``float32``. A parameter frozen
  when the Node is built (``requires_grad=False``) is left alone: the script gives it its values,
  the same on every node (Ballot does not check them), and no round changes it.
* Each round the session (the same C++ protocol code as ``ballot node``: Join, signed votes over
  mutual TLS, decisions, state transfers, the signed record) says which data partitions to compute;
  ``step(indices)`` computes the loss of the examples ``indices`` of the training set (a
  ``torch.long`` tensor) and the node runs backward, then submits what the algorithm sends.
* A non-finite loss or gradient is never sent: the node abstains for that round.
* If the cluster's attack spec makes this node Byzantine, the session carries the adversary, as
  ``ballot node`` would.

Where the cluster and the index come from: the arguments; else ``BALLOT_CLUSTER`` and
``BALLOT_NODE_INDEX`` (what ``python -m ballot.torch.run`` sets); else, for the index, the rank a
launcher gives, as ``ballot launch`` reads it, innermost launcher first (``OMPI_COMM_WORLD_RANK``,
``RANK`` of torchrun, then ``SLURM_PROCID``): rank 0 is the server, rank k is node k - 1. With
``BALLOT_EXPORT_INIT=PATH`` set (the launcher's first pass), the constructor writes the init file
and the example count to ``PATH`` and ``PATH.json`` and exits.

With ``group=`` (a ``torch.distributed`` process group of this participant's own processes) the
group is ONE node: its rank 0 holds the session and the others compute shares of each batch
(:mod:`ballot.torch.group`). ``RANK`` is then the group's own rank and never the node index.

A model on a CUDA device keeps its parameters and gradients in CUDA buffers (the parameters views
of one flat CUDA tensor, the gradients views of another): forward and backward run on the GPU.
The session's replica stays on the host, where it applies each signed decision and computes the
state digests. With :class:`SignVote` (``work_on`` "auto" or "model") the rest of the round's work
runs on the GPU too:

* each partition's worker momentum lives there; one kernel pass updates it and packs its signs,
  and only the packed signs (d/8 bytes a partition) are copied to the host, where the session
  takes the vote over the node's row of G and signs it. The momentum goes to the host only when
  the node saves its state file, and back after a state transfer restored it;
* with the ``sign`` update rule (the vote's default), ``heavyball``, ``sgd``, ``signum`` or
  ``ef_sign``, each decision's vote (d/8 bytes) is applied to the GPU's parameters by the same
  arithmetic as the replica's (``ballot.signs.apply_update``, for signum ``momentum_pack`` first,
  and for ef_sign ``ballot.signs.unpack`` and torch operations with the replica's per-layer scales,
  4 bytes a layer); the momentum buffer of heavyball, sgd and signum, and ef_sign's error memory,
  live on the GPU too.
  At each round whose state digest is the parameters' (``digest_every``) and at the end of the run
  the GPU's parameters and buffer are compared with the replica's: a difference is reported on
  stderr, counted (``update_mismatches``) and repaired by copying the replica's. After a state
  transfer the replica's state is copied to the GPU (4d bytes).

On the gradient path (:class:`RobustGradient`, ``work_on`` "auto" or "model") a CUDA gradient is
encoded on the GPU into the bytes the session's codec would write, and only they are copied to
the host, where the session signs and sends them; the codec's state (error feedback's memory,
Signum's momentum, DGC's accumulation, global top-k's residual) stays on the GPU until the node
state file is saved. A Byzantine node (its attack acts on the gradient on the host), or a Ballot
built without CUDA, has the gradient copied to the host (4d bytes) and encoded there. The decision is the fp32
aggregate: the replica applies it and its parameters are copied back (4d bytes, as the decision).
In a group of CUDA processes (``dist.init_process_group("nccl")``, one GPU each) the ranks
all-reduce their gradients on their GPUs and rank 0 folds or copies the sum.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ballot import signs
from ballot._arrays import cuda_stream
from ballot.session import NodeSession
from ballot.torch._params_file import export_init, layout_digest, trained_parameters
from ballot.torch.algorithms import RobustGradient, RobustLocalSGD, SignVote
from ballot.torch.group import ABORT, END, GRADIENT, HELLO, PARAMS, ROUND, GroupChannel

__all__ = ["Node", "CLUSTER_VARIABLE", "INDEX_VARIABLE", "EXPORT_VARIABLE"]

CLUSTER_VARIABLE = "BALLOT_CLUSTER"
INDEX_VARIABLE = "BALLOT_NODE_INDEX"
EXPORT_VARIABLE = "BALLOT_EXPORT_INIT"

Step = Callable[[torch.Tensor], torch.Tensor]


def _shape(shape: Any) -> Tuple[int, ...]:
    return tuple(int(x) for x in shape)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality of two float32 arrays (the update's contract): a NaN equals the same
    NaN, and -0 differs from +0."""
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _layout_digest(named: List[Tuple[str, torch.Tensor]]) -> str:
    return layout_digest([(name, tuple(p.shape)) for name, p in named])


class Node:
    """Node ``index`` of the cluster file ``cluster`` with ``model``'s parameters (see the module
    docstring). ``algorithm`` defaults to the cluster's (SignVote for rule ``vote``, else
    RobustGradient); ``examples``, when given, must equal the cluster's training-set size.
    ``group``: a ``torch.distributed`` process group of this participant's processes that acts as
    this one node (every rank constructs the Node and calls :meth:`run`; only group rank 0 needs the
    cluster file and its key)."""

    def __init__(self, model: torch.nn.Module, cluster: Optional[Union[str, os.PathLike]] = None,
                 index: Optional[int] = None, *, algorithm: Any = None, examples: Optional[int] = None,
                 group: Any = None) -> None:
        named = trained_parameters(model)
        if not named:
            raise ValueError("the model has no parameter that requires grad: nothing for Ballot to train")
        for name, p in named:
            if p.dtype != torch.float32:
                raise TypeError(f"parameter '{name}' is {p.dtype}: Ballot trains float32 parameters "
                                "(autocast inside step() is fine)")
            if p.device != named[0][1].device:
                raise ValueError(f"parameter '{name}' is on {p.device}, '{named[0][0]}' on {named[0][1].device}: "
                                 "a node trains a model on one device")
            if p.device.type not in ("cpu", "cuda"):
                raise NotImplementedError(f"parameter '{name}' is on {p.device}: ballot.torch trains CPU and CUDA "
                                          "tensors")
        self._device = named[0][1].device
        channel = GroupChannel(group) if group is not None else None
        export = os.environ.get(EXPORT_VARIABLE)
        if export:
            if channel is None or channel.leader:  # one writer
                digest = export_init(model, export)
                with open(export + ".json", "w", encoding="utf-8") as meta:
                    json.dump({"examples": examples, "layout_digest": digest,
                               "parameters": sum(p.numel() for _, p in named)}, meta)
            raise SystemExit(0)
        self.model = model
        self.abstained = 0
        self.pieces_sent = 0  # vote pieces sent during backward (SignVote(pieces=k))
        self._started = False
        self._work_on_model = False  # SignVote's worker momentum and packing on the model's device
        self._encode_on_model = False  # RobustGradient's encoding on the model's GPU
        self._update_on_model = False  # and the update, applied there from each decision's vote
        self._rule: Optional[Dict[str, Any]] = None  # the replica's sgd / heavyball / signum / ef_sign state
        self._buffer: Optional[torch.Tensor] = None  # its momentum buffer (ef_sign: error) on the model's device
        self._ef_layers: Optional[torch.Tensor] = None  # ef_sign's layer sizes on the model's device
        self._copy_stale = False  # a refresh stopped part-way: the model's copy lags the replica
        self.update_mismatches = 0  # checks that found the model's copy unequal to the replica
        self._momentum: Dict[int, Optional[torch.Tensor]] = {}  # there, by partition (None: the run has none)
        self._restored = 0  # the session's count of node states restored, when _momentum was read
        self._untouched: Optional[int] = None  # the round whose work began and reached nothing yet
        self._resynchronised = 0  # the session's count of own-round states that replaced the parameters
        self._grouped = channel is not None
        self._channel = channel if channel is not None and channel.size > 1 else None
        self._session: Any = None
        self._dirty = True  # the leader's parameters changed since the group last received them
        self._in_command = False  # the leader is inside one command's collectives
        self._group_stats: Dict[str, int] = {}
        self._shares = 0  # batches this rank computed a share of, in a group
        if self._channel is not None and not self._channel.leader:
            self._open_follower(named)
            return
        try:
            self._open_session(named, cluster, index, algorithm, examples)
        except BaseException:
            if self._channel is not None:
                try:
                    self._channel.header(ABORT)  # the others raise instead of waiting for the hello
                except Exception:  # noqa: BLE001  (a member already gone: this error is the one to show)
                    pass
            raise
        if self._channel is not None:
            self._hello(named)

    def _node_index(self, index: Optional[int]) -> Optional[int]:
        if index is not None:
            return int(index)
        if os.environ.get(INDEX_VARIABLE) is not None:
            return int(os.environ[INDEX_VARIABLE])
        # Under a launcher, as `ballot launch` reads it, innermost launcher first (under sbatch +
        # mpirun every rank inherits one SLURM_PROCID): rank 0 is the server. In a group, RANK is
        # the group's own (its torchrun's), not the cluster's.
        variables = ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID") if self._grouped else (
            "OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID")
        for variable in variables:  # the first one set wins, as in `ballot launch`
            if os.environ.get(variable, "").isdigit():
                if int(os.environ[variable]) == 0:
                    raise ValueError(f"{variable}=0: launcher rank 0 is the cluster's server (`ballot launch "
                                     "--cluster F --init FILE`); the nodes are ranks 1 .. n")
                return int(os.environ[variable]) - 1
        return None

    def _open_session(self, named: List[Tuple[str, torch.Tensor]], cluster: Any, index: Optional[int],
                      algorithm: Any, examples: Optional[int]) -> None:
        if cluster is None:
            cluster = os.environ.get(CLUSTER_VARIABLE)
        index = self._node_index(index)
        if cluster is None or index is None:
            hint = (f"; in a group, RANK is the group's own rank: set {INDEX_VARIABLE} or pass index="
                    if self._grouped else "")
            raise ValueError(f"no cluster: pass cluster= and index=, or start the script with "
                             f"`python -m ballot.torch.run` ({CLUSTER_VARIABLE}, {INDEX_VARIABLE}){hint}")
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
            if not isinstance(algorithm, (SignVote, RobustGradient, RobustLocalSGD)):
                raise TypeError(f"algorithm must be ballot.torch.SignVote(...), RobustGradient(...) or "
                                f"RobustLocalSGD(...), not {algorithm!r}")
            algorithm.check(self.training)
            work_on = algorithm.work_on
            gradient_path = isinstance(algorithm, RobustGradient)
            on_gpu = self._device.type == "cuda"
            # The gradient path on a GPU: the gradient encoded there (an honest node's), only the bytes copied.
            self._encode_on_model = gradient_path and on_gpu and work_on != "host" and native.encodes_on_device
            kernels_on_gpu = self._encode_on_model or (on_gpu and not gradient_path and work_on != "host")
            if kernels_on_gpu and self._device.index != torch.cuda.current_device():
                raise ValueError(f"the model is on {self._device} but the current CUDA device is "
                                 f"cuda:{torch.cuda.current_device()}: call torch.cuda.set_device("
                                 f"{self._device.index}) first (Ballot's kernels run on the current device)")
            if gradient_path and on_gpu and work_on == "model" and not self._encode_on_model and not native.byzantine:
                raise ValueError(f"{type(algorithm).__name__}(work_on='model'): the cluster's codec "
                                 f"'{self.training['codec']}' has no CUDA encoder in this build (a Ballot "
                                 "built without CUDA): use work_on='auto' or 'host'")
        except Exception:
            self._session.close()
            raise
        self.algorithm = algorithm
        self._work_on_model = not gradient_path and (work_on == "model" or (work_on == "auto" and on_gpu))
        # The sign rule (the vote's default update) and the sgd, heavyball, signum and ef_sign rules
        # (with their momentum buffer or error memory on the device) are applied on the model's
        # device as on the host replica.
        self._rule = native.optimizer_state()
        if self._rule is not None:
            del self._rule["buffer"]  # the buffer comes to the model's device at the first _refresh
        rule = str(self.training["update"]).split(":")[0].strip()
        self._update_on_model = self._work_on_model and (rule == "sign" or self._rule is not None)
        if self._update_on_model:
            native.track_votes()
        self._flat = torch.from_numpy(native.parameters())  # the replica's buffer: no copy
        self._make_views(named, [(int(offset), int(size), _shape(shape))
                                 for _, shape, offset, size in native.tensors()])

    def _make_views(self, named: List[Tuple[str, torch.Tensor]],
                    layout: List[Tuple[int, int, Tuple[int, ...]]]) -> None:
        # The tensor the model's parameters view: the replica's buffer itself, or its copy on the
        # model's device (kept equal to the replica after every change of it, _refresh).
        own_copy = self._device.type != "cpu" or self._update_on_model
        self._model_flat = self._flat.to(self._device, copy=True) if own_copy else self._flat
        # One extra coordinate after the gradient: the loss, reduced with it in a group.
        self._grad_and_loss = torch.zeros(self._flat.numel() + 1, device=self._device)
        self._grad = self._grad_and_loss[:self._flat.numel()]
        self._params: List[torch.nn.Parameter] = []
        self._grad_views: List[torch.Tensor] = []
        self._ranges = [(offset, size) for offset, size, _ in layout]  # each parameter's in the flat vector
        with torch.no_grad():
            for (_, p), (offset, size, shape) in zip(named, layout):
                p.data = self._model_flat[offset:offset + size].view(shape)
                self._params.append(p)
                self._grad_views.append(self._grad[offset:offset + size].view(shape))
        self._attach_grads()

    # ---- the group's start: the leader sends the layout and the parameters
    def _hello(self, named: List[Tuple[str, torch.Tensor]]) -> None:
        channel = self._channel
        assert channel is not None
        tensors = list(self._session._native.tensors())
        channel.header(HELLO, self.index, self._flat.numel(), len(tensors))
        layout = [int(offset) for _, _, offset, _ in tensors] + [int(size) for _, _, _, size in tensors]
        channel.broadcast(torch.tensor(layout + [int(self.byzantine)], dtype=torch.int64))
        channel.broadcast(torch.tensor(list(bytes.fromhex(_layout_digest(named))), dtype=torch.uint8))
        self._sync_parameters()

    def _open_follower(self, named: List[Tuple[str, torch.Tensor]]) -> None:
        channel = self._channel
        assert channel is not None
        command, index, dimension, count = channel.header()
        if command == ABORT:
            raise RuntimeError(f"group rank {channel.rank}: group rank 0 could not open the node (its error is in "
                               "its output)")
        if command != HELLO:
            raise RuntimeError(f"group rank {channel.rank}: expected the node's layout from group rank 0, got "
                               f"command {command}")
        layout = torch.empty(2 * count + 1, dtype=torch.int64)
        channel.broadcast(layout)
        digest = torch.empty(32, dtype=torch.uint8)
        channel.broadcast(digest)
        if bytes(digest.tolist()).hex() != _layout_digest(named):
            raise ValueError(f"group rank {channel.rank}: this model's parameters differ in names or shapes from "
                             "group rank 0's (every rank of a group must build the same model)")
        offsets, sizes = layout[:count].tolist(), layout[count:2 * count].tolist()
        self._index, self._byzantine, self._round = index, bool(layout[-1]), 0
        self.algorithm = None
        self.training = {}
        self._flat = torch.zeros(dimension)
        self._make_views(named, [(int(o), int(s), tuple(p.shape)) for (_, p), o, s in zip(named, offsets, sizes)])
        self._receive_parameters()

    def _receive_parameters(self) -> None:
        assert self._channel is not None
        if self._channel.header()[0] != PARAMS:
            raise RuntimeError(f"group rank {self._channel.rank}: expected the parameters from group rank 0")
        self._channel.broadcast(self._model_flat)

    def _sync_parameters(self) -> None:
        """Leader: the group gets the parameters if they changed since it last got them."""
        if self._channel is not None and self._dirty:
            self._channel.header(PARAMS)
            self._channel.broadcast(self._model_flat)  # what the ranks compute on (local SGD steps included)
        self._dirty = False

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
        submits. ``on_round(node)`` is called after each round's work. Returns the session stats.
        In a group every rank calls it; the other ranks compute their shares of each batch and
        return group rank 0's round count."""
        if self._session is None:
            return self._follow(step, on_round)
        native = self._session._native
        # An attacker whose attack needs every honest message recomputes them with `step`.
        native.set_gradient_source(lambda round_, partition: self._honest(step, round_, partition))
        if self._work_on_model:  # the node state file takes the momentum from the device
            native.set_momentum_source(self._momentum_for_state)
        event = None
        try:
            if not self._started:
                self._session.start()
                self._started = True
            interrupted = self._session.work
            if interrupted is not None and interrupted.round == self._untouched:
                # An exception (Ctrl-C) stopped this round's work before any of it reached the
                # session: computed again, so that the cluster does not wait for this node.
                self._round_work(interrupted, step, on_round)
            while True:
                event = self._session.next_round()
                self._dirty = True  # a decision or a state transfer wrote the parameters
                self._refresh()
                self._report_resynchronised()
                if event.over:
                    break
                assert event.work is not None
                self._round_work(event.work, step, on_round)
        except BaseException:
            if self._channel is not None and not self._in_command:
                try:
                    self._channel.header(ABORT)  # between commands: the others raise instead of waiting
                except Exception:  # noqa: BLE001  (a member already gone: the launcher ends the group)
                    pass
            raise
        finally:
            native.set_gradient_source(None)  # the session must not keep this node alive
            native.set_momentum_source(None)
        if self._update_on_model:
            self._check_copy()  # the run ends with the replica's parameters, checked
        if event is not None and event.kind == "finished" and self.round < self._session.rounds:
            # The server sends a node that may be behind the final state before its Finish; this
            # one did not get it (a state lost with a connection): say so rather than end quietly.
            print(f"ballot.torch: node {self.index}: the run ended at round {self._session.rounds} but this "
                  f"node's parameters are those of round {self.round}: they are not the run's final "
                  "parameters (the server's checkpoint holds those)", file=sys.stderr, flush=True)
        stats = self._session.stats
        stats["abstained_non_finite"] = self.abstained
        stats["vote_pieces_sent"] = self.pieces_sent
        stats["update_mismatches"] = self.update_mismatches
        if self._channel is not None:  # every rank ends with the agreed parameters
            stats.update(group_rank=0, group_size=self._channel.size, group_shares=self._shares)
            self._channel.header(END, int(stats.get("rounds", 0)), self.abstained, self.round)
            self._channel.broadcast(self._model_flat)
            self._dirty = False
        return stats

    def _round_work(self, work: Any, step: Step, on_round: Optional[Callable[["Node"], None]]) -> None:
        self._untouched = work.round  # until something of the round reaches the session (_touch)
        self._check_parameters()
        self._compute(work, step)
        self._untouched = None
        if self._channel is not None:
            self._channel.header(ROUND, work.round)
        if on_round is not None:
            on_round(self)

    def _check_parameters(self) -> None:
        """The model still trains the node's views: a parameter replaced (``model.fc = nn.Linear``),
        converted or moved (``.double()``, ``.to()``) after the Node was built would silently stop
        following the cluster (its gradient never reaching the vote)."""
        current = trained_parameters(self.model)
        for (name, p), mine, (offset, _size) in zip(current, self._params, self._ranges):
            expected = self._model_flat.data_ptr() + 4 * offset
            if p is not mine or p.data_ptr() != expected:
                raise ValueError(f"parameter '{name}' is no longer the node's view of the cluster's parameters: it "
                                 "was replaced, converted or moved after the Node was built (assign layers, call "
                                 ".to(), .double() or load_state_dict before building the Node)")
        if len(current) != len(self._params):
            raise ValueError(f"the model has {len(current)} trained parameters, {len(self._params)} when the Node "
                             "was built: add, remove, freeze or unfreeze parameters before building the Node")

    def _report_resynchronised(self) -> None:
        """Once per occurrence: the server found this node's parameters unlike its own at the same
        round and sent its state, which replaced them."""
        count = int(self._session._native.stats()["resynchronised"])
        if count > self._resynchronised:
            self._resynchronised = count
            print(f"ballot.torch: node {self.index}: round {self.round}: the server found this node's parameters "
                  "unlike its own and replaced them; something changed them outside the cluster's decisions (an "
                  "optimizer's step, load_state_dict after Node(), in-place writes) or the step is not "
                  "deterministic", file=sys.stderr, flush=True)

    def _touch(self) -> None:
        """The round's work reaches the session or the worker momentum: computing the round again
        after an exception would fold or send it twice."""
        self._untouched = None

    def _follow(self, step: Step, on_round: Optional[Callable[["Node"], None]]) -> Dict[str, int]:
        """A group rank other than 0: does what group rank 0 sends until its end."""
        channel = self._channel
        assert channel is not None
        while True:
            command, a, b, c = channel.header()
            if command == PARAMS:
                channel.broadcast(self._model_flat)
            elif command == GRADIENT:
                self._share_backward(step, channel.indices(None, c))
            elif command == ROUND:
                self._round = a  # the round whose work is done (its decision is not applied yet)
                if on_round is not None:
                    on_round(self)
            elif command == END:
                channel.broadcast(self._model_flat)
                self._round = c
                self.abstained = b
                self._group_stats = {"rounds": a, "abstained_non_finite": b, "group_rank": channel.rank,
                                     "group_size": channel.size, "group_shares": self._shares}
                return dict(self._group_stats)
            elif command == ABORT:
                raise RuntimeError(f"group rank {channel.rank}: group rank 0 stopped with an error (see its output)")
            else:
                raise RuntimeError(f"group rank {channel.rank}: unknown command {command} from group rank 0")

    def _refresh(self) -> None:
        """The model's copy of the parameters (a CUDA model's) made equal to the replica's: the
        decisions' votes applied to it on its device (update on the model), else the replica's
        parameters copied to it."""
        if self._model_flat is self._flat:
            return
        if not self._update_on_model:
            with torch.no_grad():
                self._model_flat.copy_(self._flat)
            return
        # Stale until every vote taken is applied: after Ctrl-C or an out-of-memory error part-way,
        # the votes not applied are gone, and the next refresh copies the replica's state instead.
        stale, self._copy_stale = self._copy_stale, True
        taken = self._session._native.take_votes()
        if taken["replaced"] or stale:  # a state transfer (or votes never taken): the replica's state
            self._copy_replica()
            self._copy_stale = False
            return
        check = False
        for _round, words, lr, weight_decay, full_digest, scales in taken["votes"]:
            vote = torch.from_numpy(words.view(np.int64)).to(self._device)  # d/8 bytes
            self._apply_vote(vote, lr, weight_decay, scales)
            check = check or full_digest
        self._copy_stale = False
        if check:  # the rounds the replica's state digest is its parameters' (digest_every)
            self._check_copy()

    def _apply_vote(self, vote: torch.Tensor, lr: float, weight_decay: float, scales: np.ndarray) -> None:
        """One decision on the model's copy: the replica's rule with the decision's scale (and, for
        ef_sign, the per-layer scales the replica's step computed)."""
        rule, flat = self._rule, self._model_flat
        if rule is None or (rule["rule"] == "sgd" and rule["momentum"] == 0.0):  # x - lr (v + wd x)
            signs.apply_update(flat, lr=lr, vote=vote, weight_decay=weight_decay)
        else:
            if self._buffer is None:  # no step made one yet: zeros (signum), or the first step's (sgd)
                self._buffer = torch.zeros_like(flat)
                rule["started"] = False
            if rule["rule"] == "signum":  # learning::Signum: m <- beta m + (1 - beta) v, then the sign rule on m
                momentum_signs = signs.momentum_pack(self._buffer, signs.unpack(vote, flat.numel()), rule["beta"])
                signs.apply_update(flat, lr=lr, vote=momentum_signs, weight_decay=weight_decay)
            elif rule["rule"] == "ef_sign":
                self._ef_sign_step(vote, lr, scales)
            else:  # learning::Sgd: the buffer starts as the first decayed direction
                signs.apply_update(flat, lr=lr, vote=vote, weight_decay=weight_decay, momentum=rule["momentum"],
                                   buffer=self._buffer, dampening=rule["dampening"], nesterov=rule["nesterov"],
                                   first_step=not rule["started"])
        if rule is not None:
            rule["started"] = True

    def _ef_sign_step(self, vote: torch.Tensor, lr: float, scales: np.ndarray) -> None:
        """learning::EfSign on the model's copy with the replica's per-layer scales s (its double
        sum of |p| over each layer in coordinate order is not summed again here): p = e + lr v;
        x <- x - s sign(p); e <- p - s sign(p). Each is one float operation rounded to nearest
        (lr v and s sign(p) are exact), so the bits are the replica's. In a vote run that starts
        with e = 0, |p| = lr everywhere, so s = lr and e stays 0; e matters after a state that
        carried one."""
        flat, error = self._model_flat, self._buffer
        if self._ef_layers is None:  # the layers tile [0, d) in order (core::GradientLayout)
            layers = [(int(offset), int(size)) for offset, size in self._rule["layers"]]
            if [offset for offset, _ in layers] != list(itertools.accumulate([0] + [s for _, s in layers[:-1]])) \
                    or sum(size for _, size in layers) != flat.numel():
                raise RuntimeError(f"ef_sign's layers {layers[:4]}... do not tile the {flat.numel()} parameters")
            self._ef_layers = torch.tensor([size for _, size in layers], device=self._device)
        error.add_(signs.unpack(vote, flat.numel(), lr))  # p = e + lr v
        delta = torch.ones_like(error).masked_fill_(error < 0, -1.0)  # sign(p): NaN and -0 count as +1
        per_coordinate = torch.repeat_interleave(torch.from_numpy(np.asarray(scales, np.float32)).to(self._device),
                                                 self._ef_layers, output_size=flat.numel())
        delta.mul_(per_coordinate)
        flat.sub_(delta)
        error.sub_(delta)

    def _copy_replica(self) -> None:
        """The replica's parameters and, for sgd / heavyball / signum / ef_sign, its rule's state, to the
        model's copy."""
        with torch.no_grad():
            self._model_flat.copy_(self._flat)
        if self._rule is not None:
            self._rule = self._session._native.optimizer_state()
            buffer = self._rule.pop("buffer")
            # an empty buffer: the next step makes one (a first step for sgd, zeros for signum)
            self._buffer = torch.from_numpy(buffer).to(self._device) if buffer.size == self._flat.numel() else None

    def _check_copy(self) -> None:
        """The model's copy (and its rule's momentum buffer) against the replica's (4d bytes to
        the host each): equal, or reported and replaced by the replica's."""
        same = self._model_flat is self._flat or _same_bits(self._numpy(self._model_flat), self._flat.numpy())
        if same and self._rule is not None:
            host = self._session._native.optimizer_state()
            mine = np.empty(0, np.float32) if self._buffer is None else self._numpy(self._buffer)
            same = host["started"] == self._rule["started"] and _same_bits(mine, host["buffer"])
        if same:
            return
        self.update_mismatches += 1
        print(f"ballot.torch: node {self.index}: round {self.round}: the parameters on {self._device} differ "
              f"from the replica's; copied from it", file=sys.stderr, flush=True)
        self._copy_replica()

    @staticmethod
    def _numpy(tensor: torch.Tensor) -> np.ndarray:
        """The host array the session reads (a copy for a CUDA tensor; a view for a CPU one)."""
        return tensor.numpy() if tensor.device.type == "cpu" else tensor.detach().cpu().numpy()

    def _indices(self, round_: int, partition: int) -> torch.Tensor:
        return torch.from_numpy(self._session._native.partition_indices(round_, partition).astype(np.int64))

    def _backward(self, step: Step, round_: int, partition: int) -> float:
        """The gradient of partition `partition` of `round_` in self._grad; returns the loss."""
        indices = self._indices(round_, partition)
        if self._channel is None:
            self._grad.zero_()
            return self._local_backward(step, indices)
        self._sync_parameters()
        self._in_command = True
        self._channel.header(GRADIENT, round_, partition, int(indices.numel()))
        loss = self._share_backward(step, self._channel.indices(indices, int(indices.numel())))
        self._in_command = False
        return loss

    def _forward(self, step: Step, indices: torch.Tensor) -> torch.Tensor:
        """The loss of ``indices``, with the gradients attached to the flat gradient buffer."""
        self._attach_grads()
        loss = step(indices)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("step(indices) must return the loss as a one-element tensor")
        if not loss.requires_grad:
            raise ValueError("step(indices) returned a loss without a graph to backpropagate: do not call run() "
                             "under torch.no_grad() or torch.inference_mode(), and return the loss itself "
                             "(not loss.detach() or loss.item())")
        return loss

    def _local_backward(self, step: Step, indices: torch.Tensor) -> float:
        loss = self._forward(step, indices)
        loss.backward()
        for p, g in zip(self._params, self._grad_views):  # a grad torch replaced instead of accumulating
            if p.grad is not None and p.grad.data_ptr() != g.data_ptr():
                g.copy_(p.grad)
                p.grad = g
        return float(loss.detach())

    def _share_backward(self, step: Step, indices: torch.Tensor) -> float:
        """Group: this rank's share of the batch, weighted by its size, summed over the group: the
        gradient and the loss of the batch's mean loss (on every rank)."""
        channel = self._channel
        assert channel is not None
        self._grad_and_loss.zero_()
        share = channel.share(indices)
        self._shares += 1
        if share.numel() > 0:
            loss = self._local_backward(step, share)
            weight = share.numel() / indices.numel()
            if weight != 1.0:
                self._grad.mul_(weight)
            self._grad_and_loss[-1] = loss * weight
        channel.all_reduce_sum(self._grad_and_loss)
        return float(self._grad_and_loss[-1])

    def _honest(self, step: Step, round_: int, partition: int) -> Tuple[float, np.ndarray]:
        """What an honest node sends for `partition` of `round_`: its gradient, or its local delta."""
        self._dirty = True  # called inside the session's calls: the replica may have moved
        self._refresh()
        if isinstance(self.algorithm, RobustLocalSGD):
            loss, delta = self._local_delta(round_, partition, step)
            return loss, self._numpy(delta)
        return self._backward(step, round_, partition), self._numpy(self._grad)

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
            self._touch()
            if self._encode_on_model:  # encoded on the GPU, on torch's current stream: the bytes cross
                native.submit_gradient(loss, direction, cuda_stream(direction))
            else:
                native.submit_gradient(loss, self._numpy(direction))
            return
        losses = []
        pieces = self._vote_pieces(work)
        for k, partition in enumerate(work.partitions):
            if pieces and k == len(work.partitions) - 1:
                self._vote_in_pieces(step, work.round, partition, losses, pieces)
                return
            loss = self._backward(step, work.round, partition)
            if not self._finite(loss, self._grad):
                self._abstain(work.round)
                return
            self._fold(partition, self._grad)
            losses.append(loss)
        self._touch()
        native.submit_folded(sum(losses) / len(losses) if losses else 0.0)

    # ---- the worker momentum and the packing on the model's device (SignVote.work_on)
    def _fold(self, partition: int, gradient: torch.Tensor) -> None:
        """`partition`'s gradient into its worker momentum and signs: in the session (the gradient
        copied to the host), or on the model's device (only the packed signs copied)."""
        native = self._session._native
        self._touch()
        if not self._work_on_model:
            native.fold(partition, self._numpy(gradient))
            return
        native.fold_signs(partition, self._pack(partition, 0, gradient).cpu().numpy())

    def _pack(self, partition: int, begin: int, gradient: torch.Tensor) -> torch.Tensor:
        """The signs of coordinates [begin, begin + len(gradient)) of `partition`, through its worker
        momentum on the model's device (in place), packed there."""
        self._forget_restored_momentum()
        if partition not in self._momentum:  # the session's momentum (zeros, or the restored one)
            host = self._session._native.momentum(partition)
            self._momentum[partition] = None if host is None else torch.from_numpy(host).to(self._device)
        momentum = self._momentum[partition]
        with torch.no_grad():
            if momentum is None:
                return signs.pack(gradient)
            return signs.momentum_pack(momentum[begin:begin + gradient.numel()], gradient,
                                       float(self.training["worker_momentum"]))

    def _momentum_for_state(self, partition: int) -> Optional[np.ndarray]:
        """The session saves the node state: `partition`'s momentum as the device holds it."""
        self._forget_restored_momentum()
        momentum = self._momentum.get(partition)
        return None if momentum is None else self._numpy(momentum)

    def _forget_restored_momentum(self) -> None:
        """After a state transfer restored the node's saved momentum, the session's is the current."""
        restored = int(self._session._native.stats()["states_restored"])
        if restored != self._restored:
            self._restored = restored
            self._momentum.clear()

    # ---- the vote in pieces while backward runs (SignVote(pieces=k))
    def _vote_pieces(self, work: Any) -> int:
        """How many pieces this round's vote goes in (0: whole, after backward)."""
        pieces = int(getattr(self.algorithm, "pieces", 0))
        if (pieces <= 0 or work.kind != "vote" or self._channel is not None or self.byzantine
                or (self._device.type != "cpu" and not self._work_on_model)):
            return 0
        return min(pieces, max(1, (self._flat.numel() + 63) // 64))

    def _install_piece_hooks(self) -> None:
        """A hook on each parameter's gradient accumulation (once): it tells the round in pieces
        which parameters' gradients are complete."""
        if getattr(self, "_accumulators", None) is not None:
            return
        self._accumulators: List[Any] = []
        self._piece_round: Any = None
        for i, p in enumerate(self._params):
            if not p.requires_grad:
                continue
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                p.register_post_accumulate_grad_hook(lambda _p, i=i: self._gradient_ready(i))
            else:  # the AccumulateGrad node of the leaf (kept alive here, or the hook goes with it)
                with torch.enable_grad():
                    accumulator = p.view_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(lambda *_args, i=i: self._gradient_ready(i))
                self._accumulators.append(accumulator)

    def _gradient_ready(self, i: int) -> None:
        pieces = self._piece_round
        if pieces is None:  # a backward outside a round in pieces
            return
        p, view = self._params[i], self._grad_views[i]
        if p.grad is not None and p.grad.data_ptr() != view.data_ptr():  # torch replaced the buffer
            with torch.no_grad():
                view.copy_(p.grad)
            p.grad = view
        pieces.ready(i)

    def _vote_in_pieces(self, step: Step, round_: int, partition: int, losses: List[float], count: int) -> None:
        """The last partition of the round: forward, then backward with the vote going out piece by
        piece as the gradients of each piece's parameters are complete (the rest after backward)."""
        self._install_piece_hooks()
        self._grad.zero_()
        loss = self._forward(step, self._indices(round_, partition))
        value = float(loss.detach())
        mean = (sum(losses) + value) / (len(losses) + 1)
        if not math.isfinite(value):
            self._abstain(round_)
            return
        pieces = _PiecesOfAVote(self, partition, mean, count)
        self._piece_round = pieces
        self._touch()  # pieces go out during backward
        try:
            loss.backward()
        finally:
            self._piece_round = None
        pieces.flush()  # parameters without a gradient this round
        if pieces.failed:
            self._abstain(round_)

    def _local_delta(self, round_: int, partition: int, step: Step) -> Tuple[float, torch.Tensor]:
        algorithm = self.algorithm
        flat = self._model_flat
        start = flat.clone()
        losses = []
        try:
            for h in range(int(algorithm.sync_every)):
                loss = self._backward(step, round_ * int(algorithm.sync_every) + h, partition)
                losses.append(loss)
                if not self._finite(loss, self._grad):
                    return float("nan"), self._grad
                with torch.no_grad():
                    flat.add_(self._grad, alpha=-float(algorithm.local_lr))
                self._dirty = True
            delta = start - flat
        finally:
            with torch.no_grad():
                flat.copy_(start)  # the replica moves only by the server's decision
            self._dirty = True
        return sum(losses) / len(losses), delta

    # ---- state
    @property
    def index(self) -> int:
        return self._session.index if self._session is not None else self._index

    @property
    def round(self) -> int:
        """The next round the replica will apply."""
        return self._session.round if self._session is not None else self._round

    @property
    def byzantine(self) -> bool:
        return self._session.byzantine if self._session is not None else self._byzantine

    @property
    def group_rank(self) -> int:
        """This process's rank in the node's group (0 without a group: the process that speaks to
        the cluster)."""
        return self._channel.rank if self._channel is not None else 0

    @property
    def parameters(self) -> torch.Tensor:
        """The flat parameter vector (the model's parameters are views of it; on the model's device)."""
        return self._model_flat

    @property
    def stats(self) -> Dict[str, int]:
        return self._session.stats if self._session is not None else dict(self._group_stats)

    def model_digest(self) -> str:
        """SHA-256 of the parameters (hex): equal on every replica in sync, the server's included
        (and on every rank of a group after run())."""
        if self._session is not None:
            return self._session.model_digest()
        return hashlib.sha256(self._numpy(self._model_flat).tobytes()).hexdigest()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _PiecesOfAVote:
    """One round's vote in pieces: piece k covers coordinates [64·w_k, 64·w_(k+1)) of the flat
    vector, w_k = ⌊W·k/count⌋ of its W words (runtime::vote_piece_word), and goes out (folded
    through the partition's worker momentum, signed, sent) once every parameter that overlaps it
    has its gradient. A piece with a non-finite gradient stops the vote: the pieces sent before
    it never complete one, so nothing is counted."""

    def __init__(self, node: "Node", partition: int, loss: float, count: int) -> None:
        self.node, self.partition, self.loss, self.count = node, partition, loss, count
        d = node._flat.numel()
        words = (d + 63) // 64
        self.bounds = [min(d, 64 * ((words * k) // count)) for k in range(count + 1)]
        self.pending = [0] * count
        self.of_param: List[List[int]] = []
        for offset, size in node._ranges:
            touched = [k for k in range(count) if offset < self.bounds[k + 1] and offset + size > self.bounds[k]]
            self.of_param.append(touched)
            for k in touched:
                self.pending[k] += 1
        self.sent = [False] * count
        self.failed = False
        for k in range(count):  # pieces of no parameter's coordinates (padding only)
            if self.pending[k] == 0:
                self.send(k)

    def ready(self, i: int) -> None:
        for k in self.of_param[i]:
            self.pending[k] -= 1
            if self.pending[k] == 0:
                self.send(k)

    def send(self, k: int) -> None:
        if self.sent[k] or self.failed:
            return
        self.sent[k] = True
        begin, end = self.bounds[k], self.bounds[k + 1]
        gradient = self.node._grad[begin:end]
        if not self.node._finite(self.loss, gradient):
            self.failed = True
            return
        node = self.node
        native = node._session._native
        if node._work_on_model:  # the momentum and the packing on the model's device; the signs cross
            native.fold_signs_range(self.partition, begin, node._pack(self.partition, begin, gradient).cpu().numpy())
        else:
            native.fold_range(self.partition, begin, gradient.numpy())
        native.submit_vote_piece(self.loss, k, self.count)
        self.node.pieces_sent += 1

    def flush(self) -> None:
        for k in range(self.count):
            self.send(k)
