"""The retryproof contract as data: the YAML spec, its JSON Schemas and golden vectors.

Everything here ships inside the package and is read at run time, so the kit always
checks against the exact contract it was released with.
"""

from __future__ import annotations

import json
import os
from functools import cache

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "SCHEMA_URN",
    "SPEC_VERSION",
    "contract_files",
    "fingerprint",
    "load_spec",
    "load_vectors",
    "releases",
    "schema",
    "validator",
]

SPEC_VERSION = "4.0.0"


# The files beside this module. pip installs a package as files (from a wheel, or
# editable), so a path reaches them; importlib.resources, which could also read them
# from a zip, imports typing, pathlib, tempfile and zipfile, and every kit command
# and the approval ops read the spec.
_FOLDER = os.path.dirname(os.path.abspath(__file__))


def _read_text(*parts: str) -> str:
    with open(os.path.join(_FOLDER, *parts), encoding="utf-8") as handle:
        return handle.read()


@cache
def load_spec() -> dict[str, Any]:
    """The normative spec, ``spec/retryproof.yaml``. YAML is imported here, not at
    module level: a harness that only needs the digest never pays for it. libyaml's
    safe loader, where PyYAML was built with it, reads the spec several times faster
    than the pure-Python one, and every kit command starts by reading it."""
    import yaml

    return yaml.load(_read_text("retryproof.yaml"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def load_vectors(name: str = "write-task-v1") -> dict[str, Any]:
    """Golden vectors from ``spec/vectors/`` by file stem: the write-task-v1 digest
    (the default), ``submission-id`` or ``approval-request``."""
    return json.loads(_read_text("vectors", f"{name}.json"))


@cache
def schema(name: str) -> dict[str, Any]:
    """One JSON Schema from ``spec/schemas/`` by file stem, e.g. ``schema("report")``."""
    return json.loads(_read_text("schemas", f"{name}.json"))


@cache
def _registry():
    from referencing import Registry, Resource

    resources = []
    for name in os.listdir(os.path.join(_FOLDER, "schemas")):
        if name.endswith(".json"):
            contents = json.loads(_read_text("schemas", name))
            resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


SCHEMA_URN = "urn:retryproof:schema:"


def contract_files() -> list[str]:
    """The files that are the contract, as paths relative to this folder, sorted: the
    YAML spec, every schema and every vector file. ``spec_version`` names exactly
    these bytes; the Python beside them implements them, and ``releases.json`` records them."""
    names = ["retryproof.yaml"]
    for folder in ("schemas", "vectors"):
        names += [f"{folder}/{name}" for name in os.listdir(os.path.join(_FOLDER, folder)) if name.endswith(".json")]
    return sorted(names)


@cache
def fingerprint() -> str:
    """``sha256:<hex>`` of the contract files (``contract_files``): each file's path, its
    length and its bytes, in order. Every report carries it (``spec_fingerprint``), so a
    reader can tell two texts that carry one ``spec_version`` apart."""
    import hashlib  # here, not at module level: loading OpenSSL is a tenth of a harness's start

    digest = hashlib.sha256()
    for name in contract_files():
        with open(os.path.join(_FOLDER, name), "rb") as handle:
            data = handle.read()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()


@cache
def releases() -> dict[str, str]:
    """``releases.json``: each released ``spec_version`` and the fingerprint of its
    files. A released version's files never change again (a change is a new version);
    the project records its releases here rather than in tags."""
    return json.loads(_read_text("releases.json"))["releases"]


def validator(name: str):
    """A Draft 2020-12 validator for ``schema(name)`` that resolves ``$ref`` between
    the shipped schemas (never over the network).

    ``name`` may point into a schema, e.g. ``"harness-response#/$defs/write_task_result"``:
    the per-op result schemas live there, beside the envelope they travel in. The
    references are resolved once, here (``_inlined``): the kit validates every result a
    harness answers, and jsonschema looking each ``$ref`` up again through the registry
    was about half of that time.
    """
    from jsonschema import Draft202012Validator

    stem = name.partition("#")[0]
    contents = _inlined({"$ref": SCHEMA_URN + name} if "#" in name else schema(name), stem)
    return Draft202012Validator(contents, registry=_registry(), format_checker=Draft202012Validator.FORMAT_CHECKER)


#: Keywords whose value is data (compared, not validated against), never a schema.
_DATA_KEYWORDS = frozenset(("const", "enum", "default", "examples"))
#: Keywords whose value maps names to schemas (a property named ``$ref`` is a name).
_NAMED_SCHEMAS = frozenset(("properties", "patternProperties", "dependentSchemas"))


def _inlined(node: Any, document: str, within: tuple[str, ...] = (), root: bool = True) -> Any:
    """``node``, a part of the shipped schema ``document``, with each ``$ref`` replaced by
    the schema it names (beside other keywords, both apply: an ``allOf``). A reference
    back into one being inlined (a recursive schema) stays a reference, made absolute so
    that the registry finds it in its own document; so ``$defs`` and ``$id`` are dropped:
    nothing refers to them in the copy. Only what the shipped schemas use is inlined: a
    fragment that is no JSON Pointer (an ``$anchor``'s name) stays an absolute reference,
    and a schema whose keywords change how references resolve (a nested ``$id``,
    ``$dynamicRef``) is refused rather than resolved wrongly."""
    if isinstance(node, list):
        return [_inlined(item, document, within, False) for item in node]
    if not isinstance(node, dict):
        return node
    inlined: dict[str, Any] = {}
    changes_resolution = {"$dynamicRef", "$dynamicAnchor", "$recursiveRef"} & node.keys()
    if changes_resolution or ("$id" in node and not root):
        raise ValueError(
            f"{document}: {sorted(changes_resolution) or ['a nested $id']} would resolve otherwise inlined"
        )
    for keyword, value in node.items():
        if keyword in ("$defs", "$id"):
            continue
        if keyword in _DATA_KEYWORDS:
            inlined[keyword] = value
        elif keyword in _NAMED_SCHEMAS and isinstance(value, dict):
            inlined[keyword] = {key: _inlined(item, document, within, False) for key, item in value.items()}
        elif keyword != "$ref":
            inlined[keyword] = _inlined(value, document, within, False)
    reference = node.get("$ref")
    if not isinstance(reference, str):
        return inlined
    target = SCHEMA_URN + document + reference if reference.startswith("#") else reference
    stem, _, pointer = target[len(SCHEMA_URN) :].partition("#")
    if target in within or not target.startswith(SCHEMA_URN) or (pointer and not pointer.startswith("/")):
        return {**inlined, "$ref": target}
    resolved = _inlined(_pointed(schema(stem), pointer), stem, (*within, target), not pointer)
    return {**inlined, "allOf": [resolved, *inlined.get("allOf", [])]} if inlined else resolved


def _pointed(document: Any, pointer: str) -> Any:
    """The part of ``document`` a JSON Pointer (RFC 6901, ``/$defs/name``) names."""
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document
