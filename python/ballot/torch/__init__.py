"""PyTorch models as Ballot nodes (needs ``torch`` for :func:`export_init` only).

- :func:`export_init`   write a model's parameters to a Ballot parameter file (the "init file")
- :func:`read_init`     read and validate one (pure Python, no torch needed)
- :func:`layout_digest` the SHA-256 of a model's parameter names and shapes
"""

from ballot.torch._params_file import InitFile, export_init, layout_digest, read_init

__all__ = ["InitFile", "export_init", "layout_digest", "read_init"]
