"""Whether a command keeps its container, pod or allocation alive while no work runs: it ends in a long
sleep, waits on nothing (tail -f /dev/null, sshd -D) or loops with no way out, so it holds its GPUs
until someone deletes it; or it sleeps long before its work, holding them idle until then."""

from __future__ import annotations

import re
from itertools import pairwise

LONG_SECONDS = 600
"""A final sleep at least this long is holding the job open, not waiting for a peer to come up."""
_SPLIT = re.compile(r"\n|;|&&|\|\|")
_SLEEP = re.compile(r"^(?:exec\s+)?sleep\s+(infinity|inf|\d+(?:\.\d+)?[smhd]?)$")
_FOREVER = re.compile(
    r"^(?:exec\s+)?(?:tail\s+-f\s+/dev/null|(?:/usr/sbin/)?sshd\s+(?:-\w*D\w*)(?:\s.*)?|(?:srun\s.*)?ray\s+start\s.*--block\b.*)$"
)
_BACKGROUND = re.compile(r"(?:ray\s+start\s.*--block|sleep\s+inf(?:inity)?|sshd\s+-\w*D)[^\n;&]*&")
_LOOP = re.compile(r"\bwhile\s+(?:true|:|\[\s*1\s*\]|\[\[\s*1\s*\]\])\s*[;\n]\s*do\b")
_OUT = re.compile(r"\b(?:break|exit|return)\b")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 1}


def _seconds(text: str) -> float:
    if text in ("infinity", "inf"):
        return float("inf")
    unit = text[-1] if text[-1] in "smhd" else ""
    return float(text.rstrip("smhd")) * _UNIT[unit]


SHELLS = ("sh", "bash", "dash", "zsh", "ksh")
_NOT_SHELL = re.compile(r"[;&|\n]+")


def command_text(words: list[str]) -> str:
    """The script a container runs: the string after `bash -c`, else its words on one line. Words run with no
    shell are one command whatever they hold: a `;` or `&&` inside an argument separates nothing."""
    # The shell may come after a wrapper that execs it (an entrypoint script, tini --, env X=1).
    shell = next((i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] in SHELLS), None)
    if shell is not None:
        for i, word in enumerate(words[shell + 1 : -1], start=shell + 1):
            if not word.startswith("-"):
                break
            if "c" in word[1:]:
                return words[i + 1]
    return " ".join(_NOT_SHELL.sub(" ", w) for w in words)


_KEYWORD = re.compile(r"^(?:then|do|else)\s+")
_BRANCH_END = re.compile(r"^(?:else|elif|fi|;;|esac)\b")


def _never_returns(step: str) -> bool:
    m = _SLEEP.match(step)
    return (m is not None and m.group(1) in ("infinity", "inf")) or _FOREVER.match(step) is not None


def _branch_held(raw: list[str]) -> str | None:
    """A branch of an if / case that ends in a command that never returns, where another branch goes on
    (`if [ $RANK != 0 ]; then ray start --address ... --block; else ray start --head; python train.py; fi`):
    the nodes that take it never end, and keep the job's GPUs after the work the other branch does."""
    for step, after in pairwise(raw):
        body = _KEYWORD.sub("", step)
        if _BRANCH_END.match(after) and _never_returns(body):
            return f"ends a branch with {body}, which never returns, while another branch does the work"
    return None


def _waits_forever(steps: list[str]) -> str | None:
    """A bare `wait` after a command that never returns was sent to the background (`srun ... ray start
    --block &`): wait waits for every background job, so the script never gets past it."""
    blocked: str | None = None
    for step in steps:
        m = _BACKGROUND.search(step)
        if m is not None and blocked is None:
            blocked = m.group(0).rstrip("&").strip()
        if _KEYWORD.sub("", step) == "wait" and blocked is not None:
            return f"ends with wait on {blocked} in the background, which never returns"
    return None


_COMPOUND = re.compile(r"^(?:while|until|for|if|case|select|do|then|else|elif)\b|^\{|^\(")


def _sleeps_between(raw: list[str]) -> str | None:
    """A long sleep before the work, or between two of its commands (`sleep 1000000 && cd /src && ./train.sh`,
    a pod kept for `kubectl exec`): the GPUs are held while nothing runs on them. Read only up to the first
    compound command, so a sleep in a loop that polls for something (`until ...; do sleep 900; done`) is
    not taken for one."""
    for step, after in pairwise(raw):
        if _COMPOUND.match(step):
            return None
        m = _SLEEP.match(step)
        if m is not None and _seconds(m.group(1)) >= LONG_SECONDS and after not in ("done", "fi", "}", "esac"):
            return f"runs {step} before its work"
    return None


def holds_forever(script: str) -> str | None:
    """What keeps the command running after its work ('ends with sleep 3600', 'loops forever with
    while true and no break', a branch that blocks forever), or None."""
    script = script.replace("\\\n", " ")  # a command continued over several lines is one step
    loop = _LOOP.search(script)
    if loop is not None and _OUT.search(script[loop.end() :]) is None:
        return "loops forever (while true with no break or exit)"
    raw = [s.strip() for s in _SPLIT.split(script)]
    raw = [s for s in raw if s and not s.startswith("#")]
    steps = [s for s in raw if s not in ("done", "fi", "}")]
    if not steps:
        return None
    waited = _waits_forever(steps)
    if waited is not None:
        return waited
    branch = _branch_held(raw)
    last = steps[-1]
    if last == "wait":
        steps = steps[:-1] or [""]
        last = steps[-1]
    m = _SLEEP.match(last)
    if m is not None and _seconds(m.group(1)) >= LONG_SECONDS:
        return f"ends with {last} after its work"
    if _FOREVER.match(last):
        return f"ends with {last}, which never returns"
    return branch or _sleeps_between(raw)
