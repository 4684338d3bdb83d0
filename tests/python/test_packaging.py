"""`pip install .` from the repository root into a fresh venv (no system site packages), then an
example, help() and the `ballot` program from the wheel. Builds the whole C++ library in Release:
minutes, so it runs only when BALLOT_TEST_PACKAGING=1 (scripts/test.sh sets it)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.environ.get("BALLOT_TEST_PACKAGING") != "1",
                                reason="set BALLOT_TEST_PACKAGING=1 to build and install the wheel (minutes)")


def run(*args, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{args}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def test_pip_install_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    run("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT), env=env, timeout=3000)

    # The installed package, not the build tree's: PYTHONPATH is unset and the cwd is elsewhere.
    where = run(python, "-c", "import ballot, ballot._native; print(ballot.__file__)", env=env, cwd=tmp_path)
    assert str(venv) in where
    out = run(python, ROOT / "examples" / "python" / "robust_aggregation.py", env=env, cwd=tmp_path)
    assert "relative error" in out
    doc = run(python, "-c", "import ballot.robust; help(ballot.robust.Aggregator)", env=env, cwd=tmp_path)
    assert "registry string" in doc
    site = pathlib.Path(where.strip()).parent
    assert (site / "_native.pyi").exists() and (site / "py.typed").exists()
    # torch is optional: importing ballot never imports it.
    run(python, "-c", "import sys, ballot; assert 'torch' not in sys.modules", env=env, cwd=tmp_path)
    # The wheel carries the command-line program.
    assert "train" in run(venv / "bin" / "ballot", "--help", env=env, cwd=tmp_path)
