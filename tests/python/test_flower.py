"""ballot.flower: Flower strategies with Ballot's robust rules, against the real flwr package.

Needs Flower (flwr 1.42, with Ray for the simulation): run in the environment that
scripts/python_flower_env.sh makes,

    PYTHONPATH=build/default/python build/venv-flower/bin/python -m pytest -q tests/python/test_flower.py

Elsewhere (the main test venv has no flwr) the whole module is skipped.
"""

import math
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="flwr is not installed (bash scripts/python_flower_env.sh makes build/venv-flower)")

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, Metadata, MetricRecord, RecordDict  # noqa: E402
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays  # noqa: E402

from ballot.flower import LegacyRobustStrategy, RobustStrategy  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


# ---- unit level: the strategy's aggregate_train on hand-made replies --------------------------

def reply(node_id, arrays, num_examples=10):
    """A train reply from node_id, as a ClientApp's Message reaches the ServerApp."""
    content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in arrays.items()}),
                          "metrics": MetricRecord({"num-examples": num_examples, "loss": 1.0})})
    metadata = Metadata(run_id=1, message_id=f"reply-{node_id}", src_node_id=node_id, dst_node_id=0,
                        reply_to_message_id=f"ins-{node_id}", group_id="", created_at=time.time(),
                        ttl=60.0, message_type="train")
    return Message(content=content, metadata=metadata)


class StubGrid:
    """Just enough of a Grid for FedAvg.configure_train (node IDs to sample)."""

    def __init__(self, node_ids):
        self.node_ids = list(node_ids)

    def get_node_ids(self):
        return self.node_ids


def model(w, b):
    return {"w": np.full((2, 3), w, np.float32), "b": np.full(2, b, np.float32)}


def test_mismatched_shapes_and_dtypes_are_rejected_not_fatal():
    strategy = RobustStrategy("trimmed_mean:f=1", delta=False)
    replies = [
        reply(1, model(1.0, 0.0)),
        reply(2, model(2.0, 1.0)),
        reply(3, model(3.0, 2.0)),
        reply(4, {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}),   # shape
        reply(5, {"w": np.ones((2, 3), np.float64), "b": np.zeros(2, np.float32)}),   # dtype
        reply(6, {"w": np.ones((2, 3), np.float32)}),                                 # names
        reply(7, {k: v * 1e6 for k, v in model(1.0, 1.0).items()}, num_examples=10**9),
    ]
    arrays, metrics = strategy.aggregate_train(1, replies)
    report = strategy.reports[1]
    assert sorted(report.rejected) == [4, 5, 6]
    assert "shape (3, 2)" in report.rejected[4] and "float64" in report.rejected[5]
    assert report.accepted == [1, 2, 3, 7]
    # trimmed mean of 1, 2, 3, 1e6 (f=1): mean of 2 and 3; the example counts play no part
    np.testing.assert_allclose(arrays["w"].numpy(), np.full((2, 3), 2.5, np.float32))
    np.testing.assert_allclose(arrays["b"].numpy(), np.full(2, 1.5, np.float32))
    assert arrays["w"].numpy().dtype == np.float32 and arrays["w"].numpy().shape == (2, 3)
    assert metrics["ballot-rejected"] == 3 and metrics["ballot-accepted"] == 4
    assert list(metrics["ballot-rejected-nodes"]) == [4, 5, 6]
    assert "loss" in metrics                         # Flower's metric aggregation still runs


def test_delta_mode_uses_the_global_model_and_non_finite_updates_never_win(monkeypatch):
    from flwr.supercore.task_identity import TaskIdentity   # what a running ServerApp has set
    for attribute, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, attribute, value)
    strategy = RobustStrategy("median", min_available_nodes=5, min_train_nodes=5)
    global_arrays = ArrayRecord({k: Array(v) for k, v in model(10.0, 10.0).items()})
    messages = list(strategy.configure_train(1, global_arrays, ConfigRecord(), StubGrid(range(1, 6))))
    assert len(messages) == 5
    updates = [model(10.0 + d, 10.0 - d) for d in (1.0, 1.5, 2.0)]
    updates.append({k: np.full_like(v, np.nan) for k, v in model(0, 0).items()})
    updates.append({k: np.full_like(v, np.inf) for k, v in model(0, 0).items()})
    arrays, metrics = strategy.aggregate_train(1, [reply(i + 1, u) for i, u in enumerate(updates)])
    np.testing.assert_allclose(arrays["w"].numpy(), np.full((2, 3), 11.5, np.float32))
    np.testing.assert_allclose(arrays["b"].numpy(), np.full(2, 8.5, np.float32))
    assert strategy.reports[1].non_finite == [4, 5]
    assert metrics["ballot-non-finite"] == 2 and list(metrics["ballot-non-finite-nodes"]) == [4, 5]


