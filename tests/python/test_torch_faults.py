"""ballot.torch under faults: PyTorch node processes (a script with `bt.Node(model, examples=N)`,
the cluster and index from BALLOT_CLUSTER / BALLOT_NODE_INDEX) and a `ballot server` process over
mutual TLS, with processes killed by SIGKILL mid-run: a node killed and restarted rejoins through
the state transfer; a server killed and restarted resumes from its checkpoint and decision log; a
node whose model differs is refused naming the parameter while the others finish with the quorum
n - b; and two undisturbed runs end bit for bit alike. Skipped without torch or the `ballot` program."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import torch.nn as nn  # noqa: E402

import ballot.torch as bt  # noqa: E402
from test_session import PROGRAM, Cluster  # noqa: E402

pytestmark = pytest.mark.skipif(PROGRAM is None, reason="the `ballot` program is not built (apps/ballot)")

EXAMPLES = 256
DIGEST = re.compile(r"model digest: ([0-9a-f]{64})")
NODE_LINE = re.compile(r"node (\d+): digest ([0-9a-f]{64}) rounds (\d+) rejoins (\d+) restored (\d+) "
                       r"momentum ([0-9a-f]{64})")
RESUMED = re.compile(r"\(from round (\d+)\)")

# The node script. Its Tiny must have the names and shapes of the test's (HIDDEN=8); its initial
# values do not matter: Node fills the parameters from the cluster's init file.
SCRIPT = r'''
import hashlib, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
import ballot.torch as bt

torch.set_num_threads(1)
HIDDEN = int(os.environ.get("TINY_HIDDEN", "8"))
SLEEP = float(os.environ.get("TINY_SLEEP", "0"))
GO = os.environ.get("TINY_GO")
WORK_ON = os.environ.get("TINY_WORK_ON", "auto")


class Tiny(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.a = nn.Linear(6, hidden)
        self.b = nn.Linear(hidden, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


EXAMPLES = 256
gen = torch.Generator().manual_seed(7)
X = torch.randn(EXAMPLES, 6, generator=gen)
Y = (X[:, 0] > 0).long() + (X[:, 1] > 0.5).long()
torch.manual_seed(11)
model = Tiny(HIDDEN)
node = bt.Node(model, examples=EXAMPLES, algorithm=bt.SignVote(work_on=WORK_ON))  # another model: ValueError
print(f"node {node.index}: ready", flush=True)
while GO and not os.path.exists(GO):
    time.sleep(0.02)
stats = node.run(lambda idx: F.cross_entropy(model(X[idx]), Y[idx]),
                 on_round=(lambda n: time.sleep(SLEEP)) if SLEEP > 0 else None)
momentum = hashlib.sha256()  # the worker momentum of its partitions, wherever it was folded
for p in range(node._session.nodes):
    m = node._momentum_for_state(p) if node._work_on_model else node._session._native.momentum(p)
    if m is not None:
        momentum.update(m.tobytes())
print(f"node {node.index}: digest {node.model_digest()} rounds {stats['rounds']} rejoins {stats['rejoins']} "
      f"restored {stats['states_restored']} momentum {momentum.hexdigest()}", flush=True)
node.close()
'''


class Tiny(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.a = nn.Linear(6, hidden)
        self.b = nn.Linear(hidden, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


class TorchCluster:
    """A throw-away PKI (test_session.Cluster's), a cluster file with a server checkpoint, metrics
    and node state in `root`, and the processes: `ballot server` and the node script."""

    def __init__(self, root: Path, rounds=40, deadline_ms=1500, checkpoint_every=5, work_on="auto", **training):
        root.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(3)
        self.init = root / "tiny.init"
        bt.export_init(Tiny(), self.init)
        settings = dict(model=f"init:file={self.init}", data=f"external:train={EXAMPLES}", rounds=rounds, nodes=5,
                        byzantine=1, attack="none", attackers=0, lr="constant:lr=0.01", partition_size=16)
        settings.update(training)
        base = Cluster(root, **settings)  # the keys and the cluster file, with "checkpoint": ""
        self.root, self.nodes, self.rounds, self.file = root, base.nodes, rounds, base.file
        self.checkpoint, self.metrics = root / "server.ckpt", root / "metrics.jsonl"
        config = json.loads(self.file.read_text())
        config.update(checkpoint=str(self.checkpoint), checkpoint_every=checkpoint_every, metrics=str(self.metrics),
                      node_state=str(root / "state"), round_deadline_ms=deadline_ms)
        (root / "state").mkdir()
        self.file.write_text(json.dumps(config))
        self.script = root / "tiny_node.py"
        self.script.write_text(SCRIPT)
        self.go = root / "go"
        self.server = None
        self.node_processes = {}
        self.processes = []
        self.server_starts = 0
        self.work_on = work_on  # SignVote's: where the nodes' worker momentum and packing run

    # ---- processes
    def start_server(self):
        self.server_starts += 1
        log = open(self.root / f"server-{self.server_starts}.log", "w")
        self.server = subprocess.Popen([str(PROGRAM), "server", "--cluster", str(self.file)], stdout=log,
                                       stderr=subprocess.STDOUT)
        log.close()
        self.processes.append(self.server)

    def server_log(self, start=None):
        return (self.root / f"server-{start or self.server_starts}.log").read_text()

    def start_node(self, index, sleep=0.0, hidden=8, tag=""):
        env = dict(os.environ, BALLOT_CLUSTER=str(self.file), BALLOT_NODE_INDEX=str(index), OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", TINY_SLEEP=str(sleep), TINY_HIDDEN=str(hidden), TINY_GO=str(self.go),
                   TINY_WORK_ON=self.work_on)
        log = open(self.node_log_path(index, tag), "w")
        process = subprocess.Popen([sys.executable, str(self.script)], env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.node_processes[index] = process
        self.processes.append(process)
        return process

    def node_log_path(self, index, tag=""):
        return self.root / f"node-{index}{tag}.log"

    def wait_ready(self, indices, tag="", timeout=120):
        """Until the scripts have imported torch and opened their Node (or died)."""
        until = time.monotonic() + timeout
        for i in indices:
            while f"node {i}: ready" not in self.node_log_path(i, tag).read_text():
                process = self.node_processes[i]
                assert process.poll() is None, self.node_log_path(i, tag).read_text()[-3000:]
                assert time.monotonic() < until, f"node {i} not ready"
                time.sleep(0.05)

    def start(self, sleep=0.0, hidden=None):
        """Every node script, then (once all have opened their Node) the server, then go."""
        hidden = hidden or {}
        for i in range(self.nodes):
            self.start_node(i, sleep, hidden.get(i, 8))
        self.wait_ready([i for i in range(self.nodes) if hidden.get(i, 8) == 8])
        self.start_server()
        self.go.touch()

    @staticmethod
    def kill(process):
        process.send_signal(signal.SIGKILL)
        process.wait()

    def metric_rows(self):
        if not self.metrics.exists():
            return []
        rows = []
        for line in self.metrics.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:  # a line being written
                pass
        return rows

    def wait_rows(self, rows, timeout=120):
        until = time.monotonic() + timeout
        while len(self.metric_rows()) < rows:
            assert self.server.poll() is None, self.server_log()[-3000:]
            assert time.monotonic() < until, f"{len(self.metric_rows())} of {rows} metrics rows"
            time.sleep(0.05)

    def server_digest(self, timeout=180):
        code = self.server.wait(timeout=timeout)
        log = self.server_log()
        assert code == 0, log[-3000:]
        found = DIGEST.findall(log)
        assert found, log[-3000:]
        return found[-1]

    def node_result(self, index, tag="", timeout=60):
        """(digest, rounds, rejoins, states restored, momentum digest) that node `index`'s script
        printed at its end."""
        process = self.node_processes[index]
        code = process.wait(timeout=timeout)
        text = self.node_log_path(index, tag).read_text()
        assert code == 0, text[-3000:]
        found = NODE_LINE.findall(text)
        assert found and int(found[-1][0]) == index, text[-3000:]
        _, digest, rounds, rejoins, restored, momentum = found[-1]
        return digest, int(rounds), int(rejoins), int(restored), momentum

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture
def make_torch_cluster(tmp_path):
    made = []

    def make(**options):
        cluster = TorchCluster(tmp_path / f"c{len(made)}", **options)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


def undisturbed_run(root, rounds, momentum=None):
    """The server's final digest of a run without faults (every node's agrees with it); with a
    dict `momentum`, each node's momentum digest goes into it."""
    cluster = TorchCluster(root, rounds=rounds, deadline_ms=20000)
    try:
        cluster.start()
        server = cluster.server_digest()
        results = {i: cluster.node_result(i) for i in range(cluster.nodes)}
        assert {digest for digest, *_ in results.values()} == {server}
        assert [row["votes"] for row in cluster.metric_rows()] == [5] * rounds
        if momentum is not None:
            momentum.update({i: result[4] for i, result in results.items()})
        return server
    finally:
        cluster.stop()


