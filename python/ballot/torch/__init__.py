"""PyTorch models as Ballot nodes (docs/pytorch.md).

- :class:`Node`          an ``nn.Module`` as node ``index`` of a cluster: its parameters become views
                         of the replica's flat buffer; each round it computes with the model's
                         forward/backward and submits through the C++ session (mutual TLS, signed votes)
- :class:`SignVote`, :class:`RobustGradient`, :class:`RobustLocalSGD`  what a node sends
- :func:`export_init`   write a model's trained parameters to a Ballot parameter file (the "init file")
- :func:`trained_parameters` the parameters Ballot trains: ``named_parameters()`` that require grad
- :func:`read_init`     read and validate one (no torch needed)
- :func:`layout_digest` the SHA-256 of a model's parameter names and shapes
- ``python -m ballot.torch.run``  a local cluster of a training script (:mod:`ballot.torch.run`)

On many machines the server is ``ballot server`` or ``ballot launch`` (rank 0 of Slurm, torchrun or
Open MPI) and each node runs the script; ``Node`` takes its index from the launcher's rank (rank k
is node k - 1). ``Node(model, ..., group=pg)`` makes a participant's own ``torch.distributed``
group (its local GPUs or processes, under its own torchrun) one node (:mod:`ballot.torch.group`).

The init-file functions need no torch; :class:`Node` imports it when first used.
"""

from typing import Any

from ballot.torch._params_file import InitFile, export_init, layout_digest, read_init, trained_parameters
from ballot.torch.algorithms import RobustGradient, RobustLocalSGD, SignVote

__all__ = ["InitFile", "export_init", "layout_digest", "trained_parameters", "read_init", "Node", "SignVote", "RobustGradient",
           "RobustLocalSGD"]


def __getattr__(name: str) -> Any:
    if name == "Node":  # imports torch
        from ballot.torch.node import Node

        return Node
    raise AttributeError(f"module 'ballot.torch' has no attribute '{name}'")
