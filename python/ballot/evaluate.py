"""Security evaluation grids (C++ ``ballot::evaluation``): attack x defence x (n, b) x seed, run
by the same lockstep engine as ``ballot evaluate`` on Fashion-MNIST (or the grid's dataset).

A grid is the JSON document docs/evaluation.md describes, given as a dict, a JSON string or a
file path. :func:`run` returns results.json's content as Python objects (every cell with its
options, final accuracy, curve, rounds to target, changed rounds, ...) and, with
``report_dir``, writes results.json, report.md and the figures there too. The GIL is released
while the grid runs; the cells run on ``jobs`` threads.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Union

from ballot import _native


def _grid_text(grid: Union[dict, str, "os.PathLike[str]"]) -> str:
    if isinstance(grid, dict):
        try:
            return json.dumps(grid, allow_nan=False)
        except ValueError as e:  # NaN or inf: JSON has no such number, so the grid could not say it
            raise ValueError(f"grid: {e} (a grid's numbers must be finite)") from None
    text = os.fspath(grid)
    if text.lstrip().startswith("{"):
        return text
    with open(text, encoding="utf-8") as f:
        return f.read()


def run(grid: Union[dict, str, "os.PathLike[str]"], jobs: int = 2, progress: bool = False,
        report_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> Any:
    """Runs every cell of the grid and returns the results as dicts and lists."""
    out = _native.run_grid(_grid_text(grid), int(jobs), bool(progress), "" if report_dir is None else os.fspath(report_dir))
    return json.loads(out)


def paper_preset(rounds: int = 500, jobs: int = 2, progress: bool = False,
                 report_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> Any:
    """The election-coding paper's setups (see docs/evaluation_paper_preset.md)."""
    out = _native.run_paper_preset(int(rounds), int(jobs), bool(progress), "" if report_dir is None else os.fspath(report_dir))
    return json.loads(out)
