"""One combined regex over all signature patterns, so a big log is scanned once, in C.

google-re2 (a DFA: time linear in the input whatever the number of patterns) when it is
installed; the standard `re` otherwise, which is correct but ~50x slower on big logs
because it tries each alternative at each position.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

try:
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised where re2 is absent (e.g. inside images)
    _re2 = None
if os.environ.get("DDP_DOCTOR_REGEX") == "re":  # force the fallback (benchmarks, tests)
    _re2 = None

# Lines that look like a failure although no signature knows them: kept for `diag.unknown`.
GENERIC_ERROR = (
    r"\b[A-Z]\w*(?:Error|Exception)\b:|\bNCCL WARN\b|\b(?:ERROR|FATAL|CRITICAL)\b|Segmentation fault"
    r"|core dumped|\[E\d{4} |exited with code [1-9]|\bexitcode\s*:\s*-?[1-9]"
)
GENERIC_ERROR_RE = re.compile(GENERIC_ERROR)
# Structure the reader must see although no signature is about it.
STRUCTURE = (
    r"==> .+ <==",
    r"Last error:",  # file headers, NCCL's detail line
    r"\brank +: \d+ \(local_rank: \d+\)",
    r"\bhost {4,}: ",  # torchrun's failure summary
    r"NCCL INFO comm 0x[0-9a-f]+ rank \d+ nRanks",  # NCCL: which pid is which rank
)
LAST_ERROR = re.compile(r"Last error:\s*(?P<rest>.*)$")


def _scoped(pattern: str) -> str:
    # A leading global flag like (?i) becomes a scoped group, legal inside an alternation in both engines.
    m = re.match(r"^\(\?([aiLmsux]+)\)", pattern)
    if m:
        return f"(?{m.group(1)}:{pattern[m.end() :]})"
    return f"(?:{pattern})"


def parts(patterns: Iterable[str]) -> list[str]:
    """Every pattern the reader must find lines for: the signatures', the generic error one, structure."""
    return [*patterns, GENERIC_ERROR, *STRUCTURE]


def union(patterns: Iterable[str]) -> str:
    return "|".join(_scoped(p) for p in patterns)


def engine_name() -> str:
    return "re2" if _re2 is not None else "re"


def compile_bytes(patterns: list[str], engine: str | None = None) -> Any:
    """A finditer()-able filter over bytes for the streaming reader: RE2 on the union, else required literals."""
    engine = engine or engine_name()
    if engine == "re2":
        options = _re2.Options()
        options.encoding = _re2.Options.Encoding.LATIN1  # bytes are bytes: invalid UTF-8 cannot break the scan
        options.max_mem = 256 << 20
        options.never_capture = True
        return _re2.compile(union(patterns).encode(), options)
    from ddp_doctor.diagnose.literals import literal_filter

    return literal_filter(patterns) or re.compile(union(patterns).encode())
