"""The cost of calling a Ballot rule from Python over calling it from C++.

Small inputs (n = 5, d = 16): per-call time of ``Aggregator(spec)(vectors)`` (and of the
``ballot.compat.byzfl`` class) minus the C++ time of the same aggregation, measured inside the
module in the same run (``Aggregator._native.time_aggregate``). Target: <= 10 us per call.
Large inputs (n = 25, d = 10^6): Python-call time / C++ time. Target: <= 1.1x.
The floor is the C++ call itself (the same aggregation without Python): the small-input number is
Python's overhead above it, the large-input ratio how close the Python call comes to it (1.0x).

    PYTHONPATH=build/default/python build/venv/bin/python bench/python/call_overhead.py [--quick]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from ballot import robust  # noqa: E402
from ballot.compat import byzfl as compat  # noqa: E402

SMALL_SPECS = ["mean", "median", "trimmed_mean:f=1", "krum:f=1", "multi_krum:f=1,m=3", "nnm:f=1 > mean"]
LARGE_SPECS = ["mean", "median:f=5", "trimmed_mean:f=5", "krum:f=5", "geometric_median:f=5"]
COMPAT = {"mean": compat.Average(), "median": compat.Median(), "trimmed_mean:f=1": compat.TrMean(f=1),
          "krum:f=1": compat.Krum(f=2), "multi_krum:f=1,m=3": compat.MultiKrum(f=2)}


def per_call(fn, calls, batches):
    """Minimum over batches of the mean time per call (seconds)."""
    best = float("inf")
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def cpp_per_call(rule, vectors, calls, batches):
    return min(float(np.mean(rule._native.time_aggregate(vectors, calls))) for _ in range(batches))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and rules")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    calls, batches = (2000, 3) if args.quick else (20000, 7)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}  (os.getloadavg, 1/5/15 min)")

    print("\n## Small inputs: n = 5, d = 16 (microseconds per call)\n")
    print("| spec | input | C++ | Python Aggregator | overhead | target <= 10 us | compat.byzfl class | compat overhead |")
    print("|---|---|---:|---:|---:|---|---:|---:|")
    x = rng.standard_normal((5, 16)).astype(np.float32)
    inputs = {"2-D numpy": x, "list of 5 numpy": list(x)}
    try:
        import torch

        inputs["list of 5 torch"] = list(torch.from_numpy(x.copy()))
    except ImportError:
        pass
    for spec in SMALL_SPECS[:3] if args.quick else SMALL_SPECS:
        rule = robust.Aggregator(spec)
        for label, vectors in inputs.items():
            cpp = cpp_per_call(rule, vectors, calls, batches)
            py = per_call(lambda: rule(vectors), calls, batches)
            over = (py - cpp) * 1e6
            line = f"| {spec} | {label} | {cpp * 1e6:.2f} | {py * 1e6:.2f} | {over:.2f} | {'met' if over <= 10 else 'NOT met'} |"
            if spec in COMPAT:
                c = per_call(lambda: COMPAT[spec](vectors), calls, batches)
                line += f" {c * 1e6:.2f} | {(c - cpp) * 1e6:.2f} |"
            else:
                line += " — | — |"
            print(line, flush=True)

    n, d = 25, 10 ** 6
    reps = 3 if args.quick else 10
    print(f"\n## Large inputs: n = {n}, d = 10^6 (milliseconds, minimum of {reps})\n")
    print("| spec | input | C++ | Python | ratio | target <= 1.1x |")
    print("|---|---|---:|---:|---:|---|")
    big = rng.standard_normal((n, d)).astype(np.float32)
    for spec in LARGE_SPECS[:2] if args.quick else LARGE_SPECS:
        rule = robust.Aggregator(spec)
        for label, vectors in (("2-D numpy", big), ("list of 25 numpy", list(big))):
            rule(vectors)  # warm up (page faults of the output, caches)
            cpp = min(rule._native.time_aggregate(vectors, reps))
            py = min(per_call(lambda: rule(vectors), 1, 1) for _ in range(reps))
            ratio = py / cpp
            print(f"| {spec} | {label} | {cpp * 1e3:.2f} | {py * 1e3:.2f} | {ratio:.3f} | {'met' if ratio <= 1.1 else 'NOT met'} |",
                  flush=True)


if __name__ == "__main__":
    main()
