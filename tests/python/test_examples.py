"""Every example under examples/python runs (with the interpreter and package under test)."""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
# flower_robust.py runs in the Flower tests; torch_*.py are cluster nodes (test_torch_node.py
# runs them under python -m ballot.torch.run).
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py")
                 if p.name != "flower_robust.py" and not p.name.startswith("torch_"))


def test_there_are_examples():
    assert len(SCRIPTS) >= 3, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script):
    result = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