UNDISTURBED_MOMENTUM = {}  # of the nodes of undisturbed_40, by node


@pytest.fixture(scope="module")
def undisturbed_40(tmp_path_factory):
    """The reference of the fault runs (40 rounds): the deterministic code certifies b = 1, so a
    missing vote, or the vote of a node that lost its worker momentum, does not move a decision."""
    return undisturbed_run(tmp_path_factory.mktemp("undisturbed"), 40, UNDISTURBED_MOMENTUM)


def test_a_killed_torch_node_restarts_and_rejoins_through_the_state_transfer(make_torch_cluster, undisturbed_40):
    cluster = make_torch_cluster(rounds=40)
    cluster.start(sleep=0.1)
    cluster.wait_rows(8)
    cluster.kill(cluster.node_processes[2])
    killed_at = len(cluster.metric_rows())
    cluster.wait_rows(killed_at + 4)  # the others go on with n - b = 4 votes
    cluster.start_node(2, sleep=0.1, tag="-restarted")
    cluster.wait_ready([2], tag="-restarted")
    restarted_at = len(cluster.metric_rows())
    assert restarted_at < cluster.rounds - 5, "the run was too short to see node 2 come back"

    server = cluster.server_digest()
    results = {i: cluster.node_result(i, "-restarted" if i == 2 else "") for i in range(cluster.nodes)}
    assert {digest for digest, *_ in results.values()} == {server}
    assert server == undisturbed_40  # b = 1 certified: the missing and the restarted node's votes moved nothing
    _, rounds, rejoins, _, _ = results[2]
    assert rejoins >= 1  # it came back behind: the server's state transfer put it on the current round
    assert 0 < rounds <= cluster.rounds - (killed_at + 4)  # only the decisions after its rejoin
    assert all(results[i][1] == cluster.rounds for i in (0, 1, 3, 4))

    rows = cluster.metric_rows()
    assert [row["round"] for row in rows] == list(range(cluster.rounds))
    assert any(2 in row["missing"] and row["votes"] == 4 for row in rows[killed_at:restarted_at])
    assert rows[-1]["votes"] == 5 and rows[-1]["missing"] == []  # it votes again after its rejoin
    assert (cluster.root / "state" / "node-2.state").exists()  # its worker momentum, saved every 5 rounds


