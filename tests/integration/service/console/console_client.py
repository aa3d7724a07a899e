"""A falcon TestClient that behaves like a browser for the console: it keeps the cookies the
app sets and the CSRF token of the last page, so tests read as clicks."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import falcon
from falcon.testing import Result, TestClient

CSRF = re.compile(r'name="csrf" value="([^"]*)"')


class ConsoleClient:
    def __init__(self, app: falcon.App):
        self.client = TestClient(app)
        self.cookies: dict[str, str] = {}
        self.csrf = ""

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return headers

    def _keep(self, result: Result) -> Result:
        for name, cookie in result.cookies.items():
            if cookie.value:
                self.cookies[name] = cookie.value
            else:  # unset: an empty value that expired
                self.cookies.pop(name, None)
        found = CSRF.search(result.text or "")
        if found:
            self.csrf = found.group(1)
        return result

    def get(self, path: str, *, headers: dict[str, str] | None = None) -> Result:
        return self._keep(self.client.simulate_get(path, headers=self._headers(headers)))

    def post(self, path: str, form: dict[str, str] | None = None, *, csrf: str | None) -> Result:
        """POST a form; `csrf` None sends none (a forged request)."""
        fields = dict(form or {})
        if csrf is not None:
            fields["csrf"] = csrf
        headers = self._headers({"Content-Type": falcon.MEDIA_URLENCODED})
        return self._keep(self.client.simulate_post(path, body=urlencode(fields), headers=headers))

    def sign_in(self, token: str) -> Result:
        self.get("/ui/login")
        return self.post("/ui/login", {"token": token}, csrf=self.csrf)
