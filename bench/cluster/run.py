#!/usr/bin/python3
"""Time per round across rate-limited hosts: Ballot against an fp32 allreduce (bench/cluster).

One command (as root; scripts/vcluster.sh makes the hosts and always removes them):

    bench/cluster/run.py --ballot build/release/apps/ballot            # the key cell
    bench/cluster/run.py --ballot ... --d 11.2e6 25.6e6 --n 4 8 --rate 1gbit 10gbit

For every (rate, d, n) it makes a virtual cluster of n + 1 hosts (host 0: Ballot's server, hosts
1..n: nodes or allreduce ranks) and measures, with synthetic gradients (model "synthetic:d=D":
one pass over d floats per gradient, so that communication and the CPU work around it dominate):

  vote      Ballot's 1-bit vote round: signs, Ed25519-signed envelopes, mutual TLS 1.3, majority
            vote at the server, signed 1-bit decision back, update and state digest everywhere
  vote2     the same with two transport threads at the server ("server": {"io_threads": 2})
  relay     the vote round with relayed decisions ("relay_decisions": true): the server sends
            each decision in n pieces, one to each voter, and the voters hand them on to each
            other under the server's signature (the server's link: n votes in, one decision out)
  exchange  the same with the exchange placement (nodes relay signed signs along G's columns)
  fp32      Ballot's gradient path with codec fp32 and rule mean (float gradients up, float
            direction down, same security)
  gtopk     the gradient path with codec gtopk:ratio=0.01 and rule mean: each node sends its
            top 1 % (index and value), the server keeps the top 1 % of the mean and sends it
            down in the decision's sparse form (8 bytes an entry each way)
  gloo      torch.distributed all_reduce of the d floats over gloo between hosts 1..n: no TLS,
            no signatures (the baseline users run today, like DDP's gradient allreduce)

Per round: the median wall time of the steady rounds (the first and last are left out; the mean
is in results.json), the bytes each host's interface counted (from the switch's ports, all read
at one moment; veth counts a segmentation-offloaded super-packet's headers once, so real Ethernet
carries a few percent more; server host and the mean node host, both directions), the cost model's bytes, and each process's CPU seconds (wait4 rusage).
Writes results.json and plot.svg into --out and prints a Markdown table.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VCLUSTER = os.path.join(ROOT, "scripts", "vcluster.sh")
PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here
GTOPK_RATIO = 0.01


def sh(*args, check=True, capture=False):
    return subprocess.run(args, check=check, text=True, capture_output=capture)


def addr(i):
    return f"198.18.0.{i + 1}"


def counters(name):
    """{host: (rx, tx)} of every host, read by one process at one moment."""
    out = {}
    for line in sh(VCLUSTER, "bytes", name, capture=True).stdout.splitlines():
        host, rx, tx = (int(v) for v in line.split())
        out[host] = (rx, tx)
    return out


def spawn(name, host, argv, log):
    out = open(log, "w")
    return subprocess.Popen([VCLUSTER, "exec", name, str(host)] + argv, stdout=out, stderr=subprocess.STDOUT)


def alive(proc):
    """Running (not yet a zombie), without reaping it: reap() needs its rusage."""
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def cpu_seconds(proc):
    """CPU seconds a running process has used so far (/proc/PID/stat utime + stime)."""
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, IndexError, ValueError):
        return 0.0


def reap(proc, limit):
    """Waits (bounded) for a process started by spawn; its CPU seconds and exit status."""
    until = time.monotonic() + limit
    while time.monotonic() < until:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime, proc.returncode
        time.sleep(0.05)
    proc.kill()
    pid, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, None


def ballot_config(work, n, d, rounds, path, deadline_ms):
    training = {
        "nodes": n, "byzantine": 0 if path != "exchange" else 1,
        "code": "identity" if path != "exchange" else "bernoulli:r=2",
        "model": f"synthetic:d={d}", "data": "synthetic:examples=512,features=8,classes=2,separation=1",
        "update": "sign:wd=0", "worker_momentum": 0, "lr": "constant:lr=0.001",
        "partition_size": 16, "rounds": rounds, "seed": 1, "job": 1, "eval_every": 0, "eval_examples": 64,
    }
    if path == "exchange":
        training["placement"] = "exchange"
    server = {"host": addr(0), "port": 29500}
    if path == "vote2":
        server["io_threads"] = 2
    if path in ("fp32", "gtopk"):
        training["rule"] = "mean"
        training["codec"] = "fp32" if path == "fp32" else f"gtopk:ratio={GTOPK_RATIO}"
    config = {
        "server": server,
        "nodes": [{"host": addr(i + 1), "port": 29600} for i in range(n)],
        "keys": os.path.join(work, "keys"), "checkpoint": "", "checkpoint_every": 1000000,
        "round_deadline_ms": deadline_ms, "metrics": os.path.join(work, "metrics.jsonl"),
        "training": training,
    }
    if path == "relay":
        config["relay_decisions"] = True
    file = os.path.join(work, f"{path}.json")
    with open(file, "w") as f:
        json.dump(config, f)
    return file


def make_keys(ballot, work, n):
    keys = os.path.join(work, "keys")
    if os.path.exists(os.path.join(keys, "ca.crt")):
        return
    sh(ballot, "keys", "init", "--dir", keys, capture=True)
    sh(ballot, "keys", "issue", "0", "--role", "server", "--dir", keys, capture=True)
    for i in range(1, n + 1):
        sh(ballot, "keys", "issue", str(i), "--role", "node", "--dir", keys, capture=True)


def metric_lines(file):
    try:
        with open(file) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def run_ballot(args, name, work, n, d, path, rounds):
    for f in ("metrics.jsonl",):
        if os.path.exists(os.path.join(work, f)):
            os.remove(os.path.join(work, f))
    deadline = 60000  # no faults here: every round waits for all n votes
    file = ballot_config(work, n, d, rounds, path, deadline)
    metrics = os.path.join(work, "metrics.jsonl")
    hosts = range(n + 1)
    server = spawn(name, 0, [args.ballot, "server", "--cluster", file], os.path.join(work, f"{path}-server.log"))
    time.sleep(0.3)
    nodes = [spawn(name, i + 1, [args.ballot, "node", "--cluster", file, "--index", str(i)],
                   os.path.join(work, f"{path}-node-{i}.log")) for i in range(n)]
    # Counters from the end of round 1 on: connection set-up and the first round are left out.
    # The rounds finished are read before and after the counters: a sample taken while a round
    # ended is taken again, so that the bytes and the CPU belong to the rounds they are divided by.
    # Rounds shorter than a sample (a few ms) may never leave one whole: after 20 tries, or when
    # the run ends first, the last sample is kept, and how many rounds ended during it is recorded ("sample_spanned").
    start_lines, before, spanned, tries = None, None, 0, 0
    until = time.monotonic() + args.timeout
    while time.monotonic() < until and alive(server):
        lines = len(metric_lines(metrics))
        if lines >= 1:
            sample = counters(name)
            cpu_sample = [cpu_seconds(p) for p in [server] + nodes]
            spanned = len(metric_lines(metrics)) - lines
            tries += 1
            before, cpu_before, start_lines = [sample[h] for h in hosts], cpu_sample, lines
            if spanned == 0 or tries == 20:
                break
            continue
        time.sleep(0.02)
    server_cpu, status = reap(server, max(1.0, until - time.monotonic()))
    after = counters(name)
    after = [after[h] for h in hosts]
    node_reaped = [reap(p, 20) for p in nodes]
    node_cpu = [cpu for cpu, _ in node_reaped]
    node_status = [code for _, code in node_reaped]
    lines = metric_lines(metrics)
    if status != 0 or before is None or len(lines) != rounds or any(code != 0 for code in node_status):
        raise RuntimeError(f"ballot {path} n={n} d={d}: server status {status}, node statuses {node_status} "
                           f"(None: killed after 20 s), {len(lines)} of {rounds} rounds; see {work}")
    # Every round must have had every node's vote: a node lost mid-run would shorten the rounds
    # (deadline rounds) and the bytes without failing anything else.
    short = [line.get("round") for line in lines if len(line.get("missing") or []) != 0]
    if short:
        raise RuntimeError(f"ballot {path} n={n} d={d}: rounds {short[:5]} missed votes; see {work}")
    steady = [line["seconds"] for line in lines[1:-1]]
    counted = rounds - start_lines
    if counted < 3:
        raise RuntimeError(f"ballot {path} n={n} d={d}: only {counted} rounds after the first sample "
                           f"(rounds {rounds}); give more --rounds")
    # CPU of the rounds after start_lines only (start-up left out): all hosts share this machine's
    # cores, so their sum over the cores is a floor of the round on this machine.
    server_steady = (server_cpu - cpu_before[0]) / counted
    node_steady = [(cpu - before_cpu) / counted for cpu, before_cpu in zip(node_cpu, cpu_before[1:])]
    # The bytes counted cover the rounds after start_lines, plus the Finish messages (a few KB).
    return {
        "seconds": steady,
        "server_rx": (after[0][0] - before[0][0]) / counted, "server_tx": (after[0][1] - before[0][1]) / counted,
        "node_rx": statistics.mean(after[h][0] - before[h][0] for h in hosts if h) / counted,
        "node_tx": statistics.mean(after[h][1] - before[h][1] for h in hosts if h) / counted,
        "server_cpu": server_cpu / rounds, "node_cpu": statistics.mean(node_cpu) / rounds,
        "server_cpu_steady": server_steady, "node_cpu_steady": statistics.mean(node_steady),
        "cpu_floor": (server_steady + sum(node_steady)) / os.cpu_count(),
        "sample_spanned": spanned,
        "bytes_per_vote": lines[-1].get("bytes_per_vote"),
        "bytes_per_decision": lines[-1].get("bytes_per_decision"),
    }


GLOO_RUNS = [0]


def run_gloo(args, name, work, n, d, rounds):
    hosts = range(1, n + 1)
    # A fresh rendezvous port each run: the last run's may still be in TIME_WAIT.
    GLOO_RUNS[0] += 1
    port = str(29700 + GLOO_RUNS[0])
    script = os.path.join(HERE, "gloo_allreduce.py")
    before = counters(name)
    before = [before[h] for h in hosts]
    procs = [spawn(name, r + 1, [PYTHON, script, str(r), str(n), addr(1), port, str(d), str(rounds), "1"],
                   os.path.join(work, f"gloo-{r}.log")) for r in range(n)]
    cpu = []
    status = []
    for p in procs:
        c, s = reap(p, args.timeout)
        cpu.append(c)
        status.append(s)
    after = counters(name)
    after = [after[h] for h in hosts]
    with open(os.path.join(work, "gloo-0.log")) as f:
        out = [line for line in f if line.startswith("{")]
    if any(s != 0 for s in status) or not out:
        raise RuntimeError(f"gloo n={n} d={d}: status {status}; see {work}")
    seconds = json.loads(out[-1])["seconds"]
    total = rounds + 1  # the warm-up round moved bytes too
    return {
        "seconds": seconds,
        "node_rx": statistics.mean(a[0] - b[0] for a, b in zip(after, before)) / total,
        "node_tx": statistics.mean(a[1] - b[1] for a, b in zip(after, before)) / total,
        "node_cpu": statistics.mean(cpu) / total,  # includes python + torch start-up
    }


def model_bytes(path, n, d):
    """The cost model (DESIGN.md, Scale): bytes per round on the busiest link, each direction."""
    if path in ("vote", "vote2", "exchange", "relay"):
        return n * d / 8  # server link: n votes in, n decisions out (relay: one decision out)
    if path == "fp32":
        return n * 4 * d
    if path == "gtopk":
        return n * 8 * GTOPK_RATIO * d  # n top-k messages in, n sparse decisions out
    return 2 * (n - 1) / n * 4 * d  # ring allreduce, per node


def load():
    return os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ballot", default=os.path.join(ROOT, "build", "release", "apps", "ballot"))
    parser.add_argument("--d", nargs="+", type=float, default=[11.2e6])
    parser.add_argument("--n", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--rate", nargs="+", default=["1gbit"])
    parser.add_argument("--paths", nargs="+", default=["vote", "relay", "fp32", "gloo", "exchange"])
    parser.add_argument("--rounds", type=int, default=12, help="rounds of the 1-bit paths and gloo")
    parser.add_argument("--fp32-rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", default=os.path.join(HERE, "out"))
    parser.add_argument("--replot", help="only print the table and plot of this results.json")
    args = parser.parse_args()
    if args.replot:
        os.makedirs(args.out, exist_ok=True)
        with open(args.replot) as f:
            results = json.load(f)
        print_table(results)
        plot(results, os.path.join(args.out, "plot.svg"))
        return 0
    if os.geteuid() != 0:
        print("bench/cluster: skipped: needs root for network namespaces (scripts/vcluster.sh)", file=sys.stderr)
        return 77
    os.makedirs(args.out, exist_ok=True)
    results = []
    work = tempfile.mkdtemp(prefix="ballot-bench-cluster-")
    # A SIGTERM (a supervisor's, a timeout's) must run the finally blocks that remove the hosts,
    # which Python's default handler for it does not.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    measure(args, work, results)  # on an error its logs stay in `work` (the error names it)
    shutil.rmtree(work, ignore_errors=True)  # it holds the run's CA key
    print_table(results)
    plot(results, os.path.join(args.out, "plot.svg"))
    return 0


def measure(args, work, results):
    for rate in args.rate:
        for d in (int(x) for x in args.d):
            for n in args.n:
                make_keys(args.ballot, work, max(args.n))
                name = f"b{os.getpid() % 10 ** 7:07d}"  # unique: pid_max is at most 2^22
                # Destroyed whatever happens, also when a signal kills the create halfway (its own
                # clean-up does not run then); the name is this process's and destroy idempotent.
                try:
                    sh(VCLUSTER, "create", name, str(n + 1), rate)
                    for rep in range(args.repeat):
                        for path in args.paths:
                            rounds = args.fp32_rounds if path == "fp32" else args.rounds
                            load_before = load()
                            t0 = time.time()
                            if path == "gloo":
                                r = run_gloo(args, name, work, n, d, rounds)
                            else:
                                r = run_ballot(args, name, work, n, d, path, rounds)
                            r.update(path=path, rate=rate, d=d, n=n, rep=rep, load=[load_before, load()],
                                     wall=time.time() - t0, model_bytes=model_bytes(path, n, d),
                                     mean=statistics.mean(r["seconds"]), median=statistics.median(r["seconds"]))
                            results.append(r)
                            print(json.dumps({k: v for k, v in r.items() if k != "seconds"}), flush=True)
                            with open(os.path.join(args.out, "results.json"), "w") as f:
                                json.dump(results, f, indent=1)
                finally:
                    sh(VCLUSTER, "destroy", name)


COLOURS = {"vote": "#1b9e77", "vote2": "#a6d854", "relay": "#e7298a", "exchange": "#66a61e", "fp32": "#d95f02",
           "gtopk": "#e6ab02", "gloo": "#7570b3"}


def plot(results, file):
    """Grouped bars (log scale): seconds per round of each path, one group per (rate, d, n)."""
    import math
    cells, paths = [], []
    for r in results:
        cell = (r["rate"], r["d"], r["n"])
        if cell not in cells:
            cells.append(cell)
        if r["path"] not in paths:
            paths.append(r["path"])
    value = {}
    for r in results:
        value.setdefault((r["rate"], r["d"], r["n"], r["path"]), []).append(r["median"])
    lo, hi = 0.01, 10.0
    bar = 14
    group = bar * len(paths) + 24
    height, left, bottom, top = 360, 60, 60, 30
    width = max(520, left + 20 + group * len(cells))
    plot_h = height - top - bottom
    y = lambda v: top + plot_h * (1 - (math.log10(max(lo, min(hi, v))) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">Seconds per round across rate-limited hosts (median; log scale)</text>']
    for v in (0.01, 0.03, 0.1, 0.3, 1, 3, 10):
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for c, (rate, d, n) in enumerate(cells):
        x0 = left + 10 + c * group
        for p, path in enumerate(paths):
            vals = value.get((rate, d, n, path))
            if not vals:
                continue
            v = statistics.median(vals)
            out.append(f'<rect x="{x0 + p * bar}" y="{y(v):.1f}" width="{bar - 2}" height="{top + plot_h - y(v):.1f}" '
                       f'fill="{COLOURS.get(path, "#999")}"><title>{path}: {v:.3f} s</title></rect>')
        out.append(f'<text x="{x0 + group / 2 - 12}" y="{top + plot_h + 14}" text-anchor="middle">n={n}</text>'
                   f'<text x="{x0 + group / 2 - 12}" y="{top + plot_h + 27}" text-anchor="middle">{d / 1e6:.1f}M</text>'
                   f'<text x="{x0 + group / 2 - 12}" y="{top + plot_h + 40}" text-anchor="middle">{rate}</text>')
    for p, path in enumerate(paths):
        out.append(f'<rect x="{left + 10 + p * 80}" y="{height - 14}" width="10" height="10" fill="{COLOURS.get(path, "#999")}"/>'
                   f'<text x="{left + 24 + p * 80}" y="{height - 5}">{path}</text>')
    out.append("</svg>")
    with open(file, "w") as f:
        f.write("\n".join(out) + "\n")


def print_table(results):
    print("\n| rate | d | n | path | s/round (median) | busiest link, bytes/round: measured (in / out) | model | "
          "server CPU s/round | node CPU s/round | CPU floor | load |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        if r["path"] == "gloo":
            link = f"{r['node_rx'] / 1e6:.1f} / {r['node_tx'] / 1e6:.1f} MB (node)"
            server_cpu = "-"
        else:
            link = f"{r['server_rx'] / 1e6:.1f} / {r['server_tx'] / 1e6:.1f} MB (server)"
            server_cpu = f"{r['server_cpu']:.3f}"
        steady = "cpu_floor" in r  # runs from before the steady CPU columns have the totals only
        if steady and r["path"] != "gloo":
            server_cpu = f"{r['server_cpu_steady']:.3f}"
        node_cpu = r["node_cpu_steady"] if steady and r["path"] != "gloo" else r["node_cpu"]
        floor = f"{r['cpu_floor']:.3f}" if steady and r["path"] != "gloo" else "-"
        print(f"| {r['rate']} | {r['d'] / 1e6:.1f}M | {r['n']} | {r['path']} | {r['median']:.3f} | {link} | "
              f"{r['model_bytes'] / 1e6:.1f} MB | {server_cpu} | {node_cpu:.3f} | {floor} | "
              f"{r['load'][0]:.1f}-{r['load'][1]:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
