"""Client addresses as pmd records them (lockouts, token throttling): standard library only, so the
CLI can check one while it parses its arguments, before Django is set up."""

from __future__ import annotations

import ipaddress


def normalized_ip(value: str | None) -> str | None:
    """`value` as an IP address in its canonical form, or None when it is not one. Also takes
    the "[::1]:443" and "1.2.3.4:5678" forms servers and proxies write (the port is dropped)."""
    if not value:
        return None
    value = value.strip()
    if value.startswith("[") and "]" in value:  # "[::1]:443" style
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # "1.2.3.4:5678" style (an IPv6 address has several colons)
        host, _, port = value.partition(":")
        if not port.isdigit():
            return None
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None