def test_a_killed_server_restarts_from_its_checkpoint(make_torch_cluster, undisturbed_40):
    cluster = make_torch_cluster(rounds=40, checkpoint_every=5)
    cluster.start(sleep=0.1)
    cluster.wait_rows(12)  # past the checkpoints of rounds 5 and 10, before that of 15
    cluster.kill(cluster.server)
    assert cluster.checkpoint.exists()
    cluster.start_server()  # the same command

    server = cluster.server_digest()
    resumed = RESUMED.findall(cluster.server_log())
    assert resumed, cluster.server_log()[-3000:]
    first = int(resumed[-1])
    # Its checkpoint (every 5 rounds), then the decisions it logged after it: it resumes at the
    # round it was in when killed (12 rows were out), not at the checkpoint.
    assert 12 <= first + 1 and first < cluster.rounds, cluster.server_log()[-3000:]
    if first % 5 != 0:
        assert "decisions replayed from its decision log" in cluster.server_log()
    results = {i: cluster.node_result(i) for i in range(cluster.nodes)}
    assert {digest for digest, *_ in results.values()} == {server}
    # Every node installed the resumed server's state (of the round it was in, or one before).
    assert all(rejoins >= 1 for _, _, rejoins, _, _ in results.values()), results
    # No node redid a round it had seen decided, and a node the state took back a round restored
    # its own worker momentum when it had saved that round's (node_state): the run is the
    # undisturbed one, bit for bit.
    assert server == undisturbed_40, results
    assert "quarantined {}, 0 equivocation proofs" in cluster.server_log()
    rounds = [row["round"] for row in cluster.metric_rows()]
    assert sorted(set(rounds)) == list(range(cluster.rounds))
    assert len(rounds) == len(set(rounds)), rounds  # one row per round, the redone rounds once


