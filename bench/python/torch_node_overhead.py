"""Per-round overhead of a Python-driven node (ballot.torch) over the C++ node, d ≈ 11 M.

Two local clusters of the same size run the same number of rounds in this one script:

* C++: `ballot train --model synthetic:d=D`: every node is `ballot node`, whose model's gradient
  costs one pass over the parameters;
* torch: `python -m ballot.torch.run` with a one-tensor torch model of D parameters whose
  `step` also costs one pass (loss = <w, c>, gradient c).

Both vote signs through the identity code with Signum (the worker momentum), so the server, the
protocol and the C++ fold are the same; the difference is what the Python node adds per round:
zeroing the flat gradient, torch's backward bookkeeping, the NaN/Inf check, and the Python calls.
With `--rule R --codec C` both take the gradient path instead (the node's gradient through codec C,
the server's rule R; ballot.torch's RobustGradient, the cluster's default there).
Reported: the median seconds per round of each (from the metrics files, rounds 3..end), their
difference, the part of it that is the torch model's own forward/backward over the C++ model's
one pass (measured here), and what is left, the node's overhead, in passes over the D floats at
numpy's read bandwidth on this machine (the physical unit: one pass over 4·D bytes). With one
node (`--nodes 1`, the default) nothing else shares the cores.

    PYTHONPATH=build/default/python build/venv/bin/python bench/python/torch_node_overhead.py \\
        [--ballot build/release/apps/ballot] [--d 11000000] [--nodes 3] [--rounds 25] \\
        [--rule mean --codec gtopk:ratio=0.01]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SCRIPT = r'''
import os, sys, torch
import ballot.torch as bt
torch.set_num_threads(1)
d = int(os.environ["BENCH_D"])
model = torch.nn.Module()
model.w = torch.nn.Parameter(torch.zeros(d))
c = torch.linspace(-1.0, 1.0, d)
node = bt.Node(model, examples=4096)
node.run(lambda idx: (model.w * c).sum())
'''


def seconds_per_round(metrics_path):
    rows = [json.loads(line) for line in open(metrics_path)]
    return statistics.median(row["seconds"] for row in rows[3:]) if len(rows) > 4 else float("nan")


def torch_step_seconds(d):
    """The torch script's own forward/backward per round (what the C++ model does in one pass)."""
    import torch
    torch.set_num_threads(1)
    w = torch.nn.Parameter(torch.zeros(d))
    w.grad = torch.zeros(d)
    c = torch.linspace(-1.0, 1.0, d)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        (w * c).sum().backward()
        best = min(best, time.perf_counter() - t)
    return best


def pass_seconds(d):
    x = np.ones(d, dtype=np.float32)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        float(x.sum())
        best = min(best, time.perf_counter() - t)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ballot", default="build/release/apps/ballot")
    parser.add_argument("--d", type=int, default=11_000_000)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--rule", default="vote", help="vote (the sign path) or a robust rule (the gradient path)")
    parser.add_argument("--codec", default="fp32", help="the gradient path's codec")
    args = parser.parse_args()
    common = ["--nodes", str(args.nodes), "--byzantine", "0", "--code", "identity", "--rounds", str(args.rounds),
              "--attackers", "0", "--deadline-ms", "60000", "--checkpoint-every", "100000", "--eval-every", "0",
              "--rule", args.rule, "--codec", args.codec]
    with tempfile.TemporaryDirectory() as work:
        cpp = os.path.join(work, "cpp")
        subprocess.run([args.ballot, "train", *common, "--model", f"synthetic:d={args.d}",
                        "--data", "synthetic:examples=4096,features=8", "--work-dir", cpp],
                       check=True, stdout=subprocess.DEVNULL)
        script = os.path.join(work, "node.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        torch_dir = os.path.join(work, "torch")
        subprocess.run([sys.executable, "-m", "ballot.torch.run", "--ballot", args.ballot, *common, "--work-dir",
                        torch_dir, script], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "BENCH_D": str(args.d)})
        a = seconds_per_round(os.path.join(cpp, "metrics.jsonl"))
        b = seconds_per_round(os.path.join(torch_dir, "metrics.jsonl"))
    one_pass = pass_seconds(args.d)
    step = torch_step_seconds(args.d)
    path = "the sign vote" if args.rule == "vote" else f"rule {args.rule}, codec {args.codec}"
    print(f"d = {args.d}, {args.nodes} nodes on this machine, {path}, {args.rounds} rounds (median of rounds 3..)")
    print(f"C++ nodes:   {a * 1e3:8.1f} ms/round")
    print(f"torch nodes: {b * 1e3:8.1f} ms/round  ({b / a:.2f}x, difference {(b - a) * 1e3:.1f} ms)")
    print(f"beside it: the torch model's own forward/backward {step * 1e3:.1f} ms per partition; the C++ synthetic "
          f"model's gradient is one pass ({one_pass * 1e3:.1f} ms at {4 * args.d / one_pass / 1e9:.1f} GB/s)")
    # The identity code gives each node one partition a round: what the torch model costs over the
    # C++ model's pass is taken off the difference, and the rest is the node's own overhead.
    left = (b - a) - (step - one_pass)
    print(f"the node's overhead: {left * 1e3:.1f} ms per round, {left / one_pass:.1f} passes over the {args.d} floats")


if __name__ == "__main__":
    main()
