"""A fake SLURM on this machine: ``sbatch``, ``srun``, ``scontrol`` and ``sacct`` executables that
run a submitit job script the way a SLURM cluster would, for tests of hydra/launcher=slurm.

* ``sbatch SCRIPT`` keeps a copy of the script (``<state>/sbatch_<n>.sh``), then runs it at once
  with ``bash``, once per array task (``#SBATCH --array=0-N%k``), with the job's SLURM variables
  (``SLURM_JOB_ID``, ``SLURM_ARRAY_JOB_ID``, ``SLURM_ARRAY_TASK_ID``, ``SLURM_JOB_NAME``,
  ``SLURM_NNODES``, ``SLURM_JOB_NUM_NODES``, ``SLURM_NTASKS_PER_NODE``, ``SLURM_JOB_NODELIST``).
  A task whose job ran ``scontrol requeue <id>`` is started again from the script's beginning with
  ``SLURM_RESTART_COUNT`` counting the restarts (as SLURM does; it is unset on the first start),
  at most ``MAX_RESTARTS`` times. Prints ``Submitted batch job <id>`` as sbatch does.
* ``srun [--flags] CMD...`` starts CMD once per task, nodes x tasks-per-node processes at once,
  each with ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``, ``SLURM_NTASKS``; its
  ``--output``/``--error`` patterns (``%A``, ``%a``, ``%j``, ``%t``) name the log files.
* ``scontrol requeue <id>`` appends ``<id>`` to ``<state>/requeued``.
* ``sacct`` reports every job that sbatch ran to its end as COMPLETED (so a job that left no
  result makes submitit fail at once instead of waiting).

The state folder is ``$FAKE_SLURM_DIR``; the job's own output goes to ``<state>/job_output.log``,
never to sbatch's stdout, which submitit parses.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

MAX_RESTARTS = 3

SBATCH = r'''
import os, re, subprocess, sys
from pathlib import Path

state = Path(os.environ["FAKE_SLURM_DIR"])
script_path = Path(sys.argv[-1])
script = script_path.read_text()
# submitit writes one "#SBATCH --key=value" line per option (values shell-quoted, never spaced)
flags = {k: v.strip("'") for k, v in re.findall(r"^#SBATCH --([\w-]+)=(\S+)$", script, re.M)}

if os.environ.get("FAKE_SBATCH_JOB_ID") is None:
    # sbatch itself: record the script, take a job id, start the job in the background and return,
    # as SLURM does (submitit moves the job's pickle into place only once it has the id; the job
    # waits for it)
    n = len(list(state.glob("sbatch_*.sh")))
    array_job_id = str(4200 + 100 * n)
    (state / f"sbatch_{n}.sh").write_text(script)
    runner = subprocess.Popen([sys.executable, __file__, *sys.argv[1:]],
                              env={**os.environ, "FAKE_SBATCH_JOB_ID": array_job_id},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    with open(state / "runner_pids", "a") as f:
        f.write(f"{runner.pid}\n")
    print(f"Submitted batch job {array_job_id}")
    sys.exit(0)

# the job: each array task in turn, started again after `scontrol requeue`
array_job_id = os.environ.pop("FAKE_SBATCH_JOB_ID")
if "array" in flags:
    first, last = (int(x) for x in flags["array"].split("%")[0].split("-"))
    tasks = list(range(first, last + 1))
else:
    tasks = [None]
nodes = int(flags.get("nodes", "1"))
base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
base.update(SLURM_JOB_NAME=flags.get("job-name", "sbatch"), SLURM_NNODES=str(nodes),
            SLURM_JOB_NUM_NODES=str(nodes), SLURM_NTASKS_PER_NODE=flags.get("ntasks-per-node", "1"),
            SLURM_JOB_NODELIST=f"fake[0-{nodes - 1}]" if nodes > 1 else "fake0", SLURM_SUBMIT_DIR=os.getcwd())
with open(state / "job_output.log", "a") as log:
    for task in tasks:
        env = dict(base)
        if task is None:
            env["SLURM_JOB_ID"] = job_id = array_job_id
        else:
            env.update(SLURM_JOB_ID=str(int(array_job_id) + 1 + task), SLURM_ARRAY_JOB_ID=array_job_id,
                       SLURM_ARRAY_TASK_ID=str(task))
            job_id = f"{array_job_id}_{task}"
        for restart in range(MAX_RESTARTS + 1):
            if restart:
                env["SLURM_RESTART_COUNT"] = str(restart)
            log.write(f"=== fake sbatch: job {job_id} start {restart}\n")
            log.flush()
            subprocess.run(["bash", str(script_path)], env=env, stdout=log, stderr=log)
            requeued = (state / "requeued").read_text().split() if (state / "requeued").exists() else []
            if requeued.count(job_id) <= restart:
                break
        with open(state / "finished", "a") as f:
            f.write(job_id + "\n")
'''

SRUN = r'''
import os, subprocess, sys

args = sys.argv[1:]
patterns = {}
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag in ("--output", "--error"):
        patterns[flag] = args.pop(0)
nodes, per_node = int(os.environ["SLURM_NNODES"]), int(os.environ["SLURM_NTASKS_PER_NODE"])


def log_path(pattern, rank):
    for key, value in (("%A", os.environ.get("SLURM_ARRAY_JOB_ID", "")),
                       ("%a", os.environ.get("SLURM_ARRAY_TASK_ID", "")),
                       ("%j", os.environ["SLURM_JOB_ID"]), ("%t", str(rank))):
        pattern = pattern.replace(key, value)
    return pattern


procs = []
for node in range(nodes):
    for local in range(per_node):
        rank = node * per_node + local
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_LOCALID=str(local), SLURM_NODEID=str(node),
                   SLURM_NTASKS=str(nodes * per_node), SLURM_STEP_ID="0")
        out = open(log_path(patterns.get("--output", os.devnull), rank), "a")
        err = open(log_path(patterns["--error"], rank), "a") if "--error" in patterns else out
        procs.append(subprocess.Popen(args, env=env, stdout=out, stderr=err))
codes = [p.wait() for p in procs]
sys.exit(max((abs(c) for c in codes), default=0))
'''

SCONTROL = r'''
import os, sys
from pathlib import Path

if sys.argv[1:2] != ["requeue"] or len(sys.argv) != 3:
    sys.exit(f"fake scontrol: only 'scontrol requeue <job id>' is implemented, got {sys.argv[1:]}")
with open(Path(os.environ["FAKE_SLURM_DIR"]) / "requeued", "a") as f:
    f.write(sys.argv[2] + "\n")
'''

SACCT = r'''
import os
from pathlib import Path

finished = Path(os.environ["FAKE_SLURM_DIR"]) / "finished"
print("JobID|State|NodeList")
for job_id in (finished.read_text().split() if finished.exists() else []):
    print(f"{job_id}|COMPLETED|fake0")
'''


def install(bin_dir: Path) -> Path:
    """Write the four executables into ``bin_dir`` (put it first on PATH); returns ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in (("sbatch", SBATCH), ("srun", SRUN), ("scontrol", SCONTROL), ("sacct", SACCT)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\nMAX_RESTARTS = {MAX_RESTARTS}\n{body}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def stop_jobs(state_dir: Path) -> None:
    """Kill what is left of the jobs fake sbatch started (each runs in its own process group)."""
    import signal

    pids = state_dir / "runner_pids"
    for pid in (pids.read_text().split() if pids.exists() else []):
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def environment(bin_dir: Path, state_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a launching process: fake tools first on PATH, no SLURM variables."""
    state_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", FAKE_SLURM_DIR=str(state_dir), **extra)
    return env
