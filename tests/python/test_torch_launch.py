"""ballot.torch under real launchers, over real processes and mutual TLS.

- torchrun starts the whole cluster as it would on many machines (its static rendezvous,
  --master_addr/--master_port): a wrapper per rank runs `ballot launch --cluster F --init FILE` on
  rank 0 (the server) and the node script on ranks 1 .. n, whose `bt.Node(model, examples=N)`
  takes its index from RANK. Every node ends with the server's model digest.
- Open MPI's mpirun does the same (its ranks in OMPI_COMM_WORLD_RANK, no RANK): `ballot launch`
  on rank 0, the node script on the others. Skipped without mpirun (Debian: openmpi-bin).
- So does Slurm's srun (SLURM_PROCID), on the private Slurm of conftest.py's `slurm` fixture.
  Skipped without Slurm or root.
- A node made of a two-process gloo group (torchrun with a c10d rendezvous of its own on this
  machine, as --standalone does) beside two single-process nodes: only group rank 0 speaks to the
  cluster; both ranks end with the server's parameters, and the run converges like the run of
  single-process nodes.

Skipped without torch, torch.distributed (gloo) or the `ballot` program."""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ballot.torch as bt  # noqa: E402
from test_session import PROGRAM, Cluster, free_port  # noqa: E402

pytestmark = [
    pytest.mark.skipif(PROGRAM is None, reason="the `ballot` program is not built (apps/ballot)"),
    pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                       reason="torch.distributed with gloo is not available"),
]

EXAMPLES = 256
DIGEST = re.compile(r"model digest: ([0-9a-f]{64})")


def torchrun_std_options():
    """torchrun's --redirects/--tee default '0' fails under Python 3.11 with torch 1.13 (Debian 12:
    enum iteration skips the zero flag, `Std.from_str('0')` is None); 1 (stdout) works everywhere."""
    return ["--redirects", "1", "--tee", "1"]


# The node script: the same on every node and every rank of a group. Its Tiny must have the test's
# names and shapes; its values do not matter (Node fills them from the cluster's init file).
SCRIPT = r'''
import json, os, time
import torch
import torch.nn as nn
import torch.nn.functional as F
import ballot.torch as bt

torch.set_num_threads(1)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


EXAMPLES = 256
gen = torch.Generator().manual_seed(7)
X = torch.randn(EXAMPLES, 6, generator=gen)
Y = (X[:, 0] > 0).long() + (X[:, 1] > 0.5).long()
device = torch.device(os.environ.get("TINY_DEVICE", "cpu"))
if device.type == "cuda":  # one GPU per rank of a group where there are several
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(device)
X, Y = X.to(device), Y.to(device)
group = None
if os.environ.get("TINY_GROUP") in ("gloo", "nccl"):  # this node is a local process group (torchrun's)
    import torch.distributed as dist
    dist.init_process_group(os.environ["TINY_GROUP"])
    group = dist.group.WORLD
algorithm = bt.RobustLocalSGD(sync_every=3, local_lr=0.2) if os.environ.get("TINY_ALGORITHM") == "local" else None
model = Tiny().to(device)
node = bt.Node(model, examples=EXAMPLES, algorithm=algorithm, group=group)
SLEEP = float(os.environ.get("TINY_SLEEP", "0"))  # seconds per batch: a run slow enough to disturb


def batch_loss(idx):
    if SLEEP:
        time.sleep(SLEEP)
    return F.cross_entropy(model(X[idx.to(device)]), Y[idx.to(device)])


stats = node.run(batch_loss)
with torch.no_grad():
    loss = float(F.cross_entropy(model(X), Y))
result = {"index": node.index, "group_rank": node.group_rank, "digest": node.model_digest(),
          "rounds": stats["rounds"], "shares": stats.get("group_shares", 0), "loss": loss}
out = os.path.join(os.environ["TINY_RESULTS"], f"node-{node.index}-rank-{node.group_rank}.json")
with open(out + ".tmp", "w") as f:
    json.dump(result, f)
os.replace(out + ".tmp", out)
print(f"node {node.index} rank {node.group_rank}: digest {result['digest']} loss {loss:.4f}", flush=True)
node.close()
if group is not None:
    # Every rank leaves the group together: torch 1.13's gloo aborts a rank ("terminate called
    # without an active exception") that destroys its group while another still uses it.
    dist.barrier()
    dist.destroy_process_group()
'''

# One launcher task, as a user writes it for Slurm or torchrun: rank 0 is the server.
WRAPPER = r'''#!/bin/sh
if [ "$RANK" = 0 ]; then
  exec "$BALLOT" launch --cluster "$BALLOT_CLUSTER" --init "$BALLOT_INIT"
fi
exec "$PYTHON" "$TINY_SCRIPT"
'''

