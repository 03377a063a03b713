"""Where an HTTP target's call may go: one rule for the API, which checks a URL when a job is
created or replaced, and for the worker, which checks it again at each call (adapters/
http_target.py) on the addresses the name resolves to.

- The URL itself (TargetUrl.parse): http or https, a host the resolver can take, a port 1-65535,
  nothing that is not printable ASCII outside the host (the call writes it on its request line).
- The address (address_refusal): unless the deployment allows private targets, a public unicast
  address only; an address that carries another (IPv4-mapped, 6to4, NAT64) is checked as that one.
  At creation a host that names an address without DNS, in any spelling the resolver reads
  (`2130706433`, `0x7f000001`, `127.1`, `0177.0.0.1`, full-width digits, `[::ffff:127.0.0.1]`),
  is checked as that address; a DNS name is checked where it is resolved: at the call.
- The scheduler's own HTTP endpoints (the local stack's API and its AWS emulator with its control
  routes, OwnEndpoints): never a job's target, whatever the deployment allows. A job that could
  call them could stop the stack, reset its state or call the API as the stack itself, for every
  tenant at once."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

LOCAL_NAMES = ("localhost",)  # names every resolver answers with loopback (RFC 6761)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the last 32 bits are an IPv4 address
# inet_aton's forms, which getaddrinfo takes for a numeric host: 1 to 4 parts, each decimal, 0x hex
# or 0 octal, the last one filling the bytes the others leave.
_INET_ATON_PART = re.compile(r"0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*")


def embedded_ipv4(ip: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries to its destination (IPv4-mapped, 6to4, NAT64):
    `2002:a9fe:a9fe::1` reaches the link-local instance-metadata address through a 6to4 relay, so it is checked as that."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip.sixtofour:
        return ip.sixtofour
    if ip in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(ip: Address, allow_private: bool) -> str | None:
    """Why a call may not go to `ip` under the deployment's allow-private-targets setting (None: it may)."""
    if allow_private:
        return None
    for candidate in filter(None, (ip, embedded_ipv4(ip))):
        # fec0::/10 (site-local, deprecated but still routed inside some networks) counts as global
        # for Python's ipaddress: refused by name.
        if (candidate.is_loopback or candidate.is_link_local or candidate.is_private or candidate.is_multicast
                or candidate.is_reserved or candidate.is_unspecified or not candidate.is_global
                or getattr(candidate, "is_site_local", False)):
            return f"{ip} is not a public address"
    return None


def resolver_host(host: str) -> str:
    """The host as the resolver is handed it (socket encodes a name with the IDNA codec, which
    folds full-width and other compatibility characters: "１２７.０.０.１" is 127.0.0.1). ValueError
    where it cannot be (an empty label, a label over 63 characters): no call could be made."""
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError("the host is not a valid domain name (an empty label or one over 63 characters)") from None


def numeric_address(host: str) -> Address | None:
    """The address a URL's host names without DNS, read as the resolver reads it; None for a name."""
    text = host.split("%", 1)[0].strip("[]")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        ip = _inet_aton(text)
    return ip


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.fullmatch(p) for p in parts):
        return None
    *head, last = [int(p, 16) if p[:2] in ("0x", "0X") else int(p, 8) if p.startswith("0") else int(p)
                   for p in parts]
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    return ipaddress.IPv4Address(sum(n << (8 * (3 - i)) for i, n in enumerate(head)) + last)


@dataclass(frozen=True)
class TargetUrl:
    """An HTTP target's URL as the call uses it."""

    scheme: str
    host: str  # as the resolver takes it (resolver_host)
    port: int
    target: str  # the request line's path and query

    @classmethod
    def parse(cls, url: str) -> "TargetUrl":
        """ValueError with a message for the client when no call could be made to it."""
        if not url.isprintable() or any(c.isspace() for c in url):
            raise ValueError("must not hold spaces or control characters")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise ValueError("must be an http:// or https:// URL with a host and a port from 1 to 65535") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if port == 0:
            raise ValueError("must have a port from 1 to 65535")
        if not (parts.path + parts.query + parts.fragment).isascii():
            raise ValueError("the path and query must be ASCII (percent-encode the rest)")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.scheme, resolver_host(parts.hostname), port if port is not None else
                   (443 if parts.scheme == "https" else 80), path)

    def refusal(self, allow_private: bool, own: "OwnEndpoints") -> str | None:
        """Why no call may go to this URL, as far as its host tells without DNS (None: none known)."""
        ip = numeric_address(self.host)
        if ip is None and (self.host.rstrip(".") in LOCAL_NAMES or self.host.rstrip(".").endswith(".localhost")):
            ip = ipaddress.ip_address("127.0.0.1")
        if own.names(self.host, self.port):
            return "is one of the scheduler's own endpoints and cannot be a target"
        if ip is not None:
            reason = address_refusal(ip, allow_private)
            if reason is not None:
                return f"{reason}, and this deployment does not allow private targets (allowPrivateTargets)"
        return None


def _address(text: str) -> Address | None:
    ip = numeric_address(text)
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
