"""Shared fixtures of the Python tests. The package under test is the one on sys.path: the build
tree's (PYTHONPATH=<build>/python, as scripts/test.sh sets it) or an installed one."""

import os
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def torch_or_skip():
    return pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")


# ---- a private Slurm cluster on this machine -----------------------------------------------------

SLURM_PROGRAMS = ("slurmctld", "slurmd", "srun", "sinfo", "scancel")


def _free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real Slurm (Debian's slurmctld and slurmd) of one machine, started for the tests that ask
    for it and stopped after them: its own configuration, state and ports in a temporary folder, so
    a Slurm installed on the machine is not touched. Yields the environment in which srun, sinfo
    and scancel talk to it (SLURM_CONF). The daemons run as root (auth/none: nothing leaves this
    machine); skipped when not root or without the programs (Debian: slurmctld slurmd
    slurm-client)."""
    missing = [p for p in SLURM_PROGRAMS if shutil.which(p) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing; Debian: slurmctld slurmd slurm-client)")
    if os.geteuid() != 0:
        pytest.skip("a private Slurm's daemons run as root here (auth/none), and this is not root")
    root = tmp_path_factory.mktemp("slurm")
    for folder in ("state", "spool", "log"):
        (root / folder).mkdir()
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=ballottest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_tcp_port()}",
        f"SlurmdPort={_free_tcp_port()}",
        "AuthType=auth/none", "CredType=cred/none",
        "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}", f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/pgid", "TaskPlugin=task/none", "SwitchType=switch/none", "MpiDefault=none",
        "ReturnToService=2", "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        # More task slots than cores: a test cluster runs n + 1 light processes on a 2-core machine.
        "SlurmdParameters=config_overrides",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs=32 State=UNKNOWN",
        "PartitionName=ballot Nodes=ALL Default=YES MaxTime=30 State=UP OverSubscribe=FORCE",
        "",
    ]))
    env = dict(os.environ, SLURM_CONF=str(conf))
    for variable in [v for v in env if v.startswith(("SLURM_", "SBATCH_", "SALLOC_")) and v != "SLURM_CONF"]:
        del env[variable]  # this process may itself run under Slurm: the tests talk to their own
    daemons = []
    try:
        for command in (["slurmctld", "-D", "-i", "-f", str(conf)], ["slurmd", "-D", "-f", str(conf), "-N", host]):
            log = open(root / "log" / f"{command[0]}.out", "w")
            daemons.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True))
            log.close()
        until = time.monotonic() + 60
        state = ""
        while time.monotonic() < until:
            for daemon in daemons:
                if daemon.poll() is not None:
                    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted((root / "log").iterdir()))
                    pytest.fail(f"{daemon.args[0]} exited {daemon.returncode}:\n{logs}")
            probe = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10)
            state = probe.stdout.strip()
            if probe.returncode == 0 and state.startswith("idle"):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the private Slurm did not become idle in 60 s (node state {state!r})")
        yield env
    finally:
        if daemons:
            subprocess.run(["scancel", "--full", "--partition", "ballot"], env=env, capture_output=True, timeout=30)
        for daemon in reversed(daemons):
            daemon.terminate()
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
