"""Telling people outside pmd: a JSON POST to a webhook, an email when Django's email is configured
(the saved searches' digest). Failures are reported to the caller, never raised: one bad address
must not stop the others."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket

import httpx
from django.conf import settings
from django.core.mail import send_mail

from indexing.errors import InvalidSearchInput

log = logging.getLogger(__name__)
WEBHOOK_TIMEOUT = 10


def webhook_check(url: str) -> str:
    """An http(s) address with a host whose name resolves, to public addresses unless
    PMD_DIGEST_PRIVATE_WEBHOOKS; the address a delivery connects to (the name is not resolved
    again: it could answer otherwise the second time, a private address after a public one)."""
    try:
        given = httpx.URL(url)  # the parser of the request that delivers: the host checked is the host called
    except httpx.InvalidURL:
        given = None
    if given is None or given.scheme not in ("http", "https") or not given.host:
        raise InvalidSearchInput("a webhook is an http:// or https:// address")
    addresses = _addresses(given.raw_host.decode("ascii"))
    if not settings.PMD_DIGEST_PRIVATE_WEBHOOKS and any(not ipaddress.ip_address(a).is_global for a in addresses):
        raise InvalidSearchInput("a webhook may not call a private or loopback address (PMD_DIGEST_PRIVATE_WEBHOOKS)")
    return addresses[0]


def _addresses(host: str) -> list[str]:
    """The addresses `host` resolves to, in the resolver's order; a name that resolves to none is refused."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        found = []
    addresses = list(dict.fromkeys(info[4][0].split("%")[0] for info in found))
    if not addresses:
        raise InvalidSearchInput(f"the webhook's host {host} does not resolve to an address")
    return addresses


def webhook_post(url: str, payload: dict) -> str | None:
    """POST `payload` as JSON; None when delivered, else why not. The request connects to the
    address `webhook_check` approved, with the URL's name as its Host and, for https, as the name
    the certificate is verified for. Redirects are not followed (a public address could send the
    request on to a private one) and no proxy from the environment is used."""
    try:
        address = webhook_check(url)
    except InvalidSearchInput as exc:  # fine when saved; the name no longer resolves, or now privately
        log.warning("webhook %s skipped: %s", url, exc)
        return str(exc)
    try:
        given = httpx.URL(url)
        with httpx.Client(timeout=WEBHOOK_TIMEOUT, follow_redirects=False, trust_env=False) as client:
            answer = client.post(
                given.copy_with(host=address),
                content=json.dumps(payload).encode(),
                headers={
                    "Host": given.netloc.decode("ascii"),
                    "Content-Type": "application/json",
                    "User-Agent": "pmd digest",
                },
                extensions={"sni_hostname": given.raw_host.decode("ascii")},
            )
        if answer.status_code >= 300:
            return f"HTTP {answer.status_code}"
    except Exception as exc:  # noqa: BLE001 - reported to the caller, never raised
        log.warning("webhook %s failed: %s", url, exc)
        return str(exc)[:200]
    return None


def email_configured() -> bool:
    return bool(settings.EMAIL_HOST)


def email_send(to: str, subject: str, body: str) -> str | None:
    """Send one email; None when sent (or email is not configured: nothing to do), else why not."""
    if not (email_configured() and to):
        return None
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to])
    except Exception as exc:  # noqa: BLE001 - reported to the caller, never raised
        log.warning("digest email to %s failed: %s", to, exc)
        return str(exc)[:200]
    return None
