"""Parsers of setting values that are more than a type: listen addresses, ZeroMQ endpoints, HTTP
base URLs, SGLang Omni's per-stage intervals. Each raises :class:`ValueError` with a message the
settings prefix with the setting's names (:mod:`exporter.settings`)."""

from __future__ import annotations

import ipaddress
import os
import re
import socket

from .limits import DECODE_LOG_INTERVAL_MAX, DECODE_LOG_INTERVAL_MIN


def parse_zmq_endpoint(value: str) -> tuple[str, str]:
    """Check one ZeroMQ endpoint the exporter can connect to and split it into transport and address.

    Returns:
        ``("ipc", path)`` (``@name`` is Linux's abstract namespace) or ``("tcp", "host:port")``.

    Raises:
        ValueError: empty, another transport, an empty or NUL-carrying ipc path, or a tcp address that
            is not HOST:PORT with a host (no ``*``: the exporter connects, SGLang binds) and a port
            1..65535.
    """
    if not value:
        raise ValueError("an empty endpoint was given (check for a stray comma)")
    transport, sep, address = value.partition("://")
    if not sep or transport not in ("ipc", "tcp"):
        raise ValueError(f"endpoints look like ipc:///path/fpm.0 or tcp://127.0.0.1:20380, got {value[:80]!r}")
    if transport == "ipc":
        if not address or "\0" in address:
            raise ValueError(f"an ipc:// endpoint needs a socket path, got {value[:80]!r}")
        return transport, address
    try:
        host, port = parse_listen_address(address)
    except ValueError as exc:
        raise ValueError(f"{value[:80]!r}: {exc}") from None
    if not host or port == 0:
        raise ValueError(f"a tcp:// endpoint needs a host and a port 1..65535 (the exporter connects), "
                         f"got {value[:80]!r}")
    return transport, address


def same_zmq_endpoints(places: list[tuple[str, str, str]]) -> tuple[str, str] | None:
    """The first two of ``(endpoint, transport, address)`` (from :func:`parse_zmq_endpoint`) that
    name one socket under two spellings, or None.

    An ipc path is compared absolute, normalized, links resolved (``/x/./fpm.0`` is ``/x/fpm.0``; ``@name`` as
    given). TCP endpoints with the same port are compared by the addresses their hosts resolve to
    (``localhost`` is ``127.0.0.1``); a host that does not resolve is compared by its name.
    """
    keys: dict[tuple, str] = {}
    by_port: dict[int, list[tuple[str, set[str]]]] = {}
    for endpoint, transport, address in places:
        if transport == "ipc":
            key = ("ipc", address if address.startswith("@") else os.path.realpath(address))
            if key in keys:
                return keys[key], endpoint
            keys[key] = endpoint
            continue
        host, port = parse_listen_address(address)
        by_port.setdefault(port, []).append((endpoint, {host.lower()}))
    for port, hosts in by_port.items():
        if len(hosts) < 2:
            continue
        for endpoint, names in hosts:
            try:
                names |= {info[4][0] for info in socket.getaddrinfo(next(iter(names)), port, type=socket.SOCK_STREAM)}
            except (OSError, UnicodeError):
                pass
        for i, (endpoint, names) in enumerate(hosts):
            for other, other_names in hosts[:i]:
                if names & other_names:
                    return other, endpoint
    return None


def parse_stage_intervals(value: str) -> dict[str, int]:
    """``"thinker=1,talker_ar=5"`` -> ``{"thinker": 1, "talker_ar": 5}`` (SGLang Omni stage names,
    decode steps per Decode line).

    Raises:
        ValueError: an entry without ``=``, a name that is not a stage name, a stage given twice, or a
            number of steps that is not an integer from 1 to 100,000.
    """
    from .events import STAGE_NAME

    out: dict[str, int] = {}
    for entry in value.split(","):
        stage, sep, steps = (part.strip() for part in entry.partition("="))
        if not sep or not STAGE_NAME.fullmatch(stage):
            raise ValueError(f"must be STAGE=STEPS,... (e.g. thinker=1,talker_ar=1), got {entry[:80]!r}")
        if stage in out:
            raise ValueError(f"stage {stage!r} is given twice")
        if not (steps.isascii() and steps.isdigit() and len(steps) <= 6
                and DECODE_LOG_INTERVAL_MIN <= int(steps) <= DECODE_LOG_INTERVAL_MAX):
            raise ValueError(f"{stage}: steps must be an integer from {DECODE_LOG_INTERVAL_MIN} to "
                             f"{DECODE_LOG_INTERVAL_MAX}, got {steps[:20]!r}")
        out[stage] = int(steps)
    return out


def parse_http_url(value: str) -> str:
    """Check a base URL the exporter can GET from: ``http://`` or ``https://``, a host, an optional port,
    an optional path, nothing else.

    Returns:
        The URL without a trailing ``/``.

    Raises:
        ValueError: another scheme, no host, a bad port, a query, a fragment, credentials or blanks.
    """
    from urllib.parse import urlsplit

    if not value or any(c.isspace() for c in value):
        raise ValueError(f"must be a URL like http://127.0.0.1:8000, got {value[:80]!r}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{value[:80]!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, got {value[:80]!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"must be a base URL without a query, fragment or credentials, got {value[:80]!r}")
    if port == 0:
        raise ValueError(f"the port must be 1..65535, got {value[:80]!r}")
    return value.rstrip("/")


_HOSTNAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


def parse_listen_address(value: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[V6]:PORT``, ``:PORT`` for all interfaces) into host and port.

    Raises:
        ValueError: when the value is not of that form, the host is neither an IP address nor a
            host name, or the port is outside 0..65535.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit() and len(port) <= 5) or int(port) > 65535:
        raise ValueError(f"must be HOST:PORT with a port 0..65535, got {value[:80]!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{host[:80]!r} in brackets is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"IPv6 hosts go in brackets, e.g. [::1]:{port}; got {value[:80]!r}")
    elif host:
        if all(part.isdigit() for part in host.split(".")):
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                raise ValueError(f"{host[:80]!r} is not an IPv4 address") from None
        elif not _HOSTNAME.fullmatch(host):
            raise ValueError(f"{host[:80]!r} is not a host name or IP address")
    return host, int(port)
