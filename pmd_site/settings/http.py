"""The web server's settings: the hosts and proxies it trusts, cookies, /mcp's hosts, timeouts."""

from __future__ import annotations

from indexing.errors import ConfigError
from pmd_site.settings.core import BASE_DIR
from pmd_site.settings.table import read

ALLOWED_HOSTS = read("PMD_ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = read("PMD_CSRF_TRUSTED_ORIGINS")
# The reverse proxies whose X-Forwarded-For / X-Forwarded-Proto count (pmd_site.security), by the
# connection's own address; the forward-auth proxies count too. From any other address those
# headers are ignored.
PMD_TRUSTED_PROXIES = read("PMD_TRUSTED_PROXIES")
# Set by pmd_site.security.TrustedProxyMiddleware from a trusted proxy's X-Forwarded-Proto only.
SECURE_PROXY_SSL_HEADER = ("PMD_FORWARDED_PROTO", "https")
PMD_BEHIND_HTTPS_PROXY = read("PMD_BEHIND_HTTPS_PROXY")
if PMD_BEHIND_HTTPS_PROXY and not (PMD_TRUSTED_PROXIES or read("PMD_FORWARD_AUTH_PROXIES")):
    raise ConfigError(
        "PMD_BEHIND_HTTPS_PROXY=true needs PMD_TRUSTED_PROXIES: the proxy's addresses or networks "
        "(its X-Forwarded-For and X-Forwarded-Proto count from those addresses only)"
    )
# Secure by default when a TLS-terminating proxy is declared; overridable either way.
SESSION_COOKIE_SECURE = read("PMD_SECURE_COOKIES", PMD_BEHIND_HTTPS_PROXY)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Host / Origin headers accepted at /mcp (DNS-rebinding protection); empty = from ALLOWED_HOSTS.
PMD_MCP_ALLOWED_HOSTS = read("PMD_MCP_ALLOWED_HOSTS")
PMD_MCP_ALLOWED_ORIGINS = read("PMD_MCP_ALLOWED_ORIGINS")
# Web server timeouts in seconds (pmd serve; see pmd_site.runtime.http_protocol): a request header must be
# complete this long after its first byte; an idle keep-alive connection is closed; a request
# body (or a response the client stopped reading) may stall this long.
PMD_HTTP_HEADER_TIMEOUT = read("PMD_HTTP_HEADER_TIMEOUT")
PMD_HTTP_KEEPALIVE_TIMEOUT = read("PMD_HTTP_KEEPALIVE_TIMEOUT")  # outlive the clients' idle pools
PMD_HTTP_IDLE_TIMEOUT = read("PMD_HTTP_IDLE_TIMEOUT")
for _name in ("PMD_HTTP_HEADER_TIMEOUT", "PMD_HTTP_KEEPALIVE_TIMEOUT", "PMD_HTTP_IDLE_TIMEOUT"):
    if globals()[_name] <= 0:
        raise ConfigError(f"{_name}={globals()[_name]} must be more than 0 seconds")
# Documents may show images from any https: address (off: only pmd's own and data: images).
PMD_ALLOW_REMOTE_IMAGES = read("PMD_ALLOW_REMOTE_IMAGES")
# The built documentation site served at /help/ (mkdocs build writes site/ beside the source).
PMD_HELP_DIR = read("PMD_HELP_DIR") or str(BASE_DIR / "site")
