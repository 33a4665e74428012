"""The patterns every reader needs besides the signatures': failure-looking lines, log structure.

patterns.py puts them with the signatures' into the one multi-pattern engine (multimatch.py).
"""

from __future__ import annotations

import re

# Lines that look like a failure although no signature knows them: kept for `diag.unknown`.
GENERIC_ERROR = (
    r"\b(?:_*[A-Z]\w*(?:Error|Exception)|Exception)\b:|\bNCCL WARN\b|\b(?:ERROR|FATAL|CRITICAL)\b|Segmentation fault"
    r"|core dumped|\[E\d{4} |exited with code [1-9]|\bexitcode\s*:\s*-?[1-9]"
)
GENERIC_ERROR_RE = re.compile(GENERIC_ERROR)
# Structure the reader must see although no signature is about it.
LAST_ERROR_PATTERN = r"Last error:"
NCCL_COMM_PATTERN = r"NCCL INFO comm 0x[0-9a-f]+ rank \d+ nRanks"
STRUCTURE = (
    r"==> .+ <==",
    LAST_ERROR_PATTERN,  # file headers, NCCL's detail line
    r"\brank +: \d+ \(local_rank: \d+\)",
    r"\bhost {4,}: ",  # torchrun's failure summary
    NCCL_COMM_PATTERN,  # NCCL: which pid is which rank
    r"Exception ignored in",  # Python's note before a traceback it did not let end the process
)
LAST_ERROR = re.compile(r"Last error:\s*(?P<rest>.*)$")


def scoped(pattern: str) -> str:
    # A leading global flag like (?i) becomes a scoped group, legal inside an alternation in every engine.
    m = re.match(r"^\(\?([aiLmsux]+)\)", pattern)
    if m:
        return f"(?{m.group(1)}:{pattern[m.end() :]})"
    return f"(?:{pattern})"
