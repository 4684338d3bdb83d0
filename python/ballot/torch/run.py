"""``python -m ballot.torch.run [ballot train options] train.py [script arguments]``

Runs a PyTorch training script as a local Ballot cluster, the way ``ballot train`` runs the
built-in models: a throw-away PKI, one ``ballot server`` process (no torch: it holds the init
file's flat parameters) and ``--nodes`` processes of the script, each a :class:`ballot.torch.Node`,
over mutual TLS on loopback, with live progress and metrics as JSON lines.

1. The script runs once with ``BALLOT_EXPORT_INIT`` set: its ``Node(model, examples=N)`` writes the
   model's initial parameters (Ballot's parameter file, never pickle) and N, then exits.
2. ``ballot train --init FILE --data external:train=N [options] -- python train.py ARGS`` runs
   the cluster; every node process gets ``BALLOT_CLUSTER`` and ``BALLOT_NODE_INDEX`` and one
   compute thread (``OMP_NUM_THREADS=1`` unless set: nodes that compute the same partition must
   get the same bits).

Options are ``ballot train``'s (``--nodes``, ``--byzantine``, ``--attack``, ``--attackers``,
``--code``, ``--placement``, ``--rule``, ``--codec``, ``--update``, ``--lr``, ``--rounds``, ...)
but ``--init`` (the launcher writes it), ``--simulate`` and ``--lockstep`` (built-in models only),
plus ``--ballot PATH`` (the ``ballot`` program; default ``$BALLOT_PROGRAM`` or the one on PATH).
Unlike ``ballot train``'s demo there is no attacker unless ``--attack`` or ``--attackers`` says so.
The work directory (``--work-dir``, else a temporary one) keeps the logs: ``node-<i>.log`` holds
what node i's script printed; the last lines of node 0's are shown at the end.

This starts a cluster on one machine. On many machines, the same script runs under Slurm, torchrun
or Open MPI: rank 0 runs ``ballot launch --cluster F --init FILE`` (the server) and rank k the
script as node k - 1 (docs/pytorch.md, "On many machines"); a node may itself be a local process
group (``Node(..., group=...)``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import List, Optional, Sequence, Tuple

__all__ = ["main", "find_ballot"]

# `ballot train` options that take a value (they are passed through).
_VALUE_OPTIONS = {
    "-n", "--nodes", "-b", "--byzantine", "--code", "--placement", "--model", "--update", "--worker-momentum", "--lr",
    "--partition-size", "--rounds", "--seed", "--data", "--attack", "--attackers", "--byzantine-nodes", "--rule",
    "--codec", "--eval-every", "--deadline-ms", "--checkpoint-every", "--digest-every", "--metrics", "--work-dir",
    "--config"
}
# `ballot train` flags (passed through).
_FLAG_OPTIONS = {"--relay-decisions"}
_OWN_OPTIONS = {"--ballot"}
# `ballot train` options that have no meaning here, and why.
_NOT_HERE = {
    "--init": "the launcher exports the script's model as the init file itself",
    "--simulate": "a torch script runs as node processes; --simulate runs the built-in models in one process",
    "--lockstep": "a torch script runs as node processes; --lockstep runs the built-in models in one process",
}


def find_ballot(explicit: Optional[str] = None) -> str:
    """The ``ballot`` program: ``explicit`` (which must be one: no other is taken instead),
    ``$BALLOT_PROGRAM``, the one on PATH, or the one pip installed beside this interpreter's
    scripts."""
    if explicit is not None:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise FileNotFoundError(f"--ballot {explicit}: not an executable file")
    for candidate in (os.environ.get("BALLOT_PROGRAM"), shutil.which("ballot"),
                      os.path.join(sysconfig.get_path("scripts"), "ballot")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("cannot find the `ballot` program: pass --ballot PATH or set BALLOT_PROGRAM")


def _split(argv: Sequence[str]) -> Tuple[List[str], Optional[str], str, List[str]]:
    """(ballot options, --ballot value, script, script arguments)."""
    options: List[str] = []
    program: Optional[str] = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if not arg.startswith("-"):
            return options, program, arg, list(argv[i + 1:])
        if name in _OWN_OPTIONS:
            if "=" in arg:
                program = arg.split("=", 1)[1]
                if not program:
                    raise SystemExit("ballot.torch.run: --ballot needs a path")
            elif i + 1 < len(argv):
                program = argv[i + 1]
                i += 1
            else:
                raise SystemExit("ballot.torch.run: --ballot needs a path")
        elif name in _VALUE_OPTIONS:
            if "=" in arg:
                if not arg.split("=", 1)[1]:
                    raise SystemExit(f"ballot.torch.run: {name}= needs a value")
                options.append(arg)
            elif i + 1 < len(argv):
                options += [arg, argv[i + 1]]
                i += 1
            else:
                raise SystemExit(f"ballot.torch.run: {arg} needs a value")
        elif arg in _FLAG_OPTIONS:
            options.append(arg)
        elif name in _NOT_HERE:
            raise SystemExit(f"ballot.torch.run: {name} is not an option here: {_NOT_HERE[name]}")
        elif arg in ("-h", "--help"):
            print(__doc__)
            raise SystemExit(0)
        else:
            raise SystemExit(f"ballot.torch.run: unknown option '{arg}' (ballot train's options: "
                             f"{', '.join(sorted(o for o in _VALUE_OPTIONS | _FLAG_OPTIONS if o.startswith('--')))}; "
                             "and --ballot)")
        i += 1
    raise SystemExit("ballot.torch.run: no script given (python -m ballot.torch.run [options] train.py [args])")


def _given(options: List[str], *names: str) -> Optional[str]:
    """The value of the first of `names` in the options _split kept (NAME=VALUE with a non-empty
    value, or NAME then its value)."""
    for i, arg in enumerate(options):
        name, equals, value = arg.partition("=")
        if name in names:
            return value if equals else options[i + 1]
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    options, program, script, script_args = _split(list(sys.argv[1:] if argv is None else argv))
    try:
        ballot = find_ballot(program)
    except FileNotFoundError as error:
        raise SystemExit(f"ballot.torch.run: {error}") from None
    if not os.path.isfile(script):
        raise SystemExit(f"ballot.torch.run: no script '{script}'")
    work_dir = _given(options, "--work-dir")
    temporary = work_dir is None
    if work_dir is None:
        work_dir = tempfile.mkdtemp(prefix="ballot-torch-")
        options += ["--work-dir", work_dir]
    os.makedirs(work_dir, exist_ok=True)
    init = os.path.abspath(os.path.join(work_dir, "model.init"))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    command = [sys.executable, script, *script_args]
    for stale in (init, init + ".json"):  # a reused --work-dir: only this run's export counts
        if os.path.exists(stale):
            os.remove(stale)
    exported = subprocess.run(command, env={**env, "BALLOT_EXPORT_INIT": init})
    if exported.returncode != 0:
        raise SystemExit(f"ballot.torch.run: the export pass of '{script}' failed (exit {exported.returncode}; "
                         "its error is above)")
    if not os.path.isfile(init):
        raise SystemExit(f"ballot.torch.run: '{script}' ended without exporting its model: it must build a "
                         "ballot.torch.Node(model, ...) before training")
    with open(init + ".json", encoding="utf-8") as meta_file:
        meta = json.load(meta_file)
    if _given(options, "--data") is None:
        if meta.get("examples") is None:
            raise SystemExit("ballot.torch.run: pass examples=len(training set) to ballot.torch.Node, or --data")
        options += ["--data", f"external:train={int(meta['examples'])}"]
    if _given(options, "--attack", "--attackers", "--byzantine-nodes") is None:
        options += ["--attackers", "0"]
    print(f"ballot.torch.run: {meta.get('parameters')} parameters, layout {str(meta.get('layout_digest'))[:16]}…; "
          f"init file {init}", flush=True)
    code = subprocess.call([ballot, "train", *options, "--init", init, "--", *command], env=env)
    log = os.path.join(work_dir, "node-0.log")
    if os.path.isfile(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.readlines()[-5:]
        print(f"node 0 ({log}):\n" + "".join("  " + line for line in tail), end="", flush=True)
    if temporary:  # a throw-away PKI: do not leave its keys behind
        for keys in ("keys", "ca"):
            shutil.rmtree(os.path.join(work_dir, keys), ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
