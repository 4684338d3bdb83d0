"""The vote sent during backward (SignVote(pieces=k), BAGUA's overlap) against the vote sent
after it, when the network is the bottleneck.

A local cluster of `python -m ballot.torch.run` nodes trains a torch MLP (the script below) with
the identity code and Signum; the same cluster runs once with the vote whole after backward
(pieces = 0) and once with it in k pieces, each sent as soon as backward has produced the
gradients of its parameters, alternately, `--repeat` times each. As root, the whole cluster runs
in a network namespace whose loopback is shaped to `--rate` with tc's token bucket (every byte of
every vote and decision crosses it once: the shared link of a small cluster); without root, or
with `--rate none`, on the plain loopback.

Reported per run: the median seconds per round (metrics.jsonl, rounds 3..end), and beside it the
two things that can overlap: one node's backward (measured here, one thread) and the time the
link needs for the round's votes (n · ⌈d/64⌉ · 8 bytes at the rate). The saving cannot exceed the
smaller of the two.

    PYTHONPATH=build/default/python build/venv/bin/python bench/python/torch_overlap.py \\
        [--ballot build/release/apps/ballot] [--rate 100mbit] [--nodes 2] [--pieces 16] [--rounds 20]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = r'''
import os, sys, torch
import torch.nn.functional as F
import ballot.torch as bt
torch.set_num_threads(1)
width, depth = int(os.environ["BENCH_WIDTH"]), int(os.environ["BENCH_DEPTH"])
layers = [torch.nn.Linear(784, width)] + [torch.nn.Linear(width, width) for _ in range(depth)] + [torch.nn.Linear(width, 10)]
model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.ReLU())][:-1])
g = torch.Generator().manual_seed(1)
x, y = torch.randn(4096, 784, generator=g), torch.randint(0, 10, (4096,), generator=g)
node = bt.Node(model, examples=4096, algorithm=bt.SignVote(pieces=int(os.environ["BENCH_PIECES"])))
stats = node.run(lambda idx: F.cross_entropy(model(x[idx]), y[idx]))
print("vote pieces sent:", stats["vote_pieces_sent"], flush=True)
'''

NAMESPACE = "ballot-overlap"


def seconds_per_round(metrics_path):
    rows = [json.loads(line) for line in open(metrics_path)]
    return statistics.median(row["seconds"] for row in rows[3:]) if len(rows) > 4 else float("nan")


def backward_seconds(width, depth, batch):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    layers = [torch.nn.Linear(784, width)] + [torch.nn.Linear(width, width) for _ in range(depth)]
    layers.append(torch.nn.Linear(width, 10))
    model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.ReLU())][:-1])
    x, y = torch.randn(batch, 784), torch.randint(0, 10, (batch,))
    forward = backward = float("inf")
    for _ in range(5):
        model.zero_grad()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        forward, backward = min(forward, t1 - t0), min(backward, t2 - t1)
    return forward, backward, sum(p.numel() for p in model.parameters())


def rate_bits(rate):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return float(rate[:-len(unit)]) * factor
    return float(rate)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ballot", default="build/release/apps/ballot")
    parser.add_argument("--rate", default="100mbit", help="tc rate of the namespace's loopback, or 'none'")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--pieces", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--partition-size", type=int, default=64)
    args = parser.parse_args()
    shaped = args.rate != "none" and os.geteuid() == 0
    prefix = []
    if shaped:
        subprocess.run(["ip", "netns", "del", NAMESPACE], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "netns", "add", NAMESPACE], check=True)
        # An Ethernet MTU: the token bucket never passes a packet larger than its burst, and
        # loopback's own MTU (64 KiB) is as large as the burst.
        subprocess.run(["ip", "netns", "exec", NAMESPACE, "ip", "link", "set", "lo", "up", "mtu", "1500"], check=True)
        subprocess.run(["ip", "netns", "exec", NAMESPACE, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                        args.rate, "burst", "64kb", "latency", "400ms"], check=True)
        prefix = ["ip", "netns", "exec", NAMESPACE]
    common = ["--nodes", str(args.nodes), "--byzantine", "0", "--code", "identity", "--rounds", str(args.rounds),
              "--attackers", "0", "--deadline-ms", "60000", "--checkpoint-every", "100000", "--eval-every", "0",
              "--partition-size", str(args.partition_size)]
    results = {0: [], args.pieces: []}
    try:
        with tempfile.TemporaryDirectory() as work:
            script = os.path.join(work, "node.py")
            with open(script, "w") as f:
                f.write(SCRIPT)
            for repeat in range(args.repeat):
                for pieces in (0, args.pieces):
                    run_dir = os.path.join(work, f"p{pieces}-{repeat}")
                    env = {**os.environ, "BENCH_WIDTH": str(args.width), "BENCH_DEPTH": str(args.depth),
                           "BENCH_PIECES": str(pieces)}
                    subprocess.run([*prefix, sys.executable, "-m", "ballot.torch.run", "--ballot", args.ballot,
                                    *common, "--work-dir", run_dir, script], check=True, stdout=subprocess.DEVNULL,
                                   env=env)
                    log = open(os.path.join(run_dir, "node-0.log")).read()
                    assert ("vote pieces sent: 0" in log) == (pieces == 0), log[-2000:]
                    results[pieces].append(seconds_per_round(os.path.join(run_dir, "metrics.jsonl")))
    finally:
        if shaped:
            subprocess.run(["ip", "netns", "del", NAMESPACE])
    forward, backward, d = backward_seconds(args.width, args.depth, args.partition_size)
    vote_bytes = args.nodes * 8 * ((d + 63) // 64)
    link = vote_bytes * 8 / rate_bits(args.rate) if shaped else float("nan")
    print(f"d = {d}, {args.nodes} nodes, partition {args.partition_size}, {args.rounds} rounds "
          f"(median of rounds 3..), link: {args.rate if shaped else 'loopback, unshaped'}")
    print(f"one node's forward {forward * 1e3:.1f} ms, backward {backward * 1e3:.1f} ms (one thread); "
          f"the round's votes on the link: {vote_bytes / 1e6:.2f} MB = {link * 1e3:.1f} ms")
    for pieces, seconds in results.items():
        label = "whole, after backward" if pieces == 0 else f"{pieces} pieces during backward"
        print(f"vote {label:30s}: " + ", ".join(f"{s * 1e3:.1f}" for s in seconds) + " ms/round")
    whole, split = statistics.median(results[0]), statistics.median(results[args.pieces])
    print(f"saved {(whole - split) * 1e3:.1f} ms/round ({split / whole:.3f}x); bound: min(backward, link) = "
          f"{min(backward, link) * 1e3 if shaped else backward * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
