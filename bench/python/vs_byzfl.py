"""Ballot (ballot.compat.byzfl) vs ByzFL 0.0.11 on the same tensors, in the same run, one thread.

For every rule both libraries have, at the sizes of the robust benchmark (n = 10, 25, 100;
d = 10^5, 10^6; f = (n - 3) // 4 as there), the minimum over repetitions of one call of ByzFL's
class and of ballot.compat.byzfl's class with the same constructor arguments, on one 2-D float32
torch tensor. torch.set_num_threads(1); Ballot runs with its default threads=1; numpy's BLAS is
limited to one thread. Targets: speed-up >= 10x for rules that read the n x d input more than
once in ByzFL, >= 1x for the rest.

    PYTHONPATH=build/default/python build/venv/bin/python bench/python/vs_byzfl.py [--quick]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import byzfl  # noqa: E402
from ballot import robust  # noqa: E402
from ballot.compat import byzfl as compat  # noqa: E402

# name, constructor arguments for (n, f), passes of ByzFL over the n x d input, largest n to run
# ByzFL at (None: all), Ballot registry rule that must exist.
RULES = [
    ("Average", lambda n, f: {}, "1 (mean)", None, None),
    ("Median", lambda n, f: {}, ">1 (quantile sorts)", None, None),
    ("TrMean", lambda n, f: {"f": f}, ">1 (sort, mean)", None, None),
    ("Meamed", lambda n, f: {"f": f}, ">1 (quantile, |x - med|, top-k, gather, mean)", None, None),
    ("Krum", lambda n, f: {"f": f}, "1 (cdist)", None, None),
    ("MultiKrum", lambda n, f: {"f": f}, "2 (cdist, mean of n - f)", None, None),
    ("GeometricMedian", lambda n, f: {}, ">1 (3 x (diff, norm, weighted sum))", None, None),
    ("CenteredClipping", lambda n, f: {}, ">1 (diff, norm, scale, mean)", None, None),
    ("MDA", lambda n, f: {"f": f}, "2 (cdist, mean) + C(n, f) subsets in Python", 25, None),
    ("MoNNA", lambda n, f: {"f": f}, "2 (distances, mean)", None, "monna"),
    ("CAF", lambda n, f: {"f": f}, ">1 (iterative filter)", None, "caf"),
    ("SMEA", lambda n, f: {"f": f}, ">1 (C(n, f) subsets)", 10, "smea"),
    ("NNM", lambda n, f: {"f": f}, ">1 (cdist, gather n x (n - f) rows, mean)", None, None),
    ("Bucketing", lambda n, f: {"s": 2}, "2 (permute, mean)", None, None),
    ("Clipping", lambda n, f: {"c": 2.0}, ">1 (norm, scale per row)", None, None),
    ("ARC", lambda n, f: {"f": f}, ">1 (norms, clip)", None, None),
]


def best_of(fn, reps, prepare=None):
    """The minimum over reps calls of fn(prepare()); prepare runs outside the timer."""
    times = []
    for _ in range(reps):
        argument = prepare() if prepare is not None else None
        start = time.perf_counter()
        fn(argument)
        times.append(time.perf_counter() - start)
    return min(times), times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 10, 25 at d = 10^5, one repetition of ByzFL")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per measurement (minimum reported)")
    parser.add_argument("--budget", type=float, default=12.0,
                        help="skip d = 10^6 for a rule whose ByzFL call took longer than this at d = 10^5 (s)")
    parser.add_argument("--only", default="", help="comma-separated class names")
    parser.add_argument("--sizes", default="", help="comma-separated NxD sizes, e.g. 100x1000000")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [(10, 10 ** 5), (25, 10 ** 5)] if args.quick else \
        [(10, 10 ** 5), (10, 10 ** 6), (25, 10 ** 5), (25, 10 ** 6), (100, 10 ** 5), (100, 10 ** 6)]
    if args.sizes:
        sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
    reps = 1 if args.quick else args.reps
    only = set(filter(None, args.only.split(",")))
    rules = robust.rule_names()
    print(f"load at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())} (1/5/15 min); torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread; repetitions: {reps} (minimum)")
    print("\n| rule | n | d | f | ByzFL ms | Ballot ms | speed-up | ByzFL passes | target | met |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---|")
    slow = {}  # rule -> ByzFL seconds at d = 10^5 for the same n
    gen = torch.Generator().manual_seed(0)
    for n, d in sizes:
        x = torch.randn((n, d), generator=gen, dtype=torch.float32)
        f = (n - 3) // 4
        for name, kwargs_of, passes, max_n, needs in RULES:
            if only and name not in only:
                continue
            kwargs = kwargs_of(n, f)
            label = f"| {name}({', '.join(f'{k}={v}' for k, v in kwargs.items())}) | {n} | 10^{int(math.log10(d))} | {f} |"
            if needs and needs not in rules:
                print(f"{label} — | — | — | {passes} | — | skipped: no '{needs}' rule in this build |", flush=True)
                continue
            target = 1.0 if passes.startswith("1 ") else 10.0
            if max_n is not None and n > max_n:
                print(f"{label} — | — | — | {passes} | {target:.0f}x | skipped: C({n}, {f}) subsets |", flush=True)
                continue
            if d > 10 ** 5 and slow.get((name, n), 0) > args.budget:
                print(f"{label} — | — | — | {passes} | {target:.0f}x | skipped: ByzFL took {slow[(name, n)]:.0f} s at "
                      f"d = 10^5, ~10x that here |", flush=True)
                continue

            # ByzFL's Clipping and ARC scale the rows of their input in place: each call gets a fresh
            # copy, made before the timer starts (a copy made inside would time an n x d allocation
            # and its page faults as ByzFL's work). Ballot's classes leave the input untouched.
            in_place = name in ("Clipping", "ARC")
            prepare_byzfl = (lambda: x.clone()) if in_place else (lambda: x)

            def run_byzfl(data):
                getattr(byzfl, name)(**kwargs)(data)

            def run_ballot(_):
                getattr(compat, name)(**kwargs)(x)

            torch.manual_seed(0)
            np.random.seed(0)
            try:
                t_byzfl, first = best_of(run_byzfl, 1, prepare_byzfl)
            except (MemoryError, RuntimeError) as error:  # e.g. NNM's n x (n - f) x d gather
                reason = str(error).split("you tried to allocate ")[-1].split(" bytes")[0]
                print(f"{label} — | — | — | {passes} | {target:.0f}x | skipped: ByzFL ran out of memory "
                      f"({int(reason) / 2 ** 30:.0f} GiB) |" if reason.isdigit() else
                      f"{label} — | — | — | {passes} | {target:.0f}x | skipped: ByzFL failed: {error} |", flush=True)
                continue
            if t_byzfl < args.budget and reps > 1:
                t_byzfl = min(t_byzfl, best_of(run_byzfl, reps - 1, prepare_byzfl)[0])
            if d == 10 ** 5:
                slow[(name, n)] = t_byzfl
            t_ballot, _ = best_of(run_ballot, reps)  # as many calls as ByzFL got
            speedup = t_byzfl / t_ballot
            print(f"{label} {t_byzfl * 1e3:.1f} | {t_ballot * 1e3:.1f} | {speedup:.1f}x | {passes} | {target:.0f}x | "
                  f"{'yes' if speedup >= target else 'no'} |", flush=True)
        del x
    print(f"\nload at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())} (1/5/15 min)")


if __name__ == "__main__":
    main()
