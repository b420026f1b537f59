"""The Wyoming server's zeroconf announcement: the records built, and a real announcement on loopback found
by a second zeroconf instance, as Home Assistant's discovery would find it on the network (multicast here
never leaves this machine's loopback interface)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from koe.errors import ConfigError
from koe.server.discovery import SERVICE_TYPE, Announcement, announced_addresses, service_info
from live_server import LOOPBACK, ServerFactory
from ws_events import run

#: Long enough for an mDNS query and its answer on loopback; a healthy run takes milliseconds.
RESOLVE_MS = 3000
#: How long a withdrawn name is asked for before it counts as gone.
GONE_MS = 1000


async def resolve(name: str, timeout_ms: int = RESOLVE_MS) -> AsyncServiceInfo | None:
    """The records of ``name`` as a browser on loopback finds them, or ``None``."""
    browser = AsyncZeroconf(interfaces=[LOOPBACK])
    try:
        info = AsyncServiceInfo(SERVICE_TYPE, f"{name}.{SERVICE_TYPE}")
        return info if await info.async_request(browser.zeroconf, timeout_ms) else None
    finally:
        await browser.async_close()


def unique_name() -> str:
    return f"koe-test-{uuid.uuid4().hex[:8]}"


def test_a_server_bound_to_one_address_announces_that_address() -> None:
    assert announced_addresses("192.0.2.7", ["127.0.0.1", "192.0.2.7", "198.51.100.1"]) == ["192.0.2.7"]


def test_a_server_on_every_address_announces_those_other_machines_can_reach() -> None:
    machine = ["127.0.0.1", "192.0.2.7", "198.51.100.1"]
    assert announced_addresses("0.0.0.0", machine) == ["192.0.2.7", "198.51.100.1"]
    assert announced_addresses("0.0.0.0", ["127.0.0.1"]) == ["127.0.0.1"]  # nothing else to announce


def test_the_records_name_the_wyoming_service_at_the_servers_port() -> None:
    info = service_info("kitchen", 10200, ["192.0.2.7"])
    assert (info.type, info.name, info.port) == (SERVICE_TYPE, "kitchen._wyoming._tcp.local.", 10200)
    assert info.parsed_addresses() == ["192.0.2.7"]


@pytest.mark.parametrize("name", ["", "a.b", "x" * 64])
def test_a_name_that_is_no_dns_label_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as refused:
        service_info(name, 10200, ["192.0.2.7"])
    assert refused.value.code == "invalid_field"


def test_koe_serve_announces_its_wyoming_server_for_discovery(serve_fake: ServerFactory) -> None:
    name = unique_name()
    with serve_fake(wyoming_port=0, wyoming_zeroconf=name) as live:
        found = run(lambda: resolve(name))
        assert found is not None
        assert (found.port, found.parsed_addresses()) == (live.app.state.wyoming.port, [LOOPBACK])


def test_a_closed_announcement_is_withdrawn() -> None:
    name = unique_name()

    async def main() -> tuple[bool, bool]:
        announcement = await Announcement.start(name, LOOPBACK, 10200)
        found = await resolve(name) is not None
        await announcement.aclose()
        await asyncio.sleep(0.1)
        return found, await resolve(name, GONE_MS) is not None

    assert run(main) == (True, False)
