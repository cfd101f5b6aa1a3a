"""Certify an MCP server or an HTTP API with no harness: a declarative binding
(``spec/schemas/binding.json``) says how to start it, call its side-effecting tool
path, read its answers and list its effects; ``BindingConnection`` puts it behind the
``Connection`` interface every scenario uses."""

from retryproof.adapters.binding.binding_file import Binding, BindingError, parse
from retryproof.adapters.binding.connection import BindingConnection

__all__ = ["Binding", "BindingConnection", "BindingError", "parse"]
