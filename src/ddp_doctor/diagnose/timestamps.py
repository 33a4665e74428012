"""The time a log line carries, when it carries one: what orders events across several logs.

Formats, as the tools print them near the start of a line:
  2024-05-01T12:34:56.123456789Z   kubectl logs --timestamps (RFC 3339), ISO 8601 in Python logging, DeepSpeed
  2024-05-01 12:34:56,123          Python logging's default asctime, torchrun's agent, DeepSpeed, Lightning
  2024-05-01_12:34:56              torchrun's failure summary ("time : ...")
  05/01/2024 12:34:56              Hugging Face example scripts (datefmt "%m/%d/%Y %H:%M:%S")
  E0501 12:34:56.123456            glog / c10d's C++ logs (no year: the year of the last full date seen is used)
  [Wed May  1 12:34:56 2024]       dmesg -T (the kernel's OOM killer), and syslog's "May  1 12:34:56"
Sources: https://kubernetes.io/docs/reference/kubectl/generated/kubectl_logs/ ,
https://docs.python.org/3/library/logging.html#logging.Formatter.formatTime ,
https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/multiprocessing/errors/__init__.py (the
summary's time field), https://github.com/google/glog#log-line-prefix-format , man 1 dmesg.
"""

from __future__ import annotations

import calendar
import re

_MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}
_ISO = re.compile(
    r"(?<!\d)(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T _](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?"
)
_US = re.compile(
    r"(?<!\d)(?P<mo>\d\d)/(?P<d>\d\d)/(?P<y>\d{4}) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?"
)
_GLOG = re.compile(r"(?<![\w])[IWEF](?P<mo>\d\d)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)\.(?P<f>\d+)")
_SYSLOG = re.compile(
    r"(?<![\w])(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<d>\d{1,2}) "
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?: (?P<y>\d{4}))?"
)
HEAD = 96
"""Only the start of a line is searched: a date inside a message says nothing about when it was printed."""


def _seconds(g: dict[str, str | None], year: int) -> float | None:
    try:
        y = int(g.get("y") or year)
        mo = int(str(g["mo"])) if g.get("mo") else _MONTHS[str(g["mon"])]
        whole = calendar.timegm((y, mo, int(str(g["d"])), int(str(g["h"])), int(str(g["mi"])), int(str(g["s"]))))
    except (ValueError, KeyError, OverflowError):
        return None
    frac = g.get("f")
    return whole + (int(frac) / 10 ** len(frac) if frac else 0.0)


class Clock:
    """Reads line times; remembers the year of the last full date for formats that print none."""

    def __init__(self) -> None:
        self.year = 1970

    def when(self, text: str) -> float | None:
        head = text[:HEAD]
        if not any(c.isdigit() for c in head[:40]):
            return None
        for pattern in (_ISO, _US):
            m = pattern.search(head)
            if m:
                g = m.groupdict()
                self.year = int(str(g["y"]))
                return _seconds(g, self.year)
        for pattern in (_GLOG, _SYSLOG):
            m = pattern.search(head)
            if m:
                g = m.groupdict()
                if g.get("y"):
                    self.year = int(str(g["y"]))
                return _seconds(g, self.year)
        return None
