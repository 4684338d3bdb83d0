"""Shared fixtures of the Python tests. The package under test is the one on sys.path: the build
tree's (PYTHONPATH=<build>/python, as scripts/test.sh sets it) or an installed one."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def torch_or_skip():
    return pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