def _round_one(monkeypatch, strategy, global_model, node_ids):
    from flwr.supercore.task_identity import TaskIdentity   # what a running ServerApp has set
    for attribute, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, attribute, value)
    global_arrays = ArrayRecord({k: Array(v) for k, v in global_model.items()})
    return list(strategy.configure_train(1, global_arrays, ConfigRecord(), StubGrid(node_ids)))


def test_a_zero_dimensional_array_keeps_its_shape_and_unmoved_values_stay_exact(monkeypatch):
    """A BatchNorm's num_batches_tracked is 0-d: it came back 1-d, and from the next round on every
    client (which sends it 0-d) was refused. A parameter no client moves comes back as it was (the
    global model is not passed through float32)."""
    strategy = RobustStrategy("median", min_available_nodes=3, min_train_nodes=3)
    start = {"w": np.array([0.1, 1.000000001]), "steps": np.array(2**25 + 1, np.int64)}
    _round_one(monkeypatch, strategy, start, [1, 2, 3])
    updates = [{"w": start["w"] + [d, 0.0], "steps": np.array(2**25 + 1 + i, np.int64)}
               for i, d in enumerate((0.5, 1.0, 1.5))]
    arrays, _ = strategy.aggregate_train(1, [reply(i + 1, u) for i, u in enumerate(updates)])
    steps = arrays["steps"].numpy()
    assert steps.shape == () and steps.dtype == np.int64 and int(steps) == 2**25 + 2
    w = arrays["w"].numpy()
    assert w.dtype == np.float64 and w[1] == 1.000000001
    np.testing.assert_allclose(w[0], 1.1)


def test_every_update_non_finite_is_reported_as_such(monkeypatch):
    strategy = RobustStrategy("median", min_available_nodes=2, min_train_nodes=2)
    _round_one(monkeypatch, strategy, model(1.0, 1.0), [1, 2])
    bad = {k: np.full_like(v, np.nan) for k, v in model(0, 0).items()}
    arrays, metrics = strategy.aggregate_train(1, [reply(1, bad), reply(2, bad)])
    assert arrays is None and strategy.reports[1].error
    assert metrics["ballot-non-finite"] == 2


def evaluate_reply(node_id, metrics):
    content = RecordDict({"metrics": MetricRecord(metrics)})
    metadata = Metadata(run_id=1, message_id=f"eval-{node_id}", src_node_id=node_id, dst_node_id=0,
                        reply_to_message_id=f"ins-{node_id}", group_id="", created_at=time.time(),
                        ttl=60.0, message_type="evaluate")
    return Message(content=content, metadata=metadata)


def test_a_malformed_evaluate_reply_does_not_stop_the_run():
    """FedAvg's evaluation raised on one reply without num-examples, or with a count summing to 0."""
    strategy = RobustStrategy("median")
    honest = evaluate_reply(1, {"num-examples": 10, "acc": 0.9})
    assert strategy.aggregate_evaluate(1, [honest, evaluate_reply(2, {"acc": 0.1})]) is None
    assert strategy.aggregate_evaluate(2, [honest, evaluate_reply(2, {"num-examples": -10, "acc": 0.1})]) is None
    metrics = strategy.aggregate_evaluate(3, [honest, evaluate_reply(2, {"num-examples": 10, "acc": 0.5})])
    assert math.isclose(metrics["acc"], 0.7)
    legacy = LegacyRobustStrategy("median")
    from flwr.common import EvaluateRes
    bad = [(types.SimpleNamespace(cid="1"), EvaluateRes(Status(Code.OK, ""), 1.0, 10, {})),
           (types.SimpleNamespace(cid="2"), EvaluateRes(Status(Code.OK, ""), 1.0, -10, {}))]
    assert legacy.aggregate_evaluate(1, bad, []) == (None, {})


