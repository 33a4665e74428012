"""A real two-node Slurm for the tests: munged, slurmctld and one slurmd per namespace host.

Debian's packages (slurm-wlm 22.05, munge) as installed; nothing of theirs is configured or started.
Everything the daemons write -- slurm.conf, the munge key and socket, state, spool, logs, the
job completion file -- lives in one temporary directory, removed by `close()`:

    node0  (namespace host 0)   munged, slurmctld, slurmd -N node0   (the head node; batch scripts run here)
    node1  (namespace host 1)   slurmd -N node1

Every daemon runs inside a namespace host, so the namespaces' own clean-up (tests/multinode/netns.py)
also ends the daemons of a test run that was killed; its directory is removed by the next run.
Node names resolve through slurm.conf's NodeAddr (and each host's /etc/hosts); munged's socket is
a path in the temporary directory, which every namespace sees.

No cgroups (proctrack/linuxproc, task/none). No slurmdbd: it stores accounting only in MySQL/MariaDB
(accounting_storage/mysql, Debian's slurmdbd package), so accounting storage is off and `sacct`
answers "Slurm accounting storage is disabled"; a job's end state comes from `scontrol show job`
(slurmctld keeps ended jobs for MinJobAge) and from the jobcomp/filetxt file.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.multinode import netns
from tests.multinode.netns import Cluster, Host

CMD_TIMEOUT_S = 15.0
START_S = 30.0
"""How long the daemons get to come up and the nodes to show idle."""
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "squeue", "sinfo")
TERMINAL = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)


STATE_PREFIX = "ddpd-slurm-"


def remove_stale() -> None:
    """Remove the temporary directory of an earlier test run whose process is gone."""
    for path in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*-*"):
        pid = path.name.removeprefix(STATE_PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


def available() -> str | None:
    """None when a Slurm can be started here, else the reason (for a clean skip)."""
    reason = netns.available()
    if reason:
        return reason
    missing = [b for b in (*BINARIES, "nsenter") if shutil.which(b) is None]
    if missing:
        return f"needs Debian's slurm-wlm and munge ({', '.join(missing)} not found)"
    return None


@dataclass(frozen=True)
class JobEnd:
    job_id: str
    state: str
    """COMPLETED, FAILED, NODE_FAIL, ... (scontrol's JobState)."""
    exit_code: str
    """scontrol's ExitCode, 'STATUS:SIGNAL' of the batch script."""
    reason: str
    fields: Mapping[str, str]
    """Every KEY=VALUE of `scontrol show job -o`."""

    @property
    def status(self) -> int:
        return int(self.exit_code.split(":")[0])


def _slurm_conf(root: Path, hosts: Sequence[Host], cpus: int) -> str:
    head = hosts[0]
    nodes = "".join(
        f"NodeName={h.hostname} NodeAddr={h.address} NodeHostname={h.hostname} CPUs={cpus} RealMemory=1000 State=UNKNOWN\n"
        for h in hosts
    )
    return f"""# written by tests/slurm/cluster.py; lives in {root}
ClusterName=ddpd
SlurmctldHost={head.hostname}({head.address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=10
InactiveLimit=0
KillWait=2
MinJobAge=600
MessageTimeout=5
SchedulerType=sched/backfill
{nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class Slurm:
    net: Cluster
    root: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _off: set[str] = field(default_factory=set)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def head(self) -> Host:
        return self.net.hosts[0]

    @property
    def hosts(self) -> list[Host]:
        return self.net.hosts

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment Slurm's commands (and so the jobs, sbatch exports it) see."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        # The jobs' temporary files (a killed node's among them) go with the cluster's directory.
        tmp = str(self.root / "tmp")
        return {**env, "SLURM_CONF": str(self.conf), "TMPDIR": tmp, "NO_COLOR": "1", **(extra or {})}

    def argv(self, host: Host, argv: Sequence[str]) -> list[str]:
        """argv run on `host`: its network namespace, its hostname and /etc/hosts.

        Not `ip netns exec`: that remounts /sys, and slurmd will not start without the machine's
        /sys/fs/cgroup (it initializes its cgroup plugin even with proctrack/linuxproc, task/none)."""
        hosts = f"/etc/netns/{host.netns}/hosts"
        return [
            "nsenter",
            f"--net=/run/netns/{host.netns}",
            "--",
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            f'mount --bind {hosts} /etc/hosts && hostname {host.hostname} && exec "$@"',
            "sh",
            *argv,
        ]

    # -- starting and stopping -------------------------------------------------------------------

    @classmethod
    def start(cls, nodes: int = 2, cpus: int = 2) -> Slurm:
        remove_stale()
        root = Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-"))
        os.chmod(root, 0o755)  # munged refuses a socket directory path others may write
        net = Cluster.create(nodes)
        slurm = cls(net, root)
        try:
            slurm._start(cpus)
        except BaseException:
            slurm.close()
            raise
        return slurm

    def _start(self, cpus: int) -> None:
        for sub in ("munge", "state", "spool", "log", "jobs", "tmp"):
            (self.root / sub).mkdir(mode=0o755)
        for shared in ("jobs", "tmp"):
            (self.root / shared).chmod(0o1777)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        self.conf.write_text(_slurm_conf(self.root, self.hosts, cpus))
        munge = self.root / "munge"
        self._daemon(
            "munged",
            self.head,
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={munge}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={munge}/munged.pid",
                f"--log-file={self.root}/log/munged.log",
                f"--seed-file={munge}/munged.seed",
            ],
        )
        self._wait_for(lambda: (munge / "munge.socket").exists(), "munged's socket")
        self._daemon("slurmctld", self.head, ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        for h in self.hosts:
            self.start_slurmd(h)
        self._wait_for(self._all_idle, "every node idle in sinfo")

    def _daemon(self, name: str, host: Host, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.stderr", "wb")  # noqa: SIM115 - the daemon keeps it
        self.procs[name] = subprocess.Popen(
            self.argv(host, argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(),
            start_new_session=True,
        )
        log.close()

    def start_slurmd(self, host: Host) -> None:
        (self.root / "spool" / host.hostname).mkdir(exist_ok=True)
        self._daemon(f"slurmd-{host.hostname}", host, ["slurmd", "-D", "-N", host.hostname, "-f", str(self.conf)])

    def ensure_healthy(self) -> None:
        """Before a test: a slurmd an earlier test stopped is started again, no job is left, every node idle."""
        for h in self.hosts:
            if h.hostname in self._off:
                subprocess.run(
                    ["ip", "-n", self.net.switch, "link", "set", h.switch_port, "up"],
                    check=True,
                    timeout=CMD_TIMEOUT_S,
                )
                self._off.discard(h.hostname)
            proc = self.procs.get(f"slurmd-{h.hostname}")
            if proc is None or proc.poll() is not None:
                self.start_slurmd(h)
        self.run(["scancel", "--full", "--user", "root"], check=False)
        self._wait_for(self._all_idle, "every node idle in sinfo")

    def power_off(self, host: Host) -> None:
        """The node dies: slurmd, every job step and rank on it are killed at once, then its link goes down
        (a node that is off answers nothing; a link cut with the ranks alive is tests/multinode's case).
        ensure_healthy() brings it back for the next test."""
        for pid in self.net.pids_of(host):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc = self.procs.pop(f"slurmd-{host.hostname}", None)
        if proc is not None:
            proc.wait(timeout=CMD_TIMEOUT_S)
        # Their sockets close as they exit (the peers see it at once); then nothing there answers any more.
        self._wait_for(lambda: not self.net.pids_of(host), f"every process on {host.hostname} gone", 10)
        self.net.cut(host)
        self._off.add(host.hostname)

    def _wait_for(self, ok: Callable[[], bool], what: str, deadline_s: float = START_S) -> None:
        end = time.monotonic() + deadline_s
        while not ok():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.returncode} while waiting for {what}:\n{self.logs()}")
            if time.monotonic() > end:
                raise RuntimeError(f"no {what} after {deadline_s:.0f} s:\n{self.logs()}")
            time.sleep(0.3)

    def _all_idle(self) -> bool:
        r = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
        states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
        return len(states) == len(self.hosts) and all(s == "idle" for s in states.values())

    def logs(self, tail: int = 30) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def close(self) -> None:
        """Stop every daemon and job, remove the namespaces and the temporary directory. Idempotent."""
        for name, proc in reversed(list(self.procs.items())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + 5
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=CMD_TIMEOUT_S)
        self.procs.clear()
        self.net.close()  # kills whatever still runs in the namespaces (job steps)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the user's commands ----------------------------------------------------------------------

    def run(
        self, argv: Sequence[str], check: bool = True, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm command as a user on the head node types it."""
        r = subprocess.run(
            self.argv(self.head, ["env", "-C", str(cwd or self.root), *argv]),
            capture_output=True,
            text=True,
            timeout=CMD_TIMEOUT_S,
            env=self.env(env),
            check=False,
        )
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
        return r

    def sbatch(self, script: Path, *flags: str, env: Mapping[str, str] | None = None) -> str:
        """Submit from the script's directory; the job id."""
        r = self.run(["sbatch", "--parsable", *flags, str(script)], cwd=script.parent, env=env)
        return r.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        r = self.run(["scontrol", "show", "job", "-o", job_id], check=False)
        return dict(re.findall(r"(\w+)=(\S*)", r.stdout))

    def wait(self, job_id: str, deadline_s: float) -> JobEnd:
        """Poll until the job reaches a terminal state; a job still running at the deadline is cancelled."""
        end = time.monotonic() + deadline_s
        while True:
            info = self.job(job_id)
            state = info.get("JobState", "")
            if state in TERMINAL:
                return JobEnd(job_id, state, info.get("ExitCode", ""), info.get("Reason", ""), info)
            if time.monotonic() > end:
                self.run(["scancel", job_id], check=False)
                raise TimeoutError(
                    f"job {job_id} still {state or 'unknown'} after {deadline_s:.0f} s: {info}\n{self.logs()}"
                )
            time.sleep(0.5)

    def jobcomp(self, job_id: str) -> dict[str, str]:
        """The job's line in the jobcomp/filetxt file (written when the job ends)."""
        path = self.root / "jobcomp.txt"
        for line in path.read_text().splitlines() if path.exists() else []:
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            if fields.get("JobId") == job_id:
                return fields
        return {}
