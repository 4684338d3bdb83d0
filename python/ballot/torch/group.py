"""One Ballot node made of several local processes: a ``torch.distributed`` process group.

A participant with several GPUs (or CPU processes) runs its own local group, for example under
``torchrun --standalone --nproc_per_node K``, and passes it to the node::

    dist.init_process_group("gloo")                 # "nccl" on GPUs: the group is trusted, it is one participant
    node = bt.Node(model, examples=N, group=dist.group.WORLD)
    node.run(step)                                  # on every rank of the group

The group speaks to the cluster as ONE node. Its rank 0 opens the node session (keys, mutual TLS,
signed votes) and is the only process that talks to the server; the other ranks never read the
cluster file. Each round rank 0 tells the group what to compute, and every rank computes its share:

* the parameters: rank 0 broadcasts its flat parameter vector whenever it changed (a decision, a
  state transfer, a local SGD step), so every rank computes on the replica's exact bits;
* a partition's batch: rank 0 broadcasts its example indices; rank r takes the r-th of K
  contiguous slices, runs ``step`` and backward on it and weights its gradient and loss by its
  share of the batch (slice size / batch size); one ``all_reduce`` (sum) over the group gives the
  gradient of the partition's mean loss, which rank 0 submits (``step`` must return the mean loss
  of the examples it is given, as ``F.cross_entropy`` does by default);
* the end: rank 0 broadcasts the final parameters, so after ``run()`` every rank's model holds the
  agreed parameters (the server's model digest).

A batch split over K processes gives a gradient that can differ from one process's in the last
bits (another summation order). The server does not notice: it only sees rank 0's submission. But
under the election code the group's votes are then those of an ordinary voter, not bit-identical
copies of other nodes' votes, unless every node computes its partitions with the same split (the
same K, the same kernels). A NaN or Inf on any rank makes the sum non-finite: the node abstains.

Failures: if any rank raises, its process ends and the launcher (torchrun) ends the group; a
group rank 0 that cannot open the node tells the others, which raise too. The group's collectives
wait as long as the process group's ``timeout`` allows.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

__all__ = ["GroupChannel"]

# The commands group rank 0 broadcasts in a 4-word header: (command, a, b, c).
HELLO, PARAMS, GRADIENT, ROUND, END, ABORT = 1, 2, 3, 4, 5, 6


class GroupChannel:
    """The collectives between group rank 0 (the leader, which holds the node session) and the
    other ranks of a local ``torch.distributed`` group. A tensor on another device than the
    backend's (NCCL: the rank's current CUDA device; gloo: the CPU) is staged there and back."""

    def __init__(self, group: Any) -> None:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("group=: torch.distributed is not initialised (call dist.init_process_group first, "
                             "e.g. under torchrun --standalone --nproc_per_node K)")
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        if self.rank < 0:
            raise ValueError("group=: this process is not a member of the group")
        self.root = self._global_rank(0)
        backend = str(dist.get_backend(group)).lower()
        self.device = (torch.device("cuda", torch.cuda.current_device()) if backend == "nccl"
                       else torch.device("cpu"))

    def _global_rank(self, group_rank: int) -> int:
        dist = self._dist
        if self.group is None or self.group is dist.group.WORLD:
            return group_rank
        return int(dist.get_global_rank(self.group, group_rank))

    @property
    def leader(self) -> bool:
        return self.rank == 0

    # ---- collectives (every rank calls them in the same order)
    def _on_device(self, tensor: torch.Tensor, collective: Any) -> None:
        """Runs ``collective`` on ``tensor`` in place, staged through the backend's device when the
        tensor is elsewhere (a CPU tensor under NCCL, a CUDA one under gloo)."""
        if tensor.device == self.device:
            collective(tensor)
            return
        staged = tensor.to(self.device)
        collective(staged)
        tensor.copy_(staged)

    def broadcast(self, tensor: torch.Tensor) -> None:
        """``tensor`` (contiguous) becomes the leader's, in place."""
        self._on_device(tensor, lambda t: self._dist.broadcast(t, src=self.root, group=self.group))

    def all_reduce_sum(self, tensor: torch.Tensor) -> None:
        self._on_device(tensor, lambda t: self._dist.all_reduce(t, group=self.group))

    def header(self, command: int = 0, a: int = 0, b: int = 0, c: int = 0) -> Tuple[int, int, int, int]:
        """The leader sends (command, a, b, c); the others receive it (their arguments are ignored)."""
        words = torch.tensor([command, a, b, c], dtype=torch.int64)
        self.broadcast(words)
        values = [int(x) for x in words.tolist()]
        return values[0], values[1], values[2], values[3]

    def indices(self, indices: Optional[torch.Tensor], count: int) -> torch.Tensor:
        """The leader's ``count`` example indices (int64), on every rank."""
        buffer = indices.to(torch.int64).contiguous() if indices is not None else torch.empty(count, dtype=torch.int64)
        self.broadcast(buffer)
        return buffer

    def share(self, indices: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous slice of a batch (the first ranks get one more when it does not divide)."""
        return torch.tensor_split(indices, self.size)[self.rank]
