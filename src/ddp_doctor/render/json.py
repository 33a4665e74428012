from __future__ import annotations

import json

from ddp_doctor.report import Report


def render(report: Report, color: bool = False) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False, default=str) + "\n"
