import os
import time

import pytest

from ballot import evaluate

FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="Fashion-MNIST (Debian: dataset-fashion-mnist) is not installed")
def test_a_small_grid_runs_and_returns_results(tmp_path):
    grid = {
        "base": {"model": "logreg", "rounds": 20, "eval_every": 10, "eval_examples": 1000},
        "attacks": ["reverse"],
        "defences": ["signSGD-MV", "deterministic"],
        "settings": [{"n": 5, "b": 1}],
        "seeds": [1],
    }
    out = evaluate.run(grid, jobs=2, report_dir=tmp_path)
    cells = out["cells"]
    assert len(cells) >= 4
    done = [c for c in cells if c["status"] == "done"]
    assert done and all(0.0 <= c["final_accuracy"] <= 1.0 for c in done)
    assert (tmp_path / "report.md").exists() and (tmp_path / "results.json").exists()


def test_bad_grids_are_value_errors():
    with pytest.raises(ValueError):
        evaluate.run({"defences": ["no-such-defence"]})
    with pytest.raises(ValueError):
        evaluate.run("{not json")
    with pytest.raises(FileNotFoundError):
        evaluate.run("/no/such/grid.json")
    with pytest.raises(ValueError, match="must be finite"):
        evaluate.run({"base": {"lr": float("nan")}, "attacks": ["reverse"], "defences": ["signSGD-MV"]})


def test_an_unwritable_report_dir_is_an_error_before_any_cell_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    grid = {"base": {"model": "logreg", "rounds": 20000}, "attacks": ["reverse"], "defences": ["signSGD-MV"],
            "settings": [{"n": 5, "b": 1}], "seeds": [1]}
    started = time.monotonic()
    with pytest.raises(OSError, match="cannot create"):
        evaluate.run(grid, report_dir=blocker / "report")
    assert time.monotonic() - started < 5  # 20000 rounds were not run first
