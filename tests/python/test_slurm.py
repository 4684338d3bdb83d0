"""`ballot launch` under a real Slurm (the `slurm` fixture of conftest.py: Debian's slurmctld and
slurmd on this machine): `srun --ntasks n+1 ballot launch --cluster F` runs the server on task 0
and node k − 1 on task k, as a batch script on many machines does, and trains the pinned run.

Skipped without the `ballot` program, without Slurm's programs, or when not root."""

import json
import re
import subprocess

import pytest

from test_session import PINNED_30, PROGRAM, Cluster

pytestmark = pytest.mark.skipif(PROGRAM is None, reason="the `ballot` program is not built (apps/ballot)")

DIGEST = re.compile(r"model digest: ([0-9a-f]{64})")


def srun(slurm, tasks, command, logs, timeout):
    """Runs `command` as `tasks` tasks of one Slurm job step; each task's output in logs/task-K.log.
    A task that fails ends the others (--kill-on-bad-exit)."""
    logs.mkdir()
    return subprocess.run(["srun", "--ntasks", str(tasks), "--kill-on-bad-exit=1", "--time=10",
                           "--chdir", str(logs), "--output", str(logs / "task-%t.log"), *map(str, command)],
                          env=slurm, capture_output=True, text=True, timeout=timeout)


def task_logs(logs, tasks):
    return [(logs / f"task-{k}.log").read_text(errors="replace") if (logs / f"task-{k}.log").exists() else ""
            for k in range(tasks)]


def test_srun_launches_the_pinned_run(slurm, tmp_path):
    cluster = Cluster(tmp_path)
    config = json.loads(cluster.file.read_text())
    config["round_deadline_ms"] = 60000  # every vote counted, as the pinned digest assumes
    cluster.file.write_text(json.dumps(config))
    tasks = cluster.nodes + 1
    done = srun(slurm, tasks, [PROGRAM, "launch", "--cluster", cluster.file], tmp_path / "logs", timeout=300)
    logs = task_logs(tmp_path / "logs", tasks)
    assert done.returncode == 0, (done.stdout, done.stderr, [log[-1500:] for log in logs])
    server = DIGEST.findall(logs[0])
    assert server and server[-1] == PINNED_30, logs[0][-3000:]
    for k in range(1, tasks):
        assert re.search(rf"node {k - 1}: model digest: {PINNED_30}", logs[k]), (k, logs[k][-2000:])


def test_srun_with_the_wrong_task_count_is_refused(slurm, tmp_path):
    cluster = Cluster(tmp_path, nodes=3)
    done = srun(slurm, 2, [PROGRAM, "launch", "--cluster", cluster.file], tmp_path / "logs", timeout=120)
    logs = "".join(task_logs(tmp_path / "logs", 2))
    assert done.returncode != 0
    assert "SLURM_NTASKS (beside SLURM_PROCID): the launcher started 2 processes, the cluster needs n + 1 = 4" in logs, logs[-2000:]
