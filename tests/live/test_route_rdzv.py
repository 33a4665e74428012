"""Interface advice is ranked by the route to the rendezvous host when the check has one."""

from __future__ import annotations

import pytest

from ddp_doctor.live.chain import _gather_facts


@pytest.mark.parametrize(("endpoint", "host"), [("127.0.0.1:29500", "127.0.0.1"), ("[::1]:29500", "::1")])
def test_route_follows_the_rendezvous_host(endpoint: str, host: str) -> None:
    route = _gather_facts(None, endpoint)["network"]["route"]
    assert route["destination"] == host and route["interface"] == "lo", route
    assert route["how"] == f"route to {host}"


def test_without_an_endpoint_the_route_is_master_addr_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    route = _gather_facts(None, None)["network"]["route"]
    assert route["destination"] is None and route["how"] in ("default route", None)