# The same task for Open MPI, whose rank variable is OMPI_COMM_WORLD_RANK, and for Slurm (SLURM_PROCID).
MPI_WRAPPER = WRAPPER.replace('"$RANK"', '"$OMPI_COMM_WORLD_RANK"')
SLURM_WRAPPER = WRAPPER.replace('"$RANK"', '"$SLURM_PROCID"')


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def data():
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(EXAMPLES, 6, generator=gen)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()


class Run:
    """Keys, a cluster file whose model is an init file, the node script; the processes it starts
    (each in its own process group, killed with everything it started)."""

    def __init__(self, root: Path, **training):
        root.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(3)
        self.init_model = Tiny()
        self.init = root / "tiny.init"
        bt.export_init(self.init_model, self.init)
        settings = dict(model=f"init:file={self.init}", data=f"external:train={EXAMPLES}", rounds=20, nodes=3,
                        byzantine=1, attack="none", attackers=0, lr="constant:lr=0.02", partition_size=16)
        settings.update(training)
        base = Cluster(root, **settings)
        self.root, self.file, self.nodes, self.rounds = root, base.file, base.nodes, settings["rounds"]
        config = json.loads(self.file.read_text())
        # A long deadline: every node's first Join is waited for (torch imports slowly on a loaded
        # machine) and every vote is counted.
        config.update(round_deadline_ms=30000, metrics=str(root / "metrics.jsonl"))
        self.file.write_text(json.dumps(config))
        self.script = root / "tiny_node.py"
        self.script.write_text(SCRIPT)
        self.results = root / "results"
        self.results.mkdir()
        self.processes = []

    def env(self, **extra):
        return dict(os.environ, BALLOT_CLUSTER=str(self.file), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                    TINY_RESULTS=str(self.results), **extra)

    def start(self, name, command, env):
        log = open(self.root / f"{name}.log", "w")
        process = subprocess.Popen([str(c) for c in command], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        log.close()
        self.processes.append((name, process))
        return process

    def wait(self, timeout):
        """Until every process ended, each with status 0 (the first that fails ends the wait);
        returns their logs by name."""
        until = time.monotonic() + timeout
        while any(process.poll() is None for _, process in self.processes):
            for name, process in self.processes:
                code = process.poll()
                assert code in (None, 0), f"{name} exited {code}:\n{self.log(name)[-4000:]}"
            if time.monotonic() > until:
                running = [name for name, process in self.processes if process.poll() is None]
                pytest.fail(f"{running} still running after {timeout} s:\n{self.log(running[0])[-3000:]}")
            time.sleep(0.1)
        for name, process in self.processes:
            assert process.returncode == 0, f"{name} exited {process.returncode}:\n{self.log(name)[-4000:]}"
        return {name: self.log(name) for name, _ in self.processes}

    def log(self, name):
        return (self.root / f"{name}.log").read_text(errors="replace")

    def result(self, index, rank=0):
        path = self.results / f"node-{index}-rank-{rank}.json"
        assert path.exists(), sorted(p.name for p in self.results.iterdir())
        return json.loads(path.read_text())

    def metric_rows(self):
        path = self.root / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def initial_loss(self):
        x, y = data()
        with torch.no_grad():
            return float(F.cross_entropy(self.init_model(x), y))

    def stop(self):
        for _, process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # torchrun and the ranks it started
                except ProcessLookupError:
                    pass
                process.wait()


@pytest.fixture
def make_run(tmp_path):
    made = []

    def make(name, **training):
        run = Run(tmp_path / name, **training)
        made.append(run)
        return run

    yield make
    for run in made:
        run.stop()


def torchrun(*options):
    return [sys.executable, "-m", "torch.distributed.run", "--max_restarts", "0", *torchrun_std_options(), *options]


def launcher_task(run, text):
    """The rank script `text` made executable in the run's directory, and its environment."""
    wrapper = run.root / "rank.sh"
    wrapper.write_text(text)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, run.env(BALLOT=str(PROGRAM), BALLOT_INIT=str(run.init), PYTHON=sys.executable,
                            TINY_SCRIPT=str(run.script))


def check_launched_run(run, log):
    """Every node ended with the server's digest (in the launcher's log `log`), every round has its
    metrics row, and the last round counted every vote."""
    server = DIGEST.findall(log)
    assert server, log[-3000:]
    for i in range(run.nodes):
        assert run.result(i)["digest"] == server[-1], (i, log[-3000:])
    rows = run.metric_rows()
    assert [row["round"] for row in rows] == list(range(run.rounds))
    assert rows[-1]["votes"] == run.nodes


def test_torchrun_starts_the_server_and_the_nodes_as_on_many_machines(make_run, tmp_path):
    run = make_run("torchrun")
    wrapper, env = launcher_task(run, WRAPPER)
    # The static rendezvous of a many-machine run: every machine runs this with its --node_rank;
    # here one machine runs all n + 1 ranks. Its agent holds --master_port (the server does not use it).
    run.start("torchrun", torchrun("--nnodes", "1", "--node_rank", "0", "--nproc_per_node", run.nodes + 1,
                                   "--master_addr", "127.0.0.1", "--master_port", free_port(),
                                   "--log_dir", run.root / "torchrun-logs", "--no_python", wrapper), env)
    check_launched_run(run, run.wait(timeout=150)["torchrun"])
    assert max(run.result(i)["loss"] for i in range(run.nodes)) < run.initial_loss()


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (Debian: openmpi-bin)")
def test_mpirun_starts_the_server_and_the_nodes(make_run):
    run = make_run("mpirun")
    wrapper, env = launcher_task(run, MPI_WRAPPER)
    for variable in ("RANK", "WORLD_SIZE"):
        env.pop(variable, None)
    # As under `sbatch` + `mpirun`: every MPI rank inherits the batch step's Slurm rank (0), and
    # mpirun's own rank must decide (read first, it was not: every rank became the server).
    env.update({"SLURM_PROCID": "0", "SLURM_NTASKS": str(run.nodes + 1)})
    as_root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    run.start("mpirun", ["mpirun", *as_root, "--oversubscribe", "-np", run.nodes + 1, wrapper], env)
    check_launched_run(run, run.wait(timeout=150)["mpirun"])


def test_srun_starts_the_server_and_the_nodes(make_run, slurm):
    run = make_run("srun")
    wrapper, env = launcher_task(run, SLURM_WRAPPER)
    for variable in [v for v in env if v in ("RANK", "WORLD_SIZE") or v.startswith(("OMPI_", "SLURM_"))]:
        del env[variable]  # the private Slurm's rank decides
    env["SLURM_CONF"] = slurm["SLURM_CONF"]
    run.start("srun", ["srun", "--ntasks", run.nodes + 1, "--kill-on-bad-exit=1", "--time=10", wrapper], env)
    check_launched_run(run, run.wait(timeout=150)["srun"])


def start_group(run, name, index, backend="gloo", **extra):
    """Node `index` as a two-process group (`backend`) under torchrun, with a c10d rendezvous of its
    own: what --standalone does, on a port of this test's (torch 1.13's --standalone takes 29400)."""
    return run.start(name, torchrun("--nnodes", "1", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                                    "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", uuid.uuid4().hex,
                                    "--log_dir", run.root / f"{name}-logs", run.script),
                     run.env(BALLOT_NODE_INDEX=str(index), TINY_GROUP=backend, **extra))


def group_run(make_run, name, group_node, algorithm, backend="gloo", device="cpu", **training):
    """A 3-node cluster; node `group_node` (if any) is a two-process group (`backend`) under
    torchrun; every node's model on `device`."""
    run = make_run(name, **training)
    extra = {"TINY_ALGORITHM": algorithm, "TINY_DEVICE": device}
    for i in range(run.nodes):
        if i == group_node:
            start_group(run, f"node-{i}", i, backend, **extra)
        else:
            run.start(f"node-{i}", [sys.executable, run.script], run.env(BALLOT_NODE_INDEX=str(i), **extra))
    run.start("server", [PROGRAM, "server", "--cluster", run.file], run.env())
    logs = run.wait(timeout=150)
    server = DIGEST.findall(logs["server"])
    assert server, logs["server"][-3000:]
    return run, server[-1]


@pytest.mark.parametrize("algorithm, training", [
    ("vote", {}),  # SignVote through the deterministic election code, replicated placement
    ("local", {"rule": "median", "codec": "fp32", "update": "sgd", "lr": "constant:lr=1"}),  # local SGD, 3 steps
])
def test_a_two_process_gloo_group_is_one_node(make_run, algorithm, training):
    grouped, server = group_run(make_run, "grouped", 1, algorithm, **training)
    ranks = [grouped.result(1, 0), grouped.result(1, 1)]
    # Both ranks of the group hold the agreed parameters, as do the single-process nodes.
    assert {r["digest"] for r in ranks} == {server}
    assert {grouped.result(i)["digest"] for i in (0, 2)} == {server}
    assert ranks[0]["rounds"] == ranks[1]["rounds"] == grouped.rounds
    # Each rank computed its share of every batch the node computed (at least one a round).
    assert ranks[0]["shares"] == ranks[1]["shares"] >= grouped.rounds
    rows = grouped.metric_rows()
    assert [row["round"] for row in rows] == list(range(grouped.rounds))
    assert all(row["votes"] == 3 for row in rows)  # the group's node voted every round
    assert "group rank" not in grouped.log("node-1")  # no error from either rank

    # The same run with single-process nodes only: the group converges like them. (Its gradients
    # may differ from one process's in the last bits, so the parameters need not be identical.)
    single, single_server = group_run(make_run, "single", None, algorithm, **training)
    initial = grouped.initial_loss()
    grouped_loss, single_loss = ranks[0]["loss"], single.result(1)["loss"]
    assert grouped_loss < initial - 0.02 and single_loss < initial - 0.02, (initial, grouped_loss, single_loss)
    assert abs(grouped_loss - single_loss) < 0.02 * initial, (initial, grouped_loss, single_loss)
    print(f"{algorithm}: initial loss {initial:.4f}, group run {grouped_loss:.4f}, single-process run "
          f"{single_loss:.4f}; parameters {'identical' if server == single_server else 'differ in the last bits'}")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA path is checked on a GPU machine")
@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_a_group_of_cuda_processes_is_one_node(make_run, backend):
    if backend == "nccl" and torch.cuda.device_count() < 2:
        pytest.skip("an NCCL group needs one GPU per rank; this machine has one (the gloo case stages through the CPU)")
    grouped, server = group_run(make_run, f"cuda-{backend}", 1, "vote", backend=backend, device="cuda")
    ranks = [grouped.result(1, 0), grouped.result(1, 1)]
    assert {r["digest"] for r in ranks} == {server}
    assert {grouped.result(i)["digest"] for i in (0, 2)} == {server}
    assert ranks[0]["shares"] == ranks[1]["shares"] >= grouped.rounds
    assert all(row["votes"] == 3 for row in grouped.metric_rows())
    assert ranks[0]["loss"] < grouped.initial_loss()


def test_a_killed_group_node_restarts_and_rejoins_through_the_state_transfer(make_run):
    """Both processes of the group node killed mid-run (its torchrun and ranks): the server goes on
    with n - b votes; a new group for the same node rejoins (rank 0 gets the state, rank 1 the
    broadcast parameters) and both end with the server's parameters."""
    run = make_run("group-rejoin", rounds=50)
    config = json.loads(run.file.read_text())
    config["round_deadline_ms"] = 2000  # a missing node costs a round this much
    run.file.write_text(json.dumps(config))
    slow = {"TINY_SLEEP": "0.03"}
    for i in (0, 2):
        run.start(f"node-{i}", [sys.executable, run.script], run.env(BALLOT_NODE_INDEX=str(i), **slow))
    first = start_group(run, "node-1", 1, **slow)
    run.start("server", [PROGRAM, "server", "--cluster", run.file], run.env())

    def wait_rows(count, timeout=120):
        until = time.monotonic() + timeout
        while len(run.metric_rows()) < count:
            assert time.monotonic() < until, f"fewer than {count} rounds after {timeout} s:\n{run.log('server')[-3000:]}"
            time.sleep(0.05)
        return len(run.metric_rows())

    def voted(row):
        return 1 not in row.get("missing", [])

    wait_rows(1)
    until = time.monotonic() + 120
    while not any(voted(row) for row in run.metric_rows()):  # the group is in: it voted once
        assert time.monotonic() < until, run.log("node-1")[-3000:]
        time.sleep(0.05)
    killed_at = wait_rows(len(run.metric_rows()) + 3)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    run.processes = [(name, p) for name, p in run.processes if p is not first]
    wait_rows(killed_at + 3)  # the others go on without it
    start_group(run, "node-1-again", 1, **slow)
    logs = run.wait(timeout=240)

    server = DIGEST.findall(logs["server"])[-1]
    ranks = [run.result(1, 0), run.result(1, 1)]
    assert {r["digest"] for r in ranks} == {server}  # rank 0 from the state, rank 1 from its broadcast
    assert {run.result(i)["digest"] for i in (0, 2)} == {server}
    assert 0 < ranks[0]["rounds"] < run.rounds  # only the decisions after its rejoin
    rows = run.metric_rows()
    assert [row["round"] for row in rows] == list(range(run.rounds))
    assert any(not voted(row) and row["votes"] == 2 for row in rows[killed_at:])
    assert voted(rows[-1]) and rows[-1]["votes"] == 3  # the new group votes again
    assert "group rank" not in run.log("node-1-again")


def test_a_group_whose_rank_zero_cannot_open_the_node_ends(make_run):
    """Group rank 0 cannot open its node (no such node in the cluster file): it raises, and the
    other rank, waiting for the node's layout, is told and raises too; torchrun ends non-zero."""
    run = make_run("refused")
    process = run.start("group", torchrun("--nnodes", "1", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                                          "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", uuid.uuid4().hex,
                                          "--log_dir", run.root / "group-logs", run.script),
                        run.env(BALLOT_NODE_INDEX="7", TINY_GROUP="gloo"))
    try:
        code = process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("the group did not end:\n" + run.log("group")[-3000:])
    log = run.log("group")
    assert code != 0, log[-3000:]
    assert "group rank 1: group rank 0 could not open the node" in log, log[-3000:]


def test_rank_zero_is_the_server_and_a_group_ignores_rank(monkeypatch, tmp_path):
    """Launcher ranks: rank 0 is the server's, so a node script there is refused with a clear
    error, before anything is opened."""
    for variable in ("BALLOT_NODE_INDEX", "BALLOT_CLUSTER", "BALLOT_EXPORT_INIT", "SLURM_PROCID", "RANK",
                     "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("BALLOT_CLUSTER", str(tmp_path / "cluster.json"))
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match=r"RANK=0: launcher rank 0 is the cluster's server"):
        bt.Node(Tiny())
    monkeypatch.setenv("SLURM_PROCID", "2")  # the outer launcher: torchrun's RANK comes first
    with pytest.raises(ValueError, match=r"RANK=0: launcher rank 0 is the cluster's server"):
        bt.Node(Tiny())
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")  # mpirun's rank first of all, as in `ballot launch`
    with pytest.raises(FileNotFoundError):  # node 1 of a cluster file that does not exist
        bt.Node(Tiny())


@pytest.mark.parametrize("argv, message", [
    (["--work-dir=", "train.py"], "--work-dir= needs a value"),
    (["--rounds=", "--nodes", "3", "train.py"], "--rounds= needs a value"),
    (["--ballot=", "train.py"], "--ballot needs a path"),
    (["--rounds"], "--rounds needs a value"),
    (["--init", "model.ballot", "train.py"], "--init is not an option here: the launcher exports"),
    (["--simulate", "train.py"], "--simulate is not an option here"),
])
def test_launcher_options_without_values_are_errors(argv, message):
    from ballot.torch import run

    with pytest.raises(SystemExit, match=message):
        run.main(argv)


def test_a_wrong_ballot_path_is_an_error_not_another_program(tmp_path, monkeypatch):
    from ballot.torch import run

    monkeypatch.setenv("BALLOT_PROGRAM", str(PROGRAM))  # a fallback that must not be taken
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit(0)\n")
    with pytest.raises(SystemExit, match="--ballot /nonexistent/ballot: not an executable file"):
        run.main(["--ballot", "/nonexistent/ballot", str(script)])


def test_a_script_that_exports_nothing_is_refused_even_in_a_reused_work_dir(tmp_path):
    """The init file of an earlier run in the same --work-dir does not count for this one."""
    from ballot.torch import run

    work = tmp_path / "work"
    work.mkdir()
    (work / "model.init").write_bytes(b"an earlier run's")
    (work / "model.init.json").write_text("{}")
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit(0)\n")
    with pytest.raises(SystemExit, match="ended without exporting its model"):
        run.main(["--ballot", str(PROGRAM), "--work-dir", str(work), str(script)])
    failing = tmp_path / "failing.py"
    failing.write_text("raise SystemExit(3)\n")
    with pytest.raises(SystemExit, match="export pass .* failed \\(exit 3"):
        run.main(["--ballot", str(PROGRAM), "--work-dir", str(work), str(failing)])


def test_the_launcher_takes_every_option_of_ballot_train_that_means_something_here():
    """Each option `ballot train --help` lists is passed through, or refused with its reason."""
    from ballot.torch import run

    listed = set(re.findall(r"^\s+(?:-\w,)?(--[a-z-]+)", subprocess.run(
        [str(PROGRAM), "train", "--help"], capture_output=True, text=True, check=True).stdout, re.M))
    assert "--digest-every" in listed and "--rounds" in listed
    assert listed - {"--help"} == (run._VALUE_OPTIONS | run._FLAG_OPTIONS | set(run._NOT_HERE)) - {"-n", "-b"}
    options, _, script, _ = run._split(["--digest-every", "5", "--rounds=3", "train.py"])
    assert options == ["--digest-every", "5", "--rounds=3"] and script == "train.py"
