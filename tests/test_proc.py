"""proc.Background: work on a thread under a deadline (the NVML probe, the torch import probe, the live
chain's static gather); a call that never returns cannot hang the doctor."""

from __future__ import annotations

import threading
import time

from ddp_doctor.proc import Background


def test_value_error_and_silence_each_say_what_happened() -> None:
    assert Background("the sum", lambda: 1 + 1).result(5) == (2, None)

    def broken() -> int:
        raise OSError("driver gone")

    assert Background("the NVML probe", broken).result(5) == (None, "the NVML probe broke: OSError: driver gone")
    never = threading.Event()
    started = time.monotonic()
    value, why = Background("the hung probe", lambda: never.wait(60)).result(0.2)
    assert value is None and why == "the hung probe did not answer within 0.2 s"
    assert time.monotonic() - started < 30  # the deadline, not the call, decided (a generous bound: no timing test)
    never.set()
