"""The Wyoming server's announcement on the local network (zeroconf: mDNS and DNS-SD), so that Home
Assistant discovers it; needs the ``zeroconf`` extra.

The service is ``<name>._wyoming._tcp.local.`` at the server's port, with the addresses it listens on: the
one it is bound to, or every address of this machine that is not loopback when it listens on all of them.
A server bound to loopback is announced on loopback only, where only this machine hears it.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from koe.errors import ConfigError
from koe.extras import install_hint

if TYPE_CHECKING:
    from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

logger = logging.getLogger(__name__)

#: Wyoming's DNS-SD service type: what Home Assistant's zeroconf discovery looks for.
SERVICE_TYPE = "_wyoming._tcp.local."
#: An instance name is one DNS label.
MAX_NAME_BYTES = 63
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def announced_addresses(host: str, interfaces: Sequence[str]) -> list[str]:
    """What to announce for a server bound to ``host``, on a machine whose addresses are ``interfaces``:
    ``host`` itself unless it is a wildcard; then every address in ``interfaces`` that is not loopback (all
    of them on a machine that has no other)."""
    if host not in _WILDCARDS:
        return [host]
    reachable = [address for address in interfaces if not ipaddress.ip_address(address).is_loopback]
    return reachable or list(interfaces)


def service_info(name: str, port: int, addresses: Sequence[str]) -> AsyncServiceInfo:
    """The DNS-SD records of the Wyoming server ``name`` at ``port`` and ``addresses``.

    Raises:
        ConfigError: ``name`` is no DNS label (``invalid_field``), or the ``zeroconf`` extra is missing.
    """
    _require_extra()
    if not name or len(name.encode()) > MAX_NAME_BYTES or "." in name:
        raise ConfigError(
            f"the zeroconf name must be 1 to {MAX_NAME_BYTES} bytes without a dot, got {name!r}",
            code="invalid_field",
        )
    from zeroconf.asyncio import AsyncServiceInfo

    return AsyncServiceInfo(
        SERVICE_TYPE, f"{name}.{SERVICE_TYPE}", port=port, parsed_addresses=list(addresses)
    )


def _require_extra() -> None:
    if importlib.util.find_spec("zeroconf") is None:
        raise ConfigError(
            f"announcing the Wyoming server needs the zeroconf extra: {install_hint('zeroconf')}"
        )


class Announcement:
    """The server's records, announced until :meth:`aclose` (which says goodbye on the network)."""

    def __init__(self, zc: AsyncZeroconf, info: AsyncServiceInfo) -> None:
        self._zc = zc
        self.info = info

    @classmethod
    async def start(cls, name: str, host: str, port: int) -> Announcement:
        """Announce ``name`` for a server bound to ``host``:``port`` (a name taken on the network gets a
        number appended, as DNS-SD says).

        Raises:
            ConfigError: see :func:`service_info`.
        """
        _require_extra()
        import ifaddr
        from zeroconf import InterfaceChoice
        from zeroconf.asyncio import AsyncZeroconf

        machine = [str(ip.ip) for adapter in ifaddr.get_adapters() for ip in adapter.ips if ip.is_IPv4]
        addresses = announced_addresses(host, machine)
        info = service_info(name, port, addresses)
        loopback = all(ipaddress.ip_address(address).is_loopback for address in addresses)
        # bound to one address: announced where that address is; on every address: everywhere
        zc = AsyncZeroconf(interfaces=InterfaceChoice.All if host in _WILDCARDS else addresses)
        try:
            await zc.async_register_service(info, allow_name_change=True)
        except BaseException:
            await zc.async_close()
            raise
        if loopback:
            logger.warning("zeroconf: %s is announced on loopback only: only this machine can find it", name)
        logger.info("zeroconf: announced %s at %s port %d", info.name, ", ".join(addresses), port)
        return cls(zc, info)

    async def aclose(self) -> None:
        """Withdraw the records and stop answering; idempotent."""
        await self._zc.async_close()