@pytest.mark.parametrize("work_on", ["host", "model"])
def test_a_server_that_lost_its_decision_log_takes_the_nodes_back_to_their_saved_state(make_torch_cluster,
                                                                                      undisturbed_40, work_on):
    """The server restarts from its checkpoint of round 10 alone: every node, further on, is taken
    back to round 10 by the state transfer and restores the worker momentum it saved there (in the
    session, or onto the model's device with work_on "model"). Then the rounds it redoes are the
    ones it did: the run and every node's momentum end as in the undisturbed run, bit for bit."""
    cluster = make_torch_cluster(rounds=40, checkpoint_every=5, work_on=work_on)
    cluster.start(sleep=0.1)
    cluster.wait_rows(12)  # past the checkpoints of rounds 5 and 10, before that of 15
    cluster.kill(cluster.server)
    rows = len(cluster.metric_rows())
    assert 12 <= rows < 15, rows
    Path(str(cluster.checkpoint) + ".decisions").unlink()
    cluster.start_server()

    server = cluster.server_digest()
    assert RESUMED.findall(cluster.server_log()) == ["10"], cluster.server_log()[-3000:]
    results = {i: cluster.node_result(i) for i in range(cluster.nodes)}
    assert {digest for digest, *_ in results.values()} == {server}
    assert all(restored == 1 for _, _, _, restored, _ in results.values()), results
    assert server == undisturbed_40
    assert {i: result[4] for i, result in results.items()} == UNDISTURBED_MOMENTUM


def test_a_node_with_another_model_is_refused_and_the_quorum_finishes(make_torch_cluster):
    cluster = make_torch_cluster(rounds=10, deadline_ms=800)
    cluster.start(hidden={4: 9})
    refused = cluster.node_processes[4].wait(timeout=120)
    text = cluster.node_log_path(4).read_text()
    assert refused != 0, text[-3000:]
    assert re.search(r"ValueError: parameter 0: .*'a.weight' \[8, 6\].*'a.weight' \[9, 6\]", text), text[-3000:]

    server = cluster.server_digest()
    results = {i: cluster.node_result(i) for i in range(4)}
    assert {digest for digest, *_ in results.values()} == {server}
    rows = cluster.metric_rows()
    assert [row["round"] for row in rows] == list(range(cluster.rounds))
    assert all(row["votes"] == 4 and row["missing"] == [4] for row in rows), rows


def test_two_undisturbed_runs_end_bit_for_bit_alike(tmp_path, undisturbed_40):
    assert undisturbed_run(tmp_path / "again", 40) == undisturbed_40
