"""The server's walls against other web pages and other hosts (an ASGI middleware).

- **Host check** (DNS rebinding): a request whose ``Host`` is not the address the server bound
  (or ``localhost``/``127.0.0.1``/``[::1]`` on loopback) is refused, so a page on
  ``evil.example`` that resolves to 127.0.0.1 cannot read the API.
- **Token**: when set (always, off loopback), every request carries it, as
  ``Authorization: Bearer T``, the ``recstore_token`` cookie (set when a page is opened with
  ``?token=T``) or ``?token=T``.
- **Writes** (POST) need a non-simple content type (``application/json``,
  ``application/x-ndjson``, ``application/x-protobuf``: a cross-site form cannot send those
  without a CORS preflight, which this server never answers) or the token in a header.
- **No CORS**: no ``Access-Control-*`` header is ever sent.
- **Body limit**: a body over ``max_body`` bytes is refused with 413 while it is read.
- **Content-Security-Policy** on every page: scripts only from the server's own ``/static``.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

__all__ = ["DEFAULT_MAX_BODY", "Guard", "WRITE_TYPES"]

DEFAULT_MAX_BODY = 64 * 2**20
WRITE_TYPES = frozenset({"application/json", "application/x-ndjson", "application/x-protobuf",
                         "application/protobuf"})
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class Guard:
    """ASGI middleware applying the rules of the module docstring around ``app``."""

    def __init__(self, app: Callable, *, host: str, port_ref: Callable[[], int],
                 token: str | None, max_body: int = DEFAULT_MAX_BODY):
        self.app = app
        self.host = host
        self.port_ref = port_ref
        self.token = token
        self.max_body = max_body

    def allowed_hosts(self) -> set[str]:
        port = self.port_ref()
        names = {self.host} | (LOOPBACK_NAMES if self.host in LOOPBACK_NAMES else set())
        return {f"{n}:{port}" for n in names} | {f"[{n}]:{port}" for n in names if ":" in n}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        # bound to every address (0.0.0.0, ::), the server has no one name to check; the
        # token it always requires there is the wall
        wildcard = self.host in ("0.0.0.0", "::")
        if not wildcard and headers.get("host", "") not in self.allowed_hosts():
            await _refuse(send, 421, "this server answers only to its own address (Host header)")
            return
        token_ok = self._token_given(scope, headers)
        if self.token and not token_ok:
            await _refuse(send, 401, "a token is required (Authorization: Bearer TOKEN)")
            return
        if scope["method"] not in ("GET", "HEAD"):
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            header_token = bool(self.token) and self._header_token(headers)
            if kind not in WRITE_TYPES and not header_token:
                await _refuse(send, 415, "writes need Content-Type application/json, "
                              "application/x-ndjson or application/x-protobuf")
                return
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                await _refuse(send, 413, f"request body over {self.max_body} bytes")
                return
            receive = self._limited(receive)
        await self.app(scope, receive, _with_headers(send, set_cookie=self._cookie(scope)))

    def _header_token(self, headers: dict[str, str]) -> bool:
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        return bool(given) and hmac.compare_digest(given, self.token or "")

    def _token_given(self, scope: Scope, headers: dict[str, str]) -> bool:
        if not self.token:
            return True
        if self._header_token(headers):
            return True
        cookie = SimpleCookie(headers.get("cookie", ""))
        if "recstore_token" in cookie and hmac.compare_digest(cookie["recstore_token"].value,
                                                              self.token):
            return True
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return any(hmac.compare_digest(t, self.token) for t in query.get("token", []))

    def _cookie(self, scope: Scope) -> str | None:
        if not self.token:
            return None
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if self.token in query.get("token", []):
            return f"recstore_token={self.token}; HttpOnly; SameSite=Strict; Path=/"
        return None

    def _limited(self, receive: Receive) -> Receive:
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise BodyTooLarge(self.max_body)
            return message

        return limited


class BodyTooLarge(Exception):
    """A request body grew past the limit while it was read."""

    def __init__(self, limit: int):
        super().__init__(f"request body over {limit} bytes")


def _with_headers(send: Send, set_cookie: str | None) -> Send:
    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", [])
                       if not k.lower().startswith(b"access-control-")]
            names = {k.lower() for k, _ in headers}
            if b"content-security-policy" not in names:
                headers.append((b"content-security-policy", PAGE_CSP.encode()))
            headers += [(b"x-content-type-options", b"nosniff"),
                        (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
            if set_cookie:
                headers.append((b"set-cookie", set_cookie.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return sending


async def _refuse(send: Send, status: int, why: str) -> None:
    body = ('{"error": "' + why.replace('"', "'") + '"}').encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
