"""Host names resolved as a test says, at the one boundary every connection goes through
(socket.getaddrinfo): webhook hosts without DNS, and a name that answers otherwise the second time."""

from __future__ import annotations

import socket
from collections.abc import Iterable


def resolve_as(monkeypatch, names: dict[str, Iterable[str] | str]) -> list[str]:
    """Make each name in `names` resolve to its address; a list of addresses is answered one per
    lookup, the last one from then on. Other names (and addresses) resolve as before. Returns the
    names looked up, in order."""
    real = socket.getaddrinfo
    answers = {name: [address] if isinstance(address, str) else list(address) for name, address in names.items()}
    looked_up: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in answers:
            return real(host, port, *args, **kwargs)
        looked_up.append(name)
        queue = answers[name]
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        where = (address, port or 0, 0, 0) if family == socket.AF_INET6 else (address, port or 0)
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", where)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up
