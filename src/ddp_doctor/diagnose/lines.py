"""One log line made readable: colour codes and CR stripped, the rank / host prefix recognised.

Rank attribution matters because the root cause is usually on one rank and the cascade on
the others; the prefixes below are the ones torchrun, NCCL and `kubectl logs --prefix` write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")

# Order matters: the first prefix that matches names the line's origin.
_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # kubectl logs --timestamps (RFC 3339, before any --prefix): carries no origin, only a time
    ("time", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) ")),
    ("pod", re.compile(r"^\[pod/(?P<node>[^/\]\s]+)(?:/[^\]\s]*)?\]\s?")),  # kubectl logs --prefix
    ("rank", re.compile(r"^\[rank(?P<rank>\d+)\]:")),  # TORCH_DISTRIBUTED_DEBUG / torch >= 2.2 log prefix
    (
        "local",
        re.compile(r"^\[(?:default|[A-Za-z_]\w*?)(?P<local>\d+)\]:"),
    ),  # torchrun --tee / --log-dir local-rank prefix
    # NCCL_DEBUG lines: "host:pid:tid [cudaDev] NCCL INFO ..."
    ("nccl", re.compile(r"^(?P<node>[\w.\-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<gpu>\d+)\] ")),
    # mpirun --tag-output: "[jobid,rank]<stdout>:"
    ("mpi", re.compile(r"^\[\d+,(?P<rank>\d+)\]<std(?:out|err)>: ?")),
    # srun --label: "  3: " (the task id, which is the rank when srun starts one process per rank)
    ("srun", re.compile(r"^ {0,4}(?P<rank>\d{1,5}): ")),
    # Ray's prefix on a worker's or actor's output: "(RayTrainWorker pid=123, ip=10.0.0.2) ", "(raylet) "
    # (https://docs.ray.io/en/latest/ray-observability/user-guides/configure-logging.html)
    ("ray", re.compile(r"^\((?:[A-Za-z_][\w.:\-]*)(?: pid=(?P<pid>\d+))?(?:, ip=(?P<node>[\d.]+))?\) ")),
    # vLLM's and SGLang's logger: "ERROR 03-05 00:25:45 [core.py:1094] " (no origin, only the message after it;
    # https://github.com/vllm-project/vllm/blob/main/vllm/logger.py)
    (
        "logger",
        re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w.\-]+:\d+\] "),
    ),
    # pdsh (the deepspeed / multi-node launchers): "worker-1: ", "10.0.0.2: " (a hyphen or an address, so a
    # dotted exception name such as "torch.distributed.DistBackendError: " is never taken for a host)
    ("pdsh", re.compile(r"^(?P<node>\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z]\w*(?:-\w+)+): ")),
)
# Rank numbers written inside messages: "[Rank 1] Watchdog caught", "rank      : 1 (local_rank: 1)".
_INLINE_RANK = re.compile(r"\[Rank (?P<rank>\d+)\]")
_INLINE_LOCAL = re.compile(
    r"\blocal_rank: (?P<local>\d+)\b"
)  # torchrun: "failed (exitcode: -9) local_rank: 1 (pid: ..)"
# NCCL_DEBUG=INFO names each process's rank once per communicator; the first one is the world's.
NCCL_COMM = re.compile(r"NCCL INFO comm 0x[0-9a-f]+ rank (?P<rank>\d+) nRanks")
# torchrun's failure summary names the rank and host a few lines above its exitcode / traceback lines.
SUMMARY = re.compile(r"^\s*(?:rank\s+: (?P<rank>\d+) \(local_rank: \d+\)|host {4,}: (?P<host>\S+))\s*$")
# `tail -n +1 a.log b.log` and `kubectl logs` collections separate files with these headers.
HEADER = re.compile(r"^==> (?P<name>.+?) <==$")


@dataclass(frozen=True)
class Origin:
    rank: int | None = None
    local_rank: int | None = None
    node: str | None = None
    gpu: int | None = None
    pid: int | None = None

    def label(self) -> str:
        parts = []
        if self.node:
            parts.append(self.node)
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        elif self.local_rank is not None:
            parts.append(f"local rank {self.local_rank}")
        if self.gpu is not None:
            parts.append(f"gpu {self.gpu}")
        return ", ".join(parts)


def clean(text: str) -> str:
    if "\x1b" in text:
        text = ANSI.sub("", text)
    return text.rstrip("\r\n").replace("\x00", "")


def origin(text: str, node: str | None = None) -> Origin:
    """Where a line came from, as far as its prefixes say; `node` is the enclosing file header."""
    return split(text, node)[0]


def split(text: str, node: str | None = None, default: Origin | None = None) -> tuple[Origin, str]:
    """(where the line came from, the message after its prefixes). `default` is what the file says
    (a rank's own log); the line's own prefixes win over it."""
    fields: dict[str, int | str | None] = {"node": node}
    if default is not None:
        fields.update({k: v for k, v in vars(default).items() if v is not None})
    rest = text
    progress = True
    while progress:  # prefixes stack: "[pod/w-0/c] [default1]:[rank1]:..."
        progress = False
        for _kind, pattern in _PREFIXES:
            m = pattern.match(rest)
            if not m:
                continue
            for key, value in m.groupdict().items():
                if value is not None and key != "tid":
                    fields["local_rank" if key == "local" else key] = value if key == "node" else int(value)
            rest = rest[m.end() :]
            progress = True
    if fields.get("rank") is None:
        m = _INLINE_RANK.search(rest)
        if m:
            fields["rank"] = int(m.group("rank"))
    if fields.get("rank") is None and fields.get("local_rank") is None:
        m = _INLINE_LOCAL.search(rest)
        if m:
            fields["local_rank"] = int(m.group("local"))
    return Origin(**fields), rest  # type: ignore[arg-type]
