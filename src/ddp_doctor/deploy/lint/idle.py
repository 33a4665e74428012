"""Whether a command keeps its container, pod or allocation alive after its work is done: it ends in a
long sleep, waits on nothing (tail -f /dev/null, sshd -D) or loops with no way out. Such a job holds
its GPUs until someone deletes it."""

from __future__ import annotations

import re

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


def command_text(words: list[str]) -> str:
    """The script a container runs: the string after `bash -c`, else its words on one line."""
    if words and words[0].rsplit("/", 1)[-1] in SHELLS:
        for i, word in enumerate(words[1:-1], start=1):
            if word.startswith("-") and "c" in word[1:]:
                return words[i + 1]
    return " ".join(words)


def holds_forever(script: str) -> str | None:
    """What keeps the command running after its work ('ends with sleep 3600', 'loops forever with
    while true and no break'), or None."""
    loop = _LOOP.search(script)
    if loop is not None and _OUT.search(script[loop.end() :]) is None:
        return "loops forever (while true with no break or exit)"
    steps = [s.strip() for s in _SPLIT.split(script)]
    steps = [s for s in steps if s and not s.startswith("#") and s not in ("done", "fi", "}")]
    if not steps:
        return None
    last = steps[-1]
    if last == "wait":
        blocked = _BACKGROUND.search(script)
        if blocked is not None:
            return f"ends with wait on {blocked.group(0).rstrip('&').strip()} in the background, which never returns"
        steps = steps[:-1] or [""]
        last = steps[-1]
    m = _SLEEP.match(last)
    if m is not None and _seconds(m.group(1)) >= LONG_SECONDS:
        return f"ends with {last} after its work"
    if _FOREVER.match(last):
        return f"ends with {last}, which never returns"
    return None
