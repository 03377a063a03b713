"""The scheduler's own HTTP endpoints (the local stack's API and its AWS emulator with its control
routes): never a job's target. A job that could call them could stop the stack, reset its state
or call the API as the stack itself, for every tenant at once."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOCAL_NAMES = ("localhost",)  # names every resolver answers with loopback (RFC 6761)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        return ip.ipv4_mapped
    return ip


def _is_this_host(ip) -> bool:
    """An address that reaches a server listening on loopback or on every address of this host."""
    return ip.is_loopback or ip.is_unspecified


@dataclass(frozen=True)
class OwnEndpoints:
    """(host, port) pairs the stack listens on. A server bound to loopback or to every address
    is reached through any loopback address and through 0.0.0.0, so those count as its host."""

    endpoints: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> "OwnEndpoints":
        """'127.0.0.1:8080,127.0.0.1:8090' (the OWN_ENDPOINTS setting)."""
        pairs = set()
        for item in filter(None, (part.strip() for part in text.split(","))):
            host, _, port = item.rpartition(":")
            if not host or not port.isascii() or not port.isdigit():
                raise ValueError(f"own endpoint {item!r}: expected host:port")
            pairs.add((host.strip("[]"), int(port)))
        return cls(frozenset(pairs))

    def text(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in sorted(self.endpoints))

    def covers(self, address: str, port: int) -> bool:
        """Whether a connection to `address`:`port` reaches one of the endpoints."""
        ip = _address(address)
        if ip is None:
            return False
        for host, own_port in self.endpoints:
            if own_port != port:
                continue
            own = _address(host)
            if own is None or ip == own or (_is_this_host(ip) and (own.is_loopback or own.is_unspecified)):
                return True
            if own.is_unspecified:  # listening everywhere: any address of this host reaches it
                return True
        return False

    def names(self, host: str, port: int) -> bool:
        """Whether a URL's host (an address literal or a loopback name), without resolving DNS,
        names one of the endpoints. A DNS name is checked where it is resolved: at the call."""
        host = host.rstrip(".").lower()
        if host in LOCAL_NAMES or host.endswith(".localhost"):
            return self.covers("127.0.0.1", port) or self.covers("::1", port)
        return self.covers(host, port)
