"""`pip install .` from the repository root into a fresh venv (no system site packages), then an
example, help() and the `ballot` program from the wheel — with Debian's Python and with the oldest
Python the package supports (3.9, where the machine has one), which also runs the torch-free
suites against the installed package. Builds the whole C++ library (served by ccache from the
default build's objects where it can): minutes, so it runs only when BALLOT_TEST_PACKAGING=1
(scripts/test.sh sets it)."""

import os
import pathlib
import shutil
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


def oldest_supported_python():
    """An interpreter of the oldest Python the package supports (requires-python), if this machine
    has one: on PATH or in pyenv's versions."""
    candidates = [str(p) for p in sorted(pathlib.Path(os.path.expanduser("~/.pyenv/versions")).glob("3.9.*/bin/python3.9"))]
    candidates += [found for found in [shutil.which("python3.9")] if found]  # a pyenv shim may not run: try it
    for candidate in candidates:
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def test_pip_install_into_a_fresh_venv(tmp_path):
    install_and_check(tmp_path, "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)


def test_the_oldest_supported_python(tmp_path):
    """The same on Python 3.9 (requires-python = ">=3.9"), then the suites of the modules that need
    no torch, against the installed package."""
    python = oldest_supported_python()
    if python is None:
        pytest.skip("no Python 3.9 on this machine (on PATH or in ~/.pyenv)")
    venv = install_and_check(tmp_path, python)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest", env=env,
        timeout=600)
    tests = ROOT / "tests" / "python"
    out = run(venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
              *(tests / name for name in ("test_signs.py", "test_robust.py", "test_codecs.py", "test_election.py",
                                          "test_attacks.py", "test_session.py")),
              env=env, cwd=tmp_path, timeout=1200)
    assert " passed" in out and "failed" not in out, out[-3000:]


def install_and_check(tmp_path, interpreter):
    """`pip install .` into a fresh venv of `interpreter`, then the checks; returns the venv."""
    venv = tmp_path / "venv"
    run(interpreter, "-m", "venv", venv)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Built as the default preset builds (RelWithDebInfo, the wheel stripped; the compilers CMake
    # finds, not the ones scikit-build-core reads from sysconfig) in a build folder as deep as
    # build/default, so that ccache serves the library's objects that build compiled: the package's
    # own Release build would compile every file once more (10 min on 2 cores).
    env.setdefault("CC", "cc")
    env.setdefault("CXX", "c++")
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
        "--config-settings=cmake.build-type=RelWithDebInfo", "--config-settings=build-dir=build/wheel-{wheel_tag}",
        str(ROOT), env=env, timeout=3000)

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
    return venv
