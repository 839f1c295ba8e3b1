"""Telling people outside pmd: a JSON POST to a webhook, an email when Django's email is configured
(the saved searches' digest). Failures are reported to the caller, never raised: one bad address
must not stop the others."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from urllib.parse import urlsplit

import httpx

from django.conf import settings

from indexing.errors import InvalidSearchInput

log = logging.getLogger(__name__)
WEBHOOK_TIMEOUT = 10


def webhook_check(url: str) -> None:
    """An http(s) address with a host; on a public address unless PMD_DIGEST_PRIVATE_WEBHOOKS."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidSearchInput("a webhook is an http:// or https:// address")
    if not settings.PMD_DIGEST_PRIVATE_WEBHOOKS and _private(parts.hostname):
        raise InvalidSearchInput("a webhook may not call a private or loopback address (PMD_DIGEST_PRIVATE_WEBHOOKS)")


def _private(host: str) -> bool:
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False  # unknown now: checked again when it is called
    return any(not ipaddress.ip_address(a.split("%")[0]).is_global for a in addresses)


def webhook_post(url: str, payload: dict) -> str | None:
    """POST `payload` as JSON; None when delivered, else why not. Redirects are not followed (a
    public address could send the request on to a private one) and no proxy from the environment
    is used."""
    try:
        webhook_check(url)
        answer = httpx.post(url, content=json.dumps(payload).encode(), timeout=WEBHOOK_TIMEOUT,
                            follow_redirects=False, trust_env=False,
                            headers={"Content-Type": "application/json", "User-Agent": "pmd digest"})
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
    from django.core.mail import send_mail

    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to])
    except Exception as exc:  # noqa: BLE001 - reported to the caller, never raised
        log.warning("digest email to %s failed: %s", to, exc)
        return str(exc)[:200]
    return None
