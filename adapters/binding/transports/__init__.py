"""The wires under a binding, one module each behind ``base.Transport``, chosen here.

Adding a wire: its module (a ``Transport``), its line in ``TRANSPORTS``, its value in
the ``transport`` enum of ``spec/schemas/binding.json``, and the docs.
"""

from __future__ import annotations

from retryproof.adapters.binding.transports.base import Gone, Server, Transport, parse_json
from retryproof.adapters.binding.transports.http_api import HttpApi
from retryproof.adapters.binding.transports.mcp_stdio import McpStdio
from retryproof.adapters.binding.transports.mcp_streamable_http import McpStreamableHttp

#: Each value of a binding's ``transport`` and its wires: the one that listens serves a
#: binding with ``start.url``, the other one a binding without.
TRANSPORTS: dict[str, tuple[type[Transport], ...]] = {
    "http": (HttpApi,),
    "mcp": (McpStdio, McpStreamableHttp),
}


def wire(transport: str, url: str | None) -> type[Transport] | None:
    """The wire of a binding of ``transport`` with or without a url; None when the
    transport has no such wire."""
    return next((each for each in TRANSPORTS[transport] if each.listens == (url is not None)), None)


__all__ = ["TRANSPORTS", "Gone", "Server", "Transport", "parse_json", "wire"]