def test_delta_mode_without_a_global_model_says_so():
    with pytest.raises(ValueError, match="global model"):
        RobustStrategy("median").aggregate_train(1, [reply(1, model(1, 1)), reply(2, model(2, 2))])


def test_too_few_usable_updates_keep_the_global_model():
    strategy = RobustStrategy("trimmed_mean:f=2", delta=False)
    arrays, metrics = strategy.aggregate_train(1, [reply(i, model(i, i)) for i in range(1, 4)])
    assert arrays is None                            # Strategy.start keeps the current model
    assert "n >= " in strategy.reports[1].error or "precondition" in strategy.reports[1].error.lower()
    assert metrics["ballot-accepted"] == 3


def test_unknown_rule_is_a_value_error():
    with pytest.raises(ValueError):
        RobustStrategy("no_such_rule")


def test_legacy_aggregate_fit():
    strategy = LegacyRobustStrategy("median", delta=False)
    ok = Status(code=Code.OK, message="")

    def result(cid, ndarrays, n=10):
        return (types.SimpleNamespace(cid=cid),
                FitRes(status=ok, parameters=ndarrays_to_parameters(ndarrays), num_examples=n,
                       metrics={}))

    results = [result(str(i), [np.full(3, i, np.float32), np.full((2, 2), -i, np.float32)])
               for i in range(1, 5)]
    results.append(result("nan", [np.full(3, np.nan, np.float32), np.zeros((2, 2), np.float32)]))
    results.append(result("bad", [np.zeros(4, np.float32), np.zeros((2, 2), np.float32)], 10**6))
    parameters, metrics = strategy.aggregate_fit(1, results, [])
    w, v = parameters_to_ndarrays(parameters)
    np.testing.assert_allclose(w, np.full(3, 2.5))
    np.testing.assert_allclose(v, np.full((2, 2), -2.5))
    assert metrics["ballot-rejected-nodes"] == "bad" and metrics["ballot-non-finite-nodes"] == "nan"


# ---- a real Flower simulation (ServerApp in process, ClientApps on Ray) -----------------------

@pytest.fixture
def example(monkeypatch):
    """The example module (its ClientApp and ServerApp): importable here and, through
    PYTHONPATH, in the Ray workers that run the ClientApps."""
    pytest.importorskip("ray", reason="the Flower simulation needs Ray: pip install 'flwr[simulation]'")
    path = os.pathsep.join(p for p in [str(EXAMPLES), os.environ.get("PYTHONPATH", "")] if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import flower_robust
    return flower_robust


def test_simulation_fedavg_is_ruined_robust_rules_converge(example):
    rounds, clients = 5, 7
    results = example.run(["trimmed_mean:f=2", "median"], rounds=rounds, clients=clients)
    assert set(results) == {"FedAvg", "RobustStrategy('trimmed_mean:f=2')", "RobustStrategy('median')"}
    fedavg = results["FedAvg"]["mse"]
    assert not math.isfinite(fedavg) or fedavg > 1.0, fedavg
    floor = example.NOISE ** 2
    for name in ("RobustStrategy('trimmed_mean:f=2')", "RobustStrategy('median')"):
        assert results[name]["mse"] < 3 * floor, (name, results[name]["mse"])
        reports = results[name]["strategy"].reports
        assert sorted(reports) == list(range(1, rounds + 1))
        for report in reports.values():
            assert len(report.accepted) == clients and not report.rejected
            assert len(report.non_finite) == 1       # partition 1 sends NaN every round


def test_example_script_runs():
    pytest.importorskip("ray", reason="the Flower simulation needs Ray: pip install 'flwr[simulation]'")
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "flower_robust.py"), "--rounds", "2", "--rules", "median"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    fedavg = next(line for line in lines if line.strip().startswith("FedAvg"))
    median = next(line for line in lines if "RobustStrategy('median')" in line)
    assert "ruined" in fedavg
    assert "mse =" in median and "nan" not in median
