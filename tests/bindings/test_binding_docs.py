"""The bindings spec/README.md shows are complete bindings the kit accepts, each at
most 30 lines, so the documented promise ("a binding of at most 30 lines") holds."""

from __future__ import annotations

import re

import pytest
import yaml
from binding_helpers import REPO

from retryproof.adapters.binding import parse

SECTIONS = ("Certifying an MCP server", "Certifying an HTTP API")


def binding_of(section: str) -> str:
    text = (REPO / "spec" / "README.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", body, re.S)
    assert len(blocks) == 1, section
    return blocks[0]


@pytest.mark.parametrize("section", SECTIONS)
def test_each_documented_binding_parses_and_fits_in_30_lines(section):
    text = binding_of(section)
    assert len(text.strip().splitlines()) <= 30
    binding = parse(yaml.safe_load(text), section)
    assert binding.transport == ("mcp" if "MCP" in section else "http")


def test_every_key_of_the_binding_schema_has_a_description():
    from retryproof.spec import schema

    missing = []

    def walk(node, where):
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                if "description" not in sub:
                    missing.append(f"{where}.{name}")
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}[{index}]")

    walk(schema("binding"), "binding")
    assert not missing
