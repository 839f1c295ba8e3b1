"""A cookie-keeping HTTP client for a served pmd's pages, signed in through the real sign-in form
(its CSRF cookie and the session), for the tests that run pmd in another process."""

from __future__ import annotations

import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request


class PageClient:
    def __init__(self, base: str):
        self.base = base
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with self.opener.open(self.base + path, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def sign_in(self, username: str, password: str) -> bool:
        """True when the form accepted the password (pmd sends the signed-in user on, to the search page)."""
        self.get("/accounts/login/")
        csrf = next(cookie.value for cookie in self.cookies if cookie.name == "csrftoken")
        form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": csrf})
        request = urllib.request.Request(
            self.base + "/accounts/login/", data=form.encode(), headers={"Referer": self.base + "/accounts/login/"}
        )
        with self.opener.open(request, timeout=10) as response:
            return not response.url.endswith("/accounts/login/")
