"""A real OpenID provider for the sign-in tests: oidc-provider (Node.js) on loopback.

`start_provider` runs tests/support/oidc/server.mjs once (tests start it once per module) with
a signing key made here, so a test can also sign ID tokens the provider's keys verify (a wrong
audience, an expired token). `Provider.sign_in` drives the provider's own development login
pages over HTTP the way a browser would and returns the URL it sends the person back to.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

from tests.support.servers import free_port, stop

OIDC_DIR = Path(__file__).resolve().parent / "oidc"
CLIENT_ID = "pmd"
CLIENT_SECRET = "pmd-test-client-secret-0123456789"


@dataclass
class Provider:
    issuer: str
    key: object  # joserfc RSAKey: the provider's signing key, private half included
    accounts_file: Path
    process: subprocess.Popen
    people: dict = field(default_factory=dict)

    def settings(self, **overrides) -> dict:
        """pmd's PMD_OIDC_PROVIDERS entry for this provider."""
        return {
            "id": "test",
            "name": "Test IdP",
            "issuer": self.issuer,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "scopes": "openid email profile groups",
            "username_claim": "preferred_username",
            **overrides,
        }

    def person(self, name: str, *, groups: list[str], email: str = "") -> None:
        """Add or change someone at the provider (read at each sign-in)."""
        self.people[name] = {"groups": groups, "email": email or f"{name}@example.org"}
        self.accounts_file.write_text(json.dumps(self.people))

    def sign_in(self, authorize_url: str, login: str, *, back_to: str = "http://testserver/") -> str:
        """Sign in at the provider as `login` (its dev pages take any password) and consent;
        the URL the provider redirects back to pmd with."""
        with httpx.Client(timeout=10) as browser:
            url = authorize_url
            for _ in range(12):
                response = browser.get(url) if not isinstance(url, tuple) else browser.post(url[0], data=url[1])
                if response.is_redirect:
                    target = urljoin(str(response.url), response.headers["location"])
                    if target.startswith(back_to):
                        return target
                    url = target
                    continue
                page = response.text
                form = re.search(r'<form[^>]*action="([^"]+)"', page)
                assert response.status_code == 200 and form, (response.status_code, page[:2000])
                action = urljoin(str(response.url), unescape(form.group(1)))
                if 'name="login"' in page:
                    url = (action, {"prompt": "login", "login": login, "password": "any"})
                else:
                    url = (action, {"prompt": "consent"})
        raise AssertionError("the provider did not send the person back")


def start_provider(tmp_dir: Path, *, redirect_uris: list[str], post_logout_redirect_uris: list[str]) -> Provider:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the OpenID provider of these tests runs on Node.js")
    if not (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=OIDC_DIR, check=True, timeout=300)
    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": "test-signing-key", "use": "sig", "alg": "RS256"})
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    accounts = tmp_dir / "accounts.json"
    accounts.write_text("{}")
    config = tmp_dir / "provider.json"
    config.write_text(
        json.dumps(
            {
                "port": port,
                "issuer": issuer,
                "accounts": str(accounts),
                "jwks": {"keys": [key.as_dict(private=True)]},
                "clients": [
                    {
                        "client_id": CLIENT_ID,
                        "client_secret": CLIENT_SECRET,
                        "redirect_uris": redirect_uris,
                        "post_logout_redirect_uris": post_logout_redirect_uris,
                        "grant_types": ["authorization_code"],
                        "response_types": ["code"],
                        "token_endpoint_auth_method": "client_secret_basic",
                    }
                ],
            }
        )
    )
    process = subprocess.Popen(
        [node, str(OIDC_DIR / "server.mjs"), str(config)],
        cwd=OIDC_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(issuer + "/.well-known/openid-configuration", timeout=1).status_code == 200:
                return Provider(issuer=issuer, key=key, accounts_file=accounts, process=process)
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"the OpenID provider stopped: {process.stdout.read()}")
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the OpenID provider did not answer within 20 s")


def stop_provider(provider: Provider) -> None:
    stop(provider.process)
