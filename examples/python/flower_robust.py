#!/usr/bin/env python3
"""Byzantine clients in a Flower simulation: FedAvg against Ballot's robust rules.

A real in-process Flower 1.42 simulation (``flwr.simulation.run_simulation``: the ServerApp runs
in this process, the ClientApps on the Ray backend) of federated linear regression on synthetic
data. Of the clients, two are Byzantine: partition 0 sends its honest update flipped and scaled
by -20, partition 1 sends NaN. One ServerApp runs the same federation once per strategy, Flower's
FedAvg and then :class:`ballot.flower.RobustStrategy` with each rule, and the held-out mean
squared error of every final model is printed. FedAvg is ruined; the robust rules converge to
about the noise floor (NOISE**2 = 0.01).

Run (from the repository root, in the Flower environment of scripts/python_flower_env.sh):

    PYTHONPATH=build/default/python build/venv-flower/bin/python examples/python/flower_robust.py \
        --rounds 5 --rules "trimmed_mean:f=2" "median" "nnm:f=2 > krum:f=2"
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, Strategy

DIM = 10            # features (plus a bias)
SAMPLES = 100       # per client
NOISE = 0.1         # label noise: the best possible MSE is NOISE**2
LOCAL_STEPS = 10    # local gradient steps per round
LEARNING_RATE = 0.2
BYZANTINE = {0: "flip x20", 1: "NaN"}   # partition id -> attack


def true_model() -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(2024)
    return {"w": rng.standard_normal(DIM).astype(np.float32), "b": np.float32([0.5])}


def dataset(seed: int, samples: int = SAMPLES):
    """Synthetic regression data: x ~ N(0, I), y = x.w* + b* + noise."""
    rng = np.random.default_rng(seed)
    model = true_model()
    x = rng.standard_normal((samples, DIM)).astype(np.float32)
    y = x @ model["w"] + model["b"][0] + NOISE * rng.standard_normal(samples).astype(np.float32)
    return x, y.astype(np.float32)


def mse(arrays: ArrayRecord, x: np.ndarray, y: np.ndarray) -> float:
    w, b = arrays["w"].numpy(), arrays["b"].numpy()
    with np.errstate(all="ignore"):
        return float(np.mean((x @ w + b[0] - y) ** 2))


# ---- the ClientApp -------------------------------------------------------------------------------

client_app = ClientApp()


@client_app.train()
def train(message: Message, context: Context) -> Message:
    """Local gradient descent from the global model; partitions in BYZANTINE attack instead."""
    partition = int(context.node_config["partition-id"])
    arrays = message.content["arrays"]
    w0, b0 = arrays["w"].numpy().copy(), arrays["b"].numpy().copy()
    x, y = dataset(seed=1000 + partition)
    w, b = w0.copy(), b0.copy()
    for _ in range(LOCAL_STEPS):
        residual = x @ w + b[0] - y
        w -= LEARNING_RATE * (x.T @ residual) / len(y)
        b -= LEARNING_RATE * np.float32(residual.mean())
    attack = BYZANTINE.get(partition)
    if attack == "flip x20":
        w, b = w0 - 20 * (w - w0), b0 - 20 * (b - b0)
    elif attack == "NaN":
        w, b = np.full_like(w, np.nan), np.full_like(b, np.nan)
    reply = RecordDict({
        "arrays": ArrayRecord({"w": Array(w.astype(np.float32)), "b": Array(b.astype(np.float32))}),
        "metrics": MetricRecord({"num-examples": len(y)}),
    })
    return Message(content=reply, reply_to=message)


# ---- the ServerApp -------------------------------------------------------------------------------

def make_server_app(strategies: Dict[str, Strategy], rounds: int, results: Dict[str, dict]
                    ) -> ServerApp:
    """A ServerApp that runs every strategy in turn on the same federation, from the same initial
    model, and records each one's final held-out MSE (and the strategy) in ``results``."""
    server_app = ServerApp()
    x_test, y_test = dataset(seed=7, samples=1000)

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        for name, strategy in strategies.items():
            initial = ArrayRecord({"w": Array(np.zeros(DIM, np.float32)),
                                   "b": Array(np.zeros(1, np.float32))})
            started = time.perf_counter()
            result = strategy.start(
                grid=grid, initial_arrays=initial, num_rounds=rounds,
                evaluate_fn=lambda rnd, arrays: MetricRecord({"mse": mse(arrays, x_test, y_test)}))
            final = result.evaluate_metrics_serverapp[rounds]["mse"]
            results[name] = {"mse": final, "seconds": time.perf_counter() - started,
                             "strategy": strategy}

    return server_app


def run(rules: Sequence[str], rounds: int, clients: int = 7,
        results: Optional[Dict[str, dict]] = None) -> Dict[str, dict]:
    """Runs FedAvg and RobustStrategy(rule) for each rule in one Flower simulation; returns
    {strategy name: {"mse": final held-out MSE, "seconds": ..., "strategy": ...}}."""
    from flwr.simulation import run_simulation

    from ballot.flower import RobustStrategy

    # Every strategy waits for all clients and trains on all of them each round (without
    # min_available_nodes, the first round may start before the simulated nodes registered).
    sampling = dict(fraction_evaluate=0.0, min_train_nodes=clients, min_available_nodes=clients)
    strategies: Dict[str, Strategy] = {"FedAvg": FedAvg(**sampling)}
    for rule in rules:
        strategies[f"RobustStrategy({rule!r})"] = RobustStrategy(rule, **sampling)
    results = {} if results is None else results
    run_simulation(
        server_app=make_server_app(strategies, rounds, results),
        client_app=client_app,
        num_supernodes=clients,
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                        "init_args": {"num_cpus": min(2, os.cpu_count() or 1)}},
    )
    return results


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=7)
    parser.add_argument("--rules", nargs="+", default=["trimmed_mean:f=2", "median"])
    args = parser.parse_args(argv)

    started = time.perf_counter()
    results = run(args.rules, args.rounds, args.clients)
    print(f"\n{args.clients} clients, {len(BYZANTINE)} Byzantine "
          f"({', '.join(f'partition {p}: {a}' for p, a in BYZANTINE.items())}), "
          f"{args.rounds} rounds; held-out MSE (noise floor {NOISE ** 2:.3g}):")
    for name, result in results.items():
        verdict = "converged" if math.isfinite(result["mse"]) and result["mse"] < 0.1 else "ruined"
        print(f"  {name:42s} mse = {result['mse']:<12.4g} {verdict:10s} ({result['seconds']:.1f} s)")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0 if len(results) == 1 + len(args.rules) else 1


if __name__ == "__main__":
    sys.exit(main())
