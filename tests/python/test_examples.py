"""Every example under examples/python runs (with the interpreter and package under test)."""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if p.name != "flower_robust.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script):
    result = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
