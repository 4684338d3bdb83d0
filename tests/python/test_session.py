"""ballot.session: node k of a real cluster (a `ballot server` process and n - 1 `ballot node`
processes over mutual TLS) driven from Python through the C++ NodeSession, the same protocol
code as `ballot node`. Skipped when the `ballot` program is not built beside the package."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ballot
from ballot import codecs
from ballot.session import NodeSession

# `ballot train --rounds 30 --eval-every 1000` (tests/apps/pinned_digests_test.cc pins it); the
# same run without its attacker gives the same digest: the code's certificate at work.
PINNED_30 = "a3dbc9375d9c1807ccc9938269c6aac5cb3d402f0eb4b89af133e985a7375063"
TRAINING = {
    "attack": "reverse", "attacker_choice": "random", "attackers": 1, "byzantine": 1,
    "code": "deterministic", "codec": "fp32", "data": "fashion-mnist", "eval_every": 1000,
    "eval_examples": 10000, "job": 1, "lr": "constant:lr=0.001 > cosine:rounds=1500,min=0.05",
    "model": "mlp:hidden=128", "nodes": 7, "partition_size": 32, "placement": "replicated",
    "rounds": 30, "rule": "vote", "seed": 1, "update": "sign:wd=0", "worker_momentum": 0.9,
}


def ballot_program():
    if os.environ.get("BALLOT_PROGRAM"):
        return Path(os.environ["BALLOT_PROGRAM"])
    beside = Path(ballot.__file__).resolve().parents[2] / "apps" / "ballot"  # <build>/python/ballot
    if beside.is_file():
        return beside
    found = shutil.which("ballot")
    return Path(found) if found else None


PROGRAM = ballot_program()
# A round deadline for runs whose digests are compared: every vote and every exchanged input counts,
# however slowly a loaded machine starts the processes and their connections. (The server decides
# as soon as all n votes are in; only a run with a missing node waits it out.)
EVERY_VOTE_MS = 60000
pytestmark = pytest.mark.skipif(PROGRAM is None, reason="the `ballot` program is not built (apps/ballot)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args):
    subprocess.run([str(PROGRAM), *map(str, args)], check=True, capture_output=True, timeout=60)


class Cluster:
    """A throw-away PKI and cluster file, as `ballot train` prepares them."""

    def __init__(self, root: Path, round_deadline_ms=3000, **training):
        keys, ca = root / "keys", root / "ca"
        run("keys", "init", "--dir", keys, "--ca-dir", ca)
        run("keys", "issue", 0, "--role", "server", "--dir", keys, "--ca-dir", ca)
        config = dict(TRAINING, **training)
        for node in range(config["nodes"]):
            run("keys", "issue", node + 1, "--dir", keys, "--ca-dir", ca)
        self.root = root
        self.nodes = config["nodes"]
        self.file = root / "cluster.json"
        cluster = {
            "server": {"host": "127.0.0.1", "port": free_port()},
            "keys": str(keys), "checkpoint": "", "metrics": "", "node_state": str(root),
            "round_deadline_ms": round_deadline_ms, "training": config,
        }
        if config["placement"] == "exchange":  # nodes listen too: they send each other their signs
            cluster["nodes"] = [{"host": "127.0.0.1", "port": free_port()} for _ in range(config["nodes"])]
        self.file.write_text(json.dumps(cluster))
        self.processes = []

    def start_server(self):
        self.server = subprocess.Popen([str(PROGRAM), "server", "--cluster", str(self.file)],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.processes.append(self.server)

    def start_nodes(self, except_index=None):
        for i in range(self.nodes):
            if i != except_index:
                log = open(self.root / f"node-{i}.log", "w")
                self.processes.append(subprocess.Popen([str(PROGRAM), "node", "--cluster", str(self.file), "--index",
                                                        str(i)], stdout=log, stderr=subprocess.STDOUT))

    def server_digest(self):
        output, _ = self.server.communicate(timeout=120)
        assert self.server.returncode == 0, output
        lines = [line for line in output.splitlines() if line.startswith("model digest:")]
        assert lines, output
        return lines[-1].split()[-1]

    def node_summary(self):
        """What each C++ node said of its inputs and votes: enough to tell why two runs differ."""
        lines = []
        for log in sorted(self.root.glob("node-*.log")):
            lines += [line for line in log.read_text(errors="replace").splitlines()
                      if "inputs" in line or "votes" in line]
        return "\n".join(lines)

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture
def make_cluster(tmp_path):
    made = []

    def make(round_deadline_ms=3000, **training):
        cluster = Cluster(tmp_path / f"c{len(made)}", round_deadline_ms, **training)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


def honest_index(cluster):
    for index in reversed(range(cluster.nodes)):
        with NodeSession.from_cluster_file(cluster.file, index) as probe:
            if not probe.byzantine:
                return index
    raise AssertionError("no honest node")


def drive(cluster, index, on_compute, ticks=None):
    """Runs node `index` from Python; on_compute(node, work) submits each round's message.
    `ticks`: a list that gets the ticks another Python thread made while the first wait ran."""
    node = NodeSession.from_cluster_file(cluster.file, index)
    cluster.start_server()
    node.start()
    cluster.start_nodes(except_index=index)
    kinds = set()
    ticker = Ticker() if ticks is not None else None
    while True:
        event = node.next_round()
        if ticker:
            ticks.append(ticker.stop())
            ticker = None
        if event.over:
            break
        assert event.kind == "compute" and event.work.round == node.round
        kinds.add(event.work.kind)
        on_compute(node, event.work)
        node.await_decision()
    assert event.kind == "finished"
    return node, kinds


class Ticker:
    """A Python thread that counts while the main thread waits in C++ (which must release the GIL)."""

    def __init__(self):
        self.count, self.running = 0, True
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while self.running:
            self.count += 1
            time.sleep(0.001)

    def stop(self):
        self.running = False
        self.thread.join()
        return self.count


def test_a_python_node_reaches_the_pinned_digest(make_cluster):
    cluster = make_cluster(EVERY_VOTE_MS)
    index = honest_index(cluster)
    digests = []

    def honest(node, work):
        assert work.state_digest == node.state_digest()
        digests.append(work.state_digest)
        out = node.compute()
        assert out.kind == "vote" and out.d == node.dimension and out.signs.dtype == np.uint64
        assert out.signs.shape == ((out.d + 63) // 64,) and np.isfinite(out.loss)
        node.submit(out)

    node, kinds = drive(cluster, index, honest)
    with node:
        assert kinds == {"vote"}
        assert cluster.server_digest() == PINNED_30
        assert node.model_digest() == PINNED_30
        assert node.round == 30 and len(set(digests)) == 30
        stats = node.stats
        assert stats["rounds"] == 30 and stats["votes_sent"] == 30 and stats["rejoins"] == 0
    assert node.closed
    with pytest.raises(RuntimeError, match="closed"):
        node.next_round()


def test_a_node_driven_without_blocking_reaches_the_pinned_digest(make_cluster):
    """poll_for: a caller with its own loop polls with a short timeout (None: nothing yet)."""
    cluster = make_cluster(EVERY_VOTE_MS)
    index = honest_index(cluster)
    node = NodeSession.from_cluster_file(cluster.file, index)
    cluster.start_server()
    node.start()
    cluster.start_nodes(except_index=index)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout"):
            node.poll_for(bad)
    idle = 0
    while True:
        event = node.poll_for(0.005)
        if event is None:
            idle += 1
            assert idle < 100_000
            continue
        if event.over:
            break
        if event.kind == "compute":
            node.submit(node.compute())
    with node:
        assert event.kind == "finished"
        assert idle > 0  # it did return while nothing had arrived
        assert node.model_digest() == PINNED_30
        assert node.stats["votes_sent"] == 30


def test_bad_input_is_an_error_and_the_round_stays_open(make_cluster):
    cluster = make_cluster(EVERY_VOTE_MS)
    index = honest_index(cluster)
    checked, stale = [], []

    def careful(node, work):
        if not checked:
            out = node.compute()
            with pytest.raises(RuntimeError, match="already computed"):
                node.compute()
            with pytest.raises(ValueError, match="dimension"):
                node.submit_vote(out.loss, out.signs, out.d - 1)
            with pytest.raises(ValueError):
                node.submit_vote(out.loss, out.signs[:-1], out.d)  # too few words
            with pytest.raises(TypeError):
                node.submit_vote(out.loss, out.signs.astype(np.float64), out.d)
            with pytest.raises(ValueError, match="takes vote"):
                node.submit_gradient(out.loss, np.zeros(node.dimension, np.float32))
            assert node.work is not None and node.work.round == work.round  # still open
            node.submit(out)
            with pytest.raises(RuntimeError, match="no round is open"):
                node.submit(out)
            checked.append(work.round)
            stale.append(out)
        elif len(checked) == 1:
            # What was computed for round 0 is refused in round 1: it would be signed with this
            # round's state. The round stays open.
            with pytest.raises(ValueError, match="of round 0 and the open round is 1"):
                node.submit(stale[0])
            checked.append(work.round)
            node.submit(node.compute())
        else:
            node.submit(node.compute())

    node, _ = drive(cluster, index, careful)
    with node:
        assert checked == [0, 1]
        assert cluster.server_digest() == PINNED_30 == node.model_digest()


def test_signs_and_momentum_from_the_caller_are_checked(make_cluster):
    """The calls of a caller that folds with its own copy of the worker momentum (ballot.torch on
    a GPU): fold_signs, fold_signs_range, momentum and the momentum source; bad input is a Python
    exception."""
    cluster = make_cluster(EVERY_VOTE_MS, code="identity")  # each node computes its own partition only
    config = json.loads(cluster.file.read_text())
    config["checkpoint_every"] = 2  # the node state file is saved at the decisions of even rounds
    cluster.file.write_text(json.dumps(config))
    index = honest_index(cluster)
    asked = []

    def careful(node, work):
        native = node._native
        row = work.partitions
        other = next(p for p in range(node.nodes) if p not in row)
        zeros = np.zeros((node.dimension + 63) // 64, dtype=np.uint64)
        assert native.momentum(other) is None
        kept = native.momentum(row[0])
        assert kept.dtype == np.float32 and kept.shape == (node.dimension,) and not kept.any()
        with pytest.raises(ValueError, match=f"does not ask for partition {other}"):
            native.fold_signs(other, zeros)
        with pytest.raises(ValueError):
            native.fold_signs(row[0], zeros[:-1])  # too few words
        with pytest.raises(TypeError):
            native.fold_signs(row[0], zeros.astype(np.float64))
        with pytest.raises(ValueError, match="starts at a multiple of 64, not at 1"):
            native.fold_signs_range(row[0], 1, zeros[:1])
        with pytest.raises(ValueError, match="signs of words"):
            native.fold_signs_range(row[0], 64 * len(zeros), zeros[:1])  # past the end
        with pytest.raises(TypeError):
            native.fold_signs_range(row[0], 0, zeros.astype(np.float64))
        with pytest.raises(ValueError, match=f"does not ask for partition {other}"):
            native.fold_signs_range(other, 0, zeros)
        with pytest.raises(ValueError, match="is not folded"):
            native.submit_folded(0.0)
        for partition in row:
            native.fold_signs(partition, zeros)
        native.submit_folded(0.5)  # every partition's signs all -1: the vote is all -1

        def source(partition):
            asked.append(partition)
            return np.zeros(3, dtype=np.float32)
        native.set_momentum_source(source)

    with pytest.raises(ValueError, match=r"expected \d+ values, got 3"):
        drive(cluster, index, careful)
    assert asked == [index]  # its one partition's momentum, asked at the first save and refused


def test_a_partition_folded_twice_in_a_round_is_refused(make_cluster):
    """fold and fold_range advance the worker momentum: a coordinate folded twice in one round is
    a ValueError before anything changes, and the round goes on."""
    cluster = make_cluster(EVERY_VOTE_MS, code="identity")
    index = honest_index(cluster)
    refused = []

    def careful(node, work):
        native = node._native
        gradient = np.ones(node.dimension, dtype=np.float32)
        if not refused:  # an offset whose end wraps past 2**64 to 0
            with pytest.raises(ValueError, match="a piece of the gradient starts at a multiple of 64"):
                native.fold_range(work.partitions[0], 2**64 - 64, gradient[:64])
        for partition in work.partitions:
            native.fold(partition, gradient)
        if not refused:
            partition = work.partitions[0]
            with pytest.raises(ValueError, match="already folded"):
                native.fold(partition, gradient)
            with pytest.raises(ValueError, match="already folded"):
                native.fold_range(partition, 64, gradient[64:128])
            refused.append(work.round)
        native.submit_folded(0.5)

    node, _ = drive(cluster, index, careful)
    with node:
        assert refused == [0]
        assert node.model_digest() == cluster.server_digest()


@pytest.mark.parametrize("codec, has_encoder", [("qsgd:s=16,elias=0", True), ("topk:ratio=0.1,ef=1", True),
                                                ("randomk:ratio=0.5", True), ("fp32", True), ("fp16", True),
                                                ("dgc:ratio=0.1", True), ("gtopk:ratio=0.1", True),
                                                ("qsgd:s=16,elias=1", True), ("scaled_sign:ef=1", True),
                                                ("signum:ef=1", True)])
def test_which_nodes_encode_a_cuda_gradient_on_its_gpu(make_cluster, codec, has_encoder):
    """encodes_on_device: the codecs with a device encoder, in a build with CUDA, at honest nodes
    only (an attack acts on the gradient, on the host)."""
    cluster = make_cluster(EVERY_VOTE_MS, rule="trimmed_mean:f=1", codec=codec, attack="sign_flip", attackers=1)
    seen = set()
    for index in range(cluster.nodes):
        with NodeSession.from_cluster_file(cluster.file, index) as node:
            assert node.encodes_on_device == (has_encoder and ballot.has_cuda and not node.byzantine)
            seen.add(node.byzantine)
    assert seen == {True, False}


def test_a_byzantine_python_caller_does_not_move_the_certified_digest(make_cluster):
    # No configured attacker: the Python node is the one Byzantine node (b = 1), voting the
    # opposite of every sign it computed. The deterministic code's certificate for b = 1 says the
    # decisions, and so the model, stay those of the honest run.
    cluster = make_cluster(EVERY_VOTE_MS, attack="none", attackers=0)
    index = 2

    def flipped(node, work):
        out = node.compute()
        words = ~out.signs
        node.submit_vote(out.loss, words & _valid_mask(out.d, words.shape[0]), out.d)

    node, _ = drive(cluster, index, flipped)
    with node:
        assert not node.byzantine  # by the cluster file: the lie is the caller's own
        assert cluster.server_digest() == PINNED_30 == node.model_digest()


def _valid_mask(d, words):
    mask = np.full(words, np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    if d % 64:
        mask[-1] = np.uint64((1 << (d % 64)) - 1)
    return mask


def test_opening_errors_are_python_exceptions(tmp_path):
    with pytest.raises(FileNotFoundError):
        NodeSession.from_cluster_file(tmp_path / "missing.json", 0)
    cluster = Cluster(tmp_path / "c")
    with pytest.raises(ValueError, match="not below n"):
        NodeSession.from_cluster_file(cluster.file, 7)
    with NodeSession.from_cluster_file(cluster.file, 0) as node:
        with pytest.raises(RuntimeError, match="not started"):
            node.next_round()
        with pytest.raises(RuntimeError, match="not started"):
            node.submit_vote(0.0, np.zeros(1, np.uint64), node.dimension)


def test_what_a_wait_changes_is_not_read_from_another_thread(tmp_path):
    """The round, the work, the digests and the stats change while a call waits without the GIL:
    another thread reading them meanwhile gets the RuntimeError a second call gets (it read
    half-applied states before); the thread of the call, and anyone after it, reads them."""
    import threading

    cluster = Cluster(tmp_path / "c")  # no server: the wait runs its whole time
    with NodeSession.from_cluster_file(cluster.file, 0) as node:
        node.start()
        waiter = threading.Thread(target=node.poll_for, args=(2.0,))
        waiter.start()
        time.sleep(0.5)
        try:
            for read in (lambda: node.round, lambda: node.work, lambda: node.stats, node.model_digest,
                         node.state_digest, lambda: node.global_set):
                with pytest.raises(RuntimeError, match="in use by another thread"):
                    read()
            assert node.dimension > 0  # what never changes stays readable
        finally:
            waiter.join()
        assert node.round == 0
        assert node.stats["rounds"] == 0
        assert len(node.state_digest()) == 64


@pytest.mark.parametrize("call", ["next_round()", "poll()", "poll_for(60)"])
def test_ctrl_c_ends_a_wait_for_a_server_that_never_answers(tmp_path, call):
    cluster = Cluster(tmp_path / "c")  # no server started
    script = ("import sys\n"
              "from ballot.session import NodeSession\n"
              f"node = NodeSession.from_cluster_file({str(cluster.file)!r}, 0)\n"
              "node.start()\n"
              "print('waiting', flush=True)\n"
              "try:\n"
              f"    node.{call}\n"
              "except KeyboardInterrupt:\n"
              "    print('interrupted', flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=10)  # the idle timeout is 5 minutes
    finally:
        if child.poll() is None:
            child.kill()
    assert output.strip() == "interrupted", output


@pytest.mark.parametrize("training", [
    {"rule": "trimmed_mean:f=1", "attack": "none", "attackers": 0},  # the gradient path
    {"placement": "exchange"},                                       # nodes exchange partition signs
], ids=["gradient", "exchange"])
def test_a_python_node_is_a_cpp_node(make_cluster, training):
    """The same config run all in C++ and with node k driven from Python: the same model."""
    reference = make_cluster(EVERY_VOTE_MS, rounds=8, **training)
    reference.start_server()
    reference.start_nodes()
    expected = reference.server_digest()

    cluster = make_cluster(EVERY_VOTE_MS, rounds=8, **training)
    index = honest_index(cluster)
    ticks = []
    node, kinds = drive(cluster, index, lambda node, work: node.submit(node.compute()), ticks=ticks)
    with node:
        assert kinds == ({"gradient"} if "rule" in training else {"partition_signs"})
        assert cluster.server_digest() == expected == node.model_digest(), \
            f"all C++:\n{reference.node_summary()}\nnode {index} from Python: {node.stats}\n{cluster.node_summary()}"
        assert node.stats["rounds"] == 8
    assert ticks[0] > 10, "the wait for the first round held the GIL"


def test_global_top_k_changes_only_its_global_set(make_cluster):
    """gtopk on the gradient path (Shi et al.): the server applies the k largest coordinates of its
    rule's output, and every node's codec takes that global set back. With plain SGD a round moves
    only the set's coordinates; a Python node is a C++ node here too."""
    training = {"rule": "trimmed_mean:f=1", "attack": "none", "attackers": 0, "codec": "gtopk:ratio=0.01",
                "update": "sgd:momentum=0,wd=0", "lr": "constant:lr=0.5", "rounds": 6}
    reference = make_cluster(EVERY_VOTE_MS, **training)
    reference.start_server()
    reference.start_nodes()
    expected = reference.server_digest()

    cluster = make_cluster(EVERY_VOTE_MS, **training)
    index = honest_index(cluster)
    changes = []

    def on_compute(node, work):
        if work.round > 0:  # what the last decision moved, against the global set it named
            layout = [(name, size) for name, _, _, size in node._native.tensors()]
            update = codecs.Codec("gtopk:ratio=0.01").decode(node.global_set, layout)
            moved = np.flatnonzero(node._native.parameters() != on_compute.before)
            changes.append((set(moved), set(np.flatnonzero(update))))
        on_compute.before = np.array(node._native.parameters())
        node.submit(node.compute())

    node, _ = drive(cluster, index, on_compute)
    with node:
        assert cluster.server_digest() == expected == node.model_digest()
    assert len(changes) == 5
    k = int(np.ceil(0.01 * node.dimension))
    for moved, chosen in changes:
        assert 0 < len(chosen) <= k
        assert moved <= chosen and len(moved) > len(chosen) // 2


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_ballot_train_takes_its_throw_away_keys_with_it(stop):
    """`ballot train` without --work-dir makes a PKI (the CA key among it) in a temporary
    directory: stopped by Ctrl-C or SIGTERM, it stops its cluster and removes the keys."""
    process = subprocess.Popen([str(PROGRAM), "train", "--rounds", "100000", "--data", "synthetic", "--model", "logreg",
                                "--nodes", "3", "--eval-every", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    work_dir = None
    try:
        for line in process.stdout:
            if line.startswith("work directory: "):
                work_dir = Path(line.split()[2])
            if line.startswith("round "):
                break
        assert work_dir is not None and (work_dir / "ca").exists()
        process.send_signal(stop)  # to the command alone, as `kill` would
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output
    assert "stopped by a signal" in output
    assert not (work_dir / "keys").exists() and not (work_dir / "ca").exists()
    assert (work_dir / "server.log").exists() or any(work_dir.glob("*.log"))
    shutil.rmtree(work_dir, ignore_errors=True)


def test_a_relative_work_dir_gives_a_cluster_file_that_works_from_anywhere(tmp_path):
    """`ballot train --work-dir rel` writes absolute paths into rel/cluster.json, so that
    `ballot node --cluster .../rel/cluster.json` (a restart, as the user guide shows) works from
    another directory."""
    subprocess.run([str(PROGRAM), "train", "--rounds", "2", "--data", "synthetic", "--model", "logreg", "--nodes", "3",
                    "--eval-every", "0", "--work-dir", "rel"], cwd=tmp_path, check=True, capture_output=True,
                   timeout=120)
    config = json.loads((tmp_path / "rel" / "cluster.json").read_text())
    for key in ("keys", "checkpoint", "metrics", "node_state"):
        assert Path(config[key]).is_absolute() and str(config[key]).startswith(str(tmp_path / "rel")), (key, config)
    assert Path(config["keys"], "ca.crt").exists()
