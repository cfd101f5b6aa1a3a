"""A plain HTTP API: the bound call is one request (the key in a header, the task in
the JSON body), the listing a GET; each request on a new connection."""

from __future__ import annotations

import copy
import http.client
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from retryproof.adapters.binding.transports.base import (
    MAX_ANSWER_BYTES,
    Gone,
    Server,
    Transport,
    json_bytes,
    parse_json,
)

if TYPE_CHECKING:
    from retryproof.adapters.binding.transports.base import BoundPath


def http_exchange(
    base_url: str,
    method: str,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    timeout: float,
) -> dict[str, Any]:
    """One HTTP request on a new connection: ``{status, header, body}``."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    sent_headers = {"Accept": "application/json", **(headers or {})}
    payload = None
    if body is not None:
        payload = json_bytes(body)
        sent_headers["Content-Type"] = "application/json"
    try:
        connection.request(method, parts.path.rstrip("/") + path, body=payload, headers=sent_headers)
        response = connection.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
        if len(data) > MAX_ANSWER_BYTES:
            raise Gone(f"the answer is longer than {MAX_ANSWER_BYTES} bytes")
        return {
            "status": response.status,
            "header": {name.lower(): value for name, value in response.getheaders()},
            "body": parse_json(data) if data else None,
        }
    except (OSError, http.client.HTTPException) as exc:
        raise Gone(f"{method} {path}: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()


class HttpApi(Transport):
    label = "http"
    answer_roots = ("status", "header", "body")
    listens = True
    call_needs = (("method", "path"), "an http call needs a method and a path")
    foreign = {"call": ("tool",), "call.key": ("argument", "meta"), "listing": ("tool", "resource")}

    def ready(self, bound_s: float) -> None:
        self.accepting(time.monotonic() + bound_s)

    def __init__(self, binding: BoundPath, server: Server):
        super().__init__(binding, server)
        self.url = server.base_url or ""

    def call(self, arguments: dict[str, Any], key: str | None, timeout: float) -> dict[str, Any]:
        binding = self.binding
        headers = {binding.key[1]: key} if key is not None else {}
        return http_exchange(
            self.url, binding.method or "POST", binding.path or "/", headers=headers, body=arguments, timeout=timeout
        )

    def through(self, url: str) -> Transport:
        aimed = copy.copy(self)
        aimed.url = url
        return aimed

    def listing(self, timeout: float) -> tuple[dict[str, Any], str | None]:
        path = self.binding.listing["get"]
        answer = http_exchange(self.server.base_url or "", "GET", path, timeout=timeout)
        return answer, None if answer.get("status") == 200 else f"listing GET {path} answered"
