"""Ballot: Byzantine-robust, communication-efficient distributed training.

The Python package of Ballot's C++ core. Every module works on numpy arrays and torch tensors
(any object exporting DLPack or the buffer protocol) without copying them:

- :mod:`ballot.robust`    robust aggregation rules and pipelines (median, Krum, NNM > trimmed mean, ...)
- :mod:`ballot.codecs`    gradient compression codecs (top-k, QSGD, TernGrad, 1-bit SGD, ...)
- :mod:`ballot.signs`     sign packing, (weighted) majority votes, agreement; CUDA tensors on GPU builds
- :mod:`ballot.election`  election codes: certificates, minimum-redundancy search, Monte Carlo
- :mod:`ballot.attacks`   gradient attacks (sign flip, ALIE, IPM, ...) for evaluations
- :mod:`ballot.evaluate`  attack x defence x b grids with the engine of ``ballot evaluate``
- :mod:`ballot.compat.byzfl`  ByzFL's class names and signatures on Ballot's rules
- :mod:`ballot.flower`    a Flower strategy whose aggregation is a Ballot rule (needs ``flwr``)
- :mod:`ballot.session`   a node of a real Ballot cluster (mutual TLS) driven from Python
- :mod:`ballot.torch`     PyTorch models as Ballot nodes: init files (``export_init``, ``read_init``)

torch is optional: nothing here imports it unless you pass tensors.
"""

from ballot import _native
from ballot import attacks, codecs, election, evaluate, robust, session, signs

__version__ = "0.1.0"

#: Whether this build has the CUDA kernels (sign packing and votes on CUDA tensors).
has_cuda: bool = bool(_native.has_cuda)

__all__ = ["attacks", "codecs", "election", "evaluate", "robust", "session", "signs", "has_cuda", "__version__"]
