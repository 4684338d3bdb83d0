"""ballot.torch: PyTorch models as nodes of a real Ballot cluster. The server is a `ballot server`
process (no torch: it holds the init file's flat parameters); the nodes are ballot.torch.Node
objects, either processes started by `python -m ballot.torch.run` (the example script) or threads
of this test process, over mutual TLS. Skipped without torch or the `ballot` program."""

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ballot.torch as bt  # noqa: E402
from ballot import signs  # noqa: E402
from ballot.session import NodeSession  # noqa: E402
from test_session import PROGRAM, make_cluster  # noqa: E402,F401  (make_cluster: a fixture)

pytestmark = pytest.mark.skipif(PROGRAM is None, reason="the `ballot` program is not built (apps/ballot)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "torch_fashion_mnist.py"
DIGEST = re.compile(r"model digest: ([0-9a-f]{64})")
NODE_DIGEST = re.compile(r"node (\d+): .* digest ([0-9a-f]{64})")


def launch(tmp_path, name, *options, script_args=()):
    """`python -m ballot.torch.run OPTIONS example SCRIPT_ARGS`; returns (stdout, work dir)."""
    work = tmp_path / name
    command = [sys.executable, "-m", "ballot.torch.run", "--ballot", str(PROGRAM), "--work-dir", str(work), *options,
               str(EXAMPLE), *script_args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout, work


def node_digests(work, nodes):
    digests = {}
    for i in range(nodes):
        text = (work / f"node-{i}.log").read_text()
        found = NODE_DIGEST.findall(text)
        assert found, text[-2000:]
        digests[i] = found[-1][1]
    return digests


def test_certified_code_makes_the_reverse_attacker_harmless_bit_for_bit(tmp_path):
    # Every vote counted (a long deadline: a slow machine or a sanitizer build must not make an
    # honest node miss a round, which with the attacker would be b + 1 faults).
    common = ["--nodes", "7", "--byzantine", "1", "--code", "deterministic", "--rounds", "12",
              "--checkpoint-every", "1000", "--deadline-ms", "120000"]
    attacked, attacked_work = launch(tmp_path, "attacked", *common, "--attack", "reverse", script_args=["--model", "mlp"])
    clean, _ = launch(tmp_path, "clean", *common, "--attackers", "0", script_args=["--model", "mlp"])
    # The same run with the decisions relayed by the torch nodes themselves.
    relayed, relayed_work = launch(tmp_path, "relayed", *common, "--attack", "reverse", "--relay-decisions",
                                   script_args=["--model", "mlp"])
    assert "adversary: node" in attacked
    server = DIGEST.findall(attacked)[-1]
    assert server == DIGEST.findall(clean)[-1]
    assert server == DIGEST.findall(relayed)[-1]
    assert set(node_digests(attacked_work, 7).values()) == {server}
    assert set(node_digests(relayed_work, 7).values()) == {server}
    assert "test accuracy" in (attacked_work / "node-0.log").read_text()
    metrics = [json.loads(line) for line in (attacked_work / "metrics.jsonl").read_text().splitlines()]
    assert [row["round"] for row in metrics] == list(range(12))
    assert all(row["votes"] == 7 for row in metrics)
    assert metrics[-1]["loss"] < metrics[0]["loss"]


@pytest.mark.parametrize("algorithm, options", [
    ("gradient", ["--update", "sgd:momentum=0.9", "--lr", "constant:lr=0.05"]),
    ("local", ["--update", "sgd", "--lr", "constant:lr=1"]),
])
def test_gradient_path_and_local_sgd_under_alie(tmp_path, algorithm, options):
    stdout, work = launch(tmp_path, algorithm, "--nodes", "5", "--byzantine", "1", "--attack", "alie", "--rule",
                          "nnm:f=1 > trimmed_mean:f=1", "--codec", "qsgd:s=16", "--rounds", "10", *options,
                          script_args=["--model", "mlp", "--algorithm", algorithm, "--local-steps", "3"])
    server = DIGEST.findall(stdout)[-1]
    assert set(node_digests(work, 5).values()) == {server}
    metrics = [json.loads(line) for line in (work / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["loss"] < metrics[0]["loss"]


# ---- nodes as threads of this process, against a `ballot server` process


class Tiny(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.a = nn.Linear(6, hidden)
        self.b = nn.Linear(hidden, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


EXAMPLES = 256
GEN = torch.Generator().manual_seed(7)
DATA_X = torch.randn(EXAMPLES, 6, generator=GEN)
DATA_Y = (DATA_X[:, 0] > 0).long() + (DATA_X[:, 1] > 0.5).long()


def torch_cluster(make_cluster, tmp_path, model=Tiny, **training):
    torch.manual_seed(3)
    init = tmp_path / f"{model.__name__.lower()}.init"
    bt.export_init(model(), init)
    settings = dict(model=f"init:file={init}", data=f"external:train={EXAMPLES}", rounds=8, nodes=5, byzantine=1,
                    attack="none", attackers=0, lr="constant:lr=0.01", partition_size=16)
    settings.update(training)
    return make_cluster(**settings)


def run_threads(cluster, step_for, model_for=lambda _index: Tiny(), on_end=None, algorithm=None, context=None,
                run=lambda node, step: node.run(step)):
    """Every node as a thread of this process; returns {index: (stats, digest)} or raises.
    ``on_end(node)`` runs in the node's thread after its run; ``context(index)``, a context
    manager the node's run goes inside (a CUDA stream); ``run(node, step)`` runs the node."""
    torch.set_num_threads(1)
    results, errors = {}, []
    nodes = [bt.Node(model_for(i), cluster.file, i, algorithm=algorithm) for i in range(cluster.nodes)]

    def work(node):
        try:
            model = node.model
            with context(node.index) if context is not None else contextlib.nullcontext():
                results[node.index] = (run(node, step_for(node.index, model)), node.model_digest())
            if on_end is not None:
                on_end(node)
        except Exception as error:  # reported by the main thread
            errors.append(error)
        finally:
            node.close()

    cluster.start_server()
    threads = [threading.Thread(target=work, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    return results


def plain_step(_index, model):
    return lambda idx: F.cross_entropy(model(DATA_X[idx]), DATA_Y[idx])


def gpu_steps(on_gpu):
    """step_for(index, model): the nodes in `on_gpu` compute on the GPU (their model and the data
    there), the others on the CPU."""
    x, y = DATA_X.cuda(), DATA_Y.cuda()

    def step_for(index, model):
        if index in on_gpu:
            return lambda idx: F.cross_entropy(model(x[idx.cuda()]), y[idx.cuda()])
        return plain_step(index, model)
    return step_for


def test_threads_agree_with_the_server(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path)
    results = run_threads(cluster, plain_step)
    server = cluster.server_digest()
    assert {digest for _, digest in results.values()} == {server}
    assert all(stats["rounds"] == 8 for stats, _ in results.values())


class FrozenFirst(Tiny):
    """Tiny with its first layer frozen (a pretrained backbone under fine-tuning)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)  # the same frozen values on every node, as a shared checkpoint gives
        with torch.no_grad():
            for p in self.a.parameters():
                p.copy_(torch.randn(p.shape))
                p.requires_grad_(False)


def test_frozen_parameters_are_left_alone(make_cluster, tmp_path):
    """A parameter frozen when the Node is built is not in the init file, and no round moves it
    (with it in the flat buffer, a vote's +1 for its zero gradient moved it by -lr every round);
    the trained ones agree with the server."""
    cluster = torch_cluster(make_cluster, tmp_path, model=FrozenFirst)
    init = bt.read_init(tmp_path / "frozenfirst.init")
    assert [name for name, *_ in init.tensors] == ["b.weight", "b.bias"]
    frozen = {name: p.detach().clone() for name, p in FrozenFirst().a.named_parameters()}
    moved = {}

    def on_end(node):
        moved[node.index] = {name: float((p.detach() - frozen[name]).abs().max())
                             for name, p in node.model.a.named_parameters()}
        assert node.model.b.weight.data_ptr() != node.model.a.weight.data_ptr()

    results = run_threads(cluster, plain_step, model_for=lambda _index: FrozenFirst(), on_end=on_end)
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}
    assert all(stats["rounds"] == 8 for stats, _ in results.values())
    assert moved and all(value == 0.0 for node in moved.values() for value in node.values()), moved


def test_a_node_slower_than_the_deadline_ends_with_the_final_parameters(make_cluster, tmp_path):
    """Node 0's rounds take longer than the deadline, so the server decides without it and it falls
    rounds behind; before its Finish the server sends it the final state, so its run() ends with
    the run's parameters (it ended rounds behind, quietly, before)."""
    torch.manual_seed(3)
    init = tmp_path / "tiny.init"
    bt.export_init(Tiny(), init)
    cluster = make_cluster(300, model=f"init:file={init}", data=f"external:train={EXAMPLES}", rounds=8, nodes=5,
                           byzantine=1, attack="none", attackers=0, lr="constant:lr=0.01", partition_size=16)

    def step_for(index, model):
        def step(idx):
            if index == 0:
                time.sleep(0.5)
            return F.cross_entropy(model(DATA_X[idx]), DATA_Y[idx])
        return step

    ended = {}
    results = run_threads(cluster, step_for, on_end=lambda node: ended.update({node.index: node.round}))
    assert ended == {i: 8 for i in range(5)}
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}
    assert results[0][0]["votes_sent"] < 8  # it was behind


def test_run_again_after_an_interrupted_step_computes_that_round(make_cluster, tmp_path):
    """Ctrl-C inside step (before anything of the round reached the session), then run() again,
    as pytorch.md invites: the node computes the interrupted round and the run goes on. With b = 0
    the server needs every vote: the cluster waited for this node's until its quorum timeout."""
    cluster = torch_cluster(make_cluster, tmp_path, byzantine=0)
    calls = {"n": 0}

    def step_for(index, model):
        def step(idx):
            if index == 0:
                calls["n"] += 1
                if calls["n"] == 3:
                    raise KeyboardInterrupt
            return F.cross_entropy(model(DATA_X[idx]), DATA_Y[idx])
        return step

    interrupted = []

    def run(node, step):
        try:
            return node.run(step)
        except KeyboardInterrupt:
            interrupted.append(node.round)
            return node.run(step)

    started = time.monotonic()
    results = run_threads(cluster, step_for, run=run)
    assert interrupted and time.monotonic() - started < 60
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}
    assert all(stats["rounds"] == 8 and stats["votes_sent"] == 8 for stats, _ in results.values()), results


def test_parameters_changed_outside_the_decisions_are_replaced_and_reported(make_cluster, tmp_path, capfd):
    """A write into node 0's parameters outside the cluster's decisions (as a user's own optimizer
    step would make) is found at the next full digest: the server sends its state, which replaces
    the parameters, and the node says why on stderr (before, the rejoin was silent)."""
    cluster = torch_cluster(make_cluster, tmp_path, digest_every=2)

    def run(node, step):
        def on_round(n):
            if n.index == 0 and n.round == 2:
                with torch.no_grad():
                    n.model.a.bias.add_(1.0)
        return node.run(step, on_round=on_round)

    results = run_threads(cluster, plain_step, run=run)
    assert results[0][0]["resynchronised"] >= 1, results[0][0]
    assert all(stats["resynchronised"] == 0 for index, (stats, _) in results.items() if index != 0)
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}
    assert "unlike its own and replaced them" in capfd.readouterr().err


def test_a_non_finite_gradient_is_never_sent(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path)

    def step_for(index, model):
        def step(idx):
            loss = F.cross_entropy(model(DATA_X[idx]), DATA_Y[idx])
            return loss * float("nan") if index == 2 else loss
        return step

    results = run_threads(cluster, step_for)
    server = cluster.server_digest()
    assert results[2][0]["abstained_non_finite"] == 8
    assert results[2][0]["votes_sent"] == 0
    assert {digest for _, digest in results.values()} == {server}  # it still follows the decisions


class TinyWithUnused(Tiny):
    """Tiny with a layer forward never uses: its gradient never comes, and its piece of the vote
    goes out after backward."""

    def __init__(self):
        super().__init__(hidden=40)
        self.unused = nn.Linear(3, 5)


def wait_for_every_vote(cluster):
    """A long round deadline: the server decides when all n votes are in, so two runs count the
    same votes whatever the machine's load."""
    config = json.loads(cluster.file.read_text())
    config["round_deadline_ms"] = 120000
    cluster.file.write_text(json.dumps(config))


@pytest.mark.parametrize("code", ["identity", "deterministic"])
def test_a_vote_sent_in_pieces_during_backward_is_the_same_vote(make_cluster, tmp_path, code):
    digests = {}
    # work_on="model": each piece's momentum and packing on the model's device (the GPU path, on
    # the CPU twins here), its signs handed to the session.
    for pieces, work_on in ((0, "auto"), (1, "auto"), (4, "auto"), (1000, "auto"), (4, "model"), (1000, "model")):
        cluster = torch_cluster(make_cluster, tmp_path, model=TinyWithUnused, code=code, nodes=5, byzantine=1)
        wait_for_every_vote(cluster)
        with NodeSession.from_cluster_file(cluster.file, 0) as probe:
            words = (probe.dimension + 63) // 64
        results = run_threads(cluster, plain_step, model_for=lambda _i: TinyWithUnused(),
                              algorithm=bt.SignVote(pieces=pieces, work_on=work_on))
        server = cluster.server_digest()
        assert {digest for _, digest in results.values()} == {server}
        assert all(stats["votes_sent"] == 8 and stats["abstained"] == 0 for stats, _ in results.values())
        sent = {stats["vote_pieces_sent"] for stats, _ in results.values()}
        if pieces == 0:
            assert sent == {0}
        elif pieces == 4:
            assert sent == {8 * 4}
        else:  # one piece per 64 coordinates at most
            assert sent == {8 * min(pieces, words)}
        digests[pieces, work_on] = server
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("training", [dict(code="deterministic"), dict(code="identity", placement="exchange"),
                                      dict(code="deterministic", update="sign:wd=0.01"),
                                      dict(code="deterministic", update="heavyball"),
                                      dict(code="identity", update="sgd:momentum=0.5,dampening=0.2,wd=0.001"),
                                      dict(code="deterministic", update="signum:beta=0.9,wd=0.01"),
                                      dict(code="deterministic", update="ef_sign")])
def test_the_vote_worked_on_the_models_device_is_the_sessions_bits(make_cluster, tmp_path, training):
    """SignVote(work_on="model"): the worker momentum, the packing and the update (the sign, sgd,
    heavyball, signum and ef_sign rules, with the momentum buffers and ef_sign's error memory) run
    on the model's device (here the CPU, through the kernels and torch operations a GPU runs) and on
    a copy of the parameters; the session gets only the packed signs (and ef_sign's per-layer
    scales).
    The run, every node's copy of the parameters and the momentum each node's state file saves are
    those of the session's work."""
    ends = {}
    for work_on in ("host", "model"):
        cluster = torch_cluster(make_cluster, tmp_path, digest_every=3, **training)
        wait_for_every_vote(cluster)
        config = json.loads(cluster.file.read_text())
        config["checkpoint_every"] = 3  # the node state file: saved at the decisions of rounds 3 and 6
        cluster.file.write_text(json.dumps(config))
        copies = []

        def on_end(node):
            copies.append(node.index)
            replica = torch.from_numpy(node._session._native.parameters())
            assert torch.equal(node.parameters, replica)
            # the update on the model's device works on a copy
            assert node._update_on_model == (work_on == "model")
            assert (node.parameters.data_ptr() != replica.data_ptr()) == node._update_on_model
            assert node.update_mismatches == 0

        results = run_threads(cluster, plain_step, on_end=on_end, algorithm=bt.SignVote(work_on=work_on))
        server = cluster.server_digest()
        assert {digest for _, digest in results.values()} == {server}
        assert all(stats["votes_sent"] == 8 and stats["update_mismatches"] == 0 for stats, _ in results.values())
        assert sorted(copies) == list(range(cluster.nodes))
        states = {i: (cluster.root / f"node-{i}.state").read_bytes() for i in range(cluster.nodes)}
        ends[work_on] = (server, states)
    assert ends["model"][0] == ends["host"][0]
    assert ends["model"][1] == ends["host"][1]


def ef_sign_reference(x, e, v, lr, layers):
    """learning::EfSign's step written out in numpy: p = lr v + e; s = ||p_layer||_1 / size as a
    double sum in coordinate order, rounded to float; x - s sign(p), p - s sign(p) (sign: -1 for
    p < 0, else +1)."""
    x, e, scales = x.copy(), e.copy(), []
    for offset, size in layers:
        part = slice(offset, offset + size)
        e[part] = np.float32(lr) * v[part] + e[part]
        l1 = 0.0
        for value in e[part]:
            l1 += abs(float(value))
        scale = np.float32(l1 / size) if size else np.float32(0.0)
        delta = scale * np.where(e[part] < 0, np.float32(-1.0), np.float32(1.0)).astype(np.float32)
        x[part] -= delta
        e[part] -= delta
        scales.append(scale)
    return x, e, np.array(scales, np.float32)


def test_the_ef_sign_step_on_the_models_copy_is_the_rules_arithmetic():
    """The ef_sign step a node applies to its copy (on a GPU in practice), given the replica's
    per-layer scales, against the rule's arithmetic: an error memory that is not zero (as after a
    state that carried one), layers of different scales and an empty one, -0 and subnormal
    parameters, p exactly 0 and a NaN; every bit of x and e."""
    rng = np.random.default_rng(5)
    layers = [(0, 48), (48, 0), (48, 8), (56, 100), (156, 3)]
    d = 159
    x = rng.standard_normal(d).astype(np.float32)
    x[::7] = -0.0
    x[3] = np.float32(1e-42)
    e = (rng.standard_normal(d) * np.repeat([1.0, 1.0, 10.0, 0.01, 100.0], [48, 0, 8, 100, 3])).astype(np.float32)
    copy = SimpleNamespace(_model_flat=torch.from_numpy(x.copy()), _buffer=torch.from_numpy(e.copy()),
                           _ef_layers=None, _rule={"layers": layers}, _device=torch.device("cpu"))
    for step in range(12):
        v = np.where(rng.integers(0, 2, d) == 1, 1.0, -1.0).astype(np.float32)
        lr = float(np.float32(10.0 ** rng.uniform(-3, 0)))
        if step == 4:  # p = +0 at coordinate 10 (its sign counts as +1)
            e[10] = -np.float32(lr) * v[10]
            copy._buffer.copy_(torch.from_numpy(e))
        if step == 8:  # a NaN in the memory stays on its coordinate's layer
            e[60] = np.nan
            copy._buffer.copy_(torch.from_numpy(e))
        x, e, scales = ef_sign_reference(x, e, v, lr, layers)
        bt.Node._ef_sign_step(copy, signs.pack(torch.from_numpy(v)), lr, scales)
        assert np.array_equal(copy._model_flat.numpy().view(np.uint32), x.view(np.uint32)), step
        assert np.array_equal(copy._buffer.numpy().view(np.uint32), e.view(np.uint32)), step
    assert len(set(scales[[0, 2, 4]].tolist())) == 3  # the layers' scales differ
    with pytest.raises(RuntimeError, match="do not tile"):
        bt.Node._ef_sign_step(SimpleNamespace(_model_flat=torch.zeros(10), _buffer=torch.zeros(10), _ef_layers=None,
                                              _rule={"layers": [(0, 4), (5, 5)]}, _device=torch.device("cpu")),
                              signs.pack(torch.ones(10)), 0.1, np.ones(2, np.float32))


@pytest.mark.parametrize("update", ["sign:wd=0", "heavyball", "signum", "ef_sign"])
def test_a_models_copy_that_diverged_from_the_replica_is_caught_and_replaced(make_cluster, tmp_path, update):
    """The parameters on the model's device are compared with the replica's at each round whose
    state digest is the parameters' (digest_every): a copy changed behind the node's back (here
    by its own step function, early in the run) is reported, counted and replaced by the replica's
    (with the heavyball rule's momentum buffer)."""
    cluster = torch_cluster(make_cluster, tmp_path, code="deterministic", digest_every=3, update=update)
    calls = [0]

    def step_for(index, model):
        def step(idx):
            if index == 0:
                calls[0] += 1
                if calls[0] == 2:
                    with torch.no_grad():
                        model.a.weight[0, 0] += 1.0
            return F.cross_entropy(model(DATA_X[idx]), DATA_Y[idx])
        return step

    def on_end(node):
        assert torch.equal(node.parameters, torch.from_numpy(node._session._native.parameters()))

    results = run_threads(cluster, step_for, on_end=on_end, algorithm=bt.SignVote(work_on="model"))
    assert results[0][0]["update_mismatches"] == 1
    assert all(results[i][0]["update_mismatches"] == 0 for i in range(1, cluster.nodes))
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}


def test_an_interrupted_update_of_the_models_copy_is_repaired_before_the_next_vote(make_cluster, tmp_path,
                                                                                  monkeypatch):
    """A Ctrl-C (or an out-of-memory error) while the decisions' votes are applied to the model's
    copy loses the votes already taken from the session: the next refresh copies the replica's
    state, so no round is computed on parameters other than the replica's."""
    cluster = torch_cluster(make_cluster, tmp_path, code="deterministic", digest_every=1000)
    apply_vote, interrupted = bt.Node._apply_vote, []

    def flaky(self, *args):
        if self.index == 0 and self._session.round >= 3 and not interrupted:
            interrupted.append(self._session.round)
            raise KeyboardInterrupt("in the middle of the model's update")
        return apply_vote(self, *args)

    monkeypatch.setattr(bt.Node, "_apply_vote", flaky)
    differs = []

    def run(node, step):
        def checked(idx):
            if not torch.equal(node._model_flat, node._flat):
                differs.append(node._session.round)
            return step(idx)
        if node.index != 0:
            return node.run(step)
        with pytest.raises(KeyboardInterrupt):
            node.run(checked)
        return node.run(checked)

    results = run_threads(cluster, plain_step, algorithm=bt.SignVote(work_on="model"), run=run)
    assert interrupted and not differs
    assert results[0][0]["update_mismatches"] == 0
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}


def test_an_error_in_the_attackers_gradient_source_closes_the_round(make_cluster, tmp_path):
    """The ALIE attacker recomputes the honest gradients through the node's step inside its
    submission: an exception there reaches the caller, the round is over (the session used it up),
    and a second run follows the cluster to the end."""
    cluster = torch_cluster(make_cluster, tmp_path, code="deterministic", attack="alie", attackers=1)
    seen = {}

    def run(node, step):
        if not node._session.byzantine:
            return node.run(step)
        calls = []

        def raising(idx):
            if node._session.round == 2:
                calls.append(idx)
                if len(calls) == 4:
                    raise ValueError("raised in the gradient source")
            return step(idx)
        with pytest.raises(ValueError, match="in the gradient source"):
            node.run(raising)
        seen["work"] = node._session.work
        seen["submitted_in_round_2"] = node._session.stats["votes_sent"]
        return node.run(step)

    results = run_threads(cluster, plain_step, run=run)
    assert "work" in seen and seen["work"] is None
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}


def test_work_on_is_checked(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path)
    with pytest.raises(ValueError, match="work_on must be 'auto', 'model' or 'host', got 'gpu'"):
        bt.Node(Tiny(), cluster.file, 0, algorithm=bt.SignVote(work_on="gpu"))
    gradient = torch_cluster(make_cluster, tmp_path, rule="trimmed_mean:f=1", update="sgd", codec="qsgd:s=16")
    for algorithm in (bt.RobustGradient(work_on="gpu"), bt.RobustLocalSGD(work_on="GPU")):
        with pytest.raises(ValueError, match=f"{type(algorithm).__name__}: work_on must be 'auto', 'model' or "
                                             "'host', got"):
            bt.Node(Tiny(), gradient.file, 0, algorithm=algorithm)
    with bt.Node(Tiny(), gradient.file, 0, algorithm=bt.RobustGradient(work_on="model")) as node:
        assert not node._encode_on_model  # a CPU model's gradient is encoded where it lies, in the session


def test_a_non_finite_piece_stops_the_vote(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path, model=TinyWithUnused)

    def step_for(index, model):
        def step(idx):
            loss = F.cross_entropy(model(DATA_X[idx]), DATA_Y[idx])
            if index != 2:
                return loss
            return loss + 0.0 * model.a.weight.sum() * float("inf")  # only layer a's gradient is NaN
        return step

    results = run_threads(cluster, step_for, model_for=lambda _i: TinyWithUnused(), algorithm=bt.SignVote(pieces=4))
    assert results[2][0]["abstained_non_finite"] == 8
    assert results[2][0]["votes_sent"] == 0
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}


def test_pieces_must_be_a_count(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="pieces must be an integer"):
            bt.Node(Tiny(), cluster.file, 0, algorithm=bt.SignVote(pieces=bad))


def test_the_gradient_path_from_threads(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path, rule="trimmed_mean:f=1", update="sgd", codec="fp32")
    results = run_threads(cluster, plain_step)
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}


def test_a_model_on_two_devices_is_refused(make_cluster, tmp_path):
    model = Tiny()
    model.b.to("meta")
    with pytest.raises(ValueError, match="'b.weight' is on meta, 'a.weight' on cpu"):
        bt.Node(model, tmp_path / "none.json", 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA path is checked on a GPU machine")
@pytest.mark.parametrize("training, side_stream", [
    ({}, False),  # the vote: worker momentum, packing and the sign update on the GPU (work_on "auto")
    (dict(rounds=100, digest_every=10), False),  # the same over 100 rounds, the copy checked every 10
    ({}, True),  # the GPU nodes on a stream of their own: the node's kernels follow torch's current stream
    (dict(update="heavyball", rounds=30), False),  # the update's momentum buffer on the GPU too
    (dict(update="signum:beta=0.9", rounds=30), False),  # its momentum on the GPU, from the unpacked votes
    (dict(update="ef_sign"), False),  # its error memory on the GPU, with the replica's per-layer scales
    (dict(pieces=4), True),  # the vote in pieces during backward, each piece folded and packed on the GPU
    (dict(rule="trimmed_mean:f=1", update="sgd:momentum=0.9", codec="fp32"), False),
])
def test_cuda_models_follow_the_cluster_bit_for_bit(make_cluster, tmp_path, training, side_stream):
    training = dict(training)
    pieces = training.pop("pieces", 0)
    cluster = torch_cluster(make_cluster, tmp_path, **training)
    rounds = training.get("rounds", 8)
    on_gpu = {0, 2, 3}  # the others train on the CPU in the same cluster
    checked = []

    def stream_for(index):
        if side_stream and index in on_gpu:
            return torch.cuda.stream(torch.cuda.Stream())
        return contextlib.nullcontext()

    def on_end(node):
        if node.index in on_gpu:
            flat = node.parameters
            assert flat.is_cuda and node.model.a.weight.is_cuda
            # zero copy: every parameter is a view of the one flat CUDA tensor, in the layout's order
            offset = 0
            for p in node.model.parameters():
                assert p.data_ptr() == flat.data_ptr() + 4 * offset
                offset += p.numel()
            # the GPU copy holds the host replica's exact bits
            assert torch.equal(flat.cpu(), torch.from_numpy(node._session._native.parameters()))
            if node.training["rule"] == "vote":  # each partition's momentum stayed on the GPU
                assert node._momentum and all(m.is_cuda for m in node._momentum.values())
                assert node.update_mismatches == 0
                assert node._update_on_model
            checked.append(node.index)

    results = run_threads(cluster, gpu_steps(on_gpu), lambda i: Tiny().cuda() if i in on_gpu else Tiny(), on_end,
                          context=stream_for, algorithm=bt.SignVote(pieces=pieces) if pieces else None)
    assert {digest for _, digest in results.values()} == {cluster.server_digest()}
    assert sorted(checked) == sorted(on_gpu)
    if pieces:  # every node, on the GPU or not, sent its votes in pieces
        assert all(stats["vote_pieces_sent"] >= rounds for stats, _ in results.values())
    assert all(stats["rounds"] == rounds for stats, _ in results.values())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA path is checked on a GPU machine")
@pytest.mark.parametrize("codec", ["qsgd:s=16,elias=0", "topk:ratio=0.25,ef=1", "randomk:ratio=0.5",
                                   "scaled_sign:granularity=layer,ef=1", "terngrad",
                                   "dgc:ratio=0.05,warmup=4", "gtopk:ratio=0.1"])
def test_a_cuda_gradient_encoded_on_its_gpu_is_the_hosts_bytes(make_cluster, tmp_path, codec):
    """RobustGradient(work_on="model"): the GPU nodes' gradients are encoded on the GPU (only the
    bytes cross); work_on="host" copies the same gradients to the host and the session encodes
    them. The two runs end at the same digest, and every node's state file (error feedback's memory,
    synchronised from the GPU before each save) holds the same bytes."""
    on_gpu = {0, 2, 3}
    ends = {}
    for work_on in ("host", "model"):
        # DGC's momentum is at the node: its receiver applies plain SGD (a second momentum is refused).
        update = "sgd" if codec.startswith("dgc") else "sgd:momentum=0.9"
        cluster = torch_cluster(make_cluster, tmp_path, rule="trimmed_mean:f=1", update=update, codec=codec,
                                rounds=12)
        wait_for_every_vote(cluster)
        config = json.loads(cluster.file.read_text())
        config["checkpoint_every"] = 4
        cluster.file.write_text(json.dumps(config))
        encoded = []

        def on_end(node):
            if node.index in on_gpu:
                encoded.append(node._encode_on_model)

        results = run_threads(cluster, gpu_steps(on_gpu), lambda i: Tiny().cuda() if i in on_gpu else Tiny(),
                              on_end, algorithm=bt.RobustGradient(work_on=work_on))
        server = cluster.server_digest()
        assert {digest for _, digest in results.values()} == {server}
        assert encoded == [work_on == "model"] * len(on_gpu)
        ends[work_on] = (server, {i: (cluster.root / f"node-{i}.state").read_bytes() for i in range(cluster.nodes)})
    assert ends["model"] == ends["host"]


def test_a_different_model_is_refused_naming_the_parameter(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path)
    with pytest.raises(ValueError, match=r"parameter 0: .*'a.weight' \[8, 6\].*'a.weight' \[9, 6\]"):
        bt.Node(Tiny(hidden=9), cluster.file, 0)
    extra = nn.Sequential()
    extra.add_module("a", nn.Linear(6, 8))
    extra.add_module("b", nn.Linear(8, 3))
    extra.add_module("c", nn.Linear(3, 3))
    with pytest.raises(ValueError, match=r"4 parameters, this model 6 .*'c.weight'"):
        bt.Node(extra, cluster.file, 0)
    with pytest.raises(ValueError, match="SignVote needs|RobustGradient needs"):
        bt.Node(Tiny(), cluster.file, 0, algorithm=bt.RobustGradient())
    with pytest.raises(ValueError, match="training set has 100 examples"):
        bt.Node(Tiny(), cluster.file, 0, examples=100)


def test_bad_models_and_missing_files(make_cluster, tmp_path, monkeypatch):
    with pytest.raises(TypeError, match="'a.weight' is torch.float64"):
        bt.Node(Tiny().double(), tmp_path / "none.json", 0)
    monkeypatch.delenv("BALLOT_CLUSTER", raising=False)
    monkeypatch.delenv("BALLOT_NODE_INDEX", raising=False)
    for variable in ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ValueError, match="no cluster"):
        bt.Node(Tiny())
    cluster = torch_cluster(make_cluster, tmp_path)
    os.remove(tmp_path / "tiny.init")
    with pytest.raises((FileNotFoundError, ValueError, RuntimeError), match="tiny.init"):
        bt.Node(Tiny(), cluster.file, 0)


def test_misuse_of_a_node_is_a_named_error(make_cluster, tmp_path):
    """A layer replaced or a model converted after the Node was built, run() under no_grad, an
    algorithm given by name, a negative index: errors that say what to do, not silent drift or
    torch's and nanobind's messages."""
    cluster = torch_cluster(make_cluster, tmp_path, rounds=3, nodes=3, byzantine=1)
    with pytest.raises(TypeError, match="algorithm must be ballot.torch.SignVote"):
        bt.Node(Tiny(), cluster.file, 0, algorithm="signvote")
    with pytest.raises(ValueError, match="node index -1"):
        bt.Node(Tiny(), cluster.file, -1)
    cluster.start_server()
    replaced = bt.Node(Tiny(), cluster.file, 0)
    replaced.model.b = nn.Linear(8, 3)
    converted = bt.Node(Tiny(), cluster.file, 1)
    converted.model.double()
    quiet = bt.Node(Tiny(), cluster.file, 2)
    try:
        with pytest.raises(ValueError, match="'b.weight' is no longer the node's view"):
            replaced.run(plain_step(0, replaced.model))
        with pytest.raises(ValueError, match="'a.weight' is no longer the node's view"):
            converted.run(plain_step(1, converted.model))
        with torch.no_grad(), pytest.raises(ValueError, match="under torch.no_grad"):
            quiet.run(plain_step(2, quiet.model))
    finally:
        for node in (replaced, converted, quiet):
            node.close()


def test_the_builtin_node_refuses_a_parameter_file_model(make_cluster, tmp_path):
    cluster = torch_cluster(make_cluster, tmp_path)
    result = subprocess.run([str(PROGRAM), "node", "--cluster", str(cluster.file), "--index", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "ballot.torch" in result.stderr


def test_export_mode_writes_the_init_file_and_exits(tmp_path, monkeypatch):
    target = tmp_path / "m.init"
    monkeypatch.setenv("BALLOT_EXPORT_INIT", str(target))
    with pytest.raises(SystemExit) as exited:
        bt.Node(Tiny(), examples=EXAMPLES)
    assert exited.value.code == 0
    meta = json.loads((tmp_path / "m.init.json").read_text())
    assert meta["examples"] == EXAMPLES and meta["parameters"] == 6 * 8 + 8 + 8 * 3 + 3
    assert bt.read_init(target).layout_digest == meta["layout_digest"]


def test_the_copy_check_compares_bits():
    """The GPU copy of the parameters is checked bit for bit: the same NaN is equal (a NaN parameter
    is not a mismatch every round), -0 and +0 differ."""
    from ballot.torch.node import _same_bits

    a = np.array([1.0, np.nan, -0.0, 2.5], np.float32)
    assert _same_bits(a, a.copy())
    assert not np.array_equal(a, a.copy())  # what a value comparison would say
    assert not _same_bits(a, np.array([1.0, np.nan, 0.0, 2.5], np.float32))
    assert not _same_bits(a, a[:3])
    assert _same_bits(np.empty(0, np.float32), np.empty(0, np.float32))
