"""The import graph of the installed layout, drawn from the modules' own text.

Every ``import`` and ``from ... import`` of the four folders counts, wherever it stands:
at module level, inside a function (a lazy import still makes the importer depend on the
imported module) or under ``TYPE_CHECKING``. A folder is ``retryproof.<folder>``, as
``pyproject.toml`` installs it. ``importlib.import_module`` of a computed name (the
scenario registry discovering its modules) is not an arrow the text shows, and is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
FOLDERS = ("spec", "conformance", "adapters", "reference_impl")
#: Which parts each part may import (ARCHITECTURE.md): spec nothing of ours, the reference
#: runtime and the adapters only the contract, the kit never the reference runtime.
MAY_IMPORT = {
    "spec": {"spec"},
    "reference_impl": {"spec", "reference_impl"},
    "adapters": {"spec", "adapters"},
    "conformance": {"spec", "adapters", "conformance"},
}

Graph = Mapping[str, frozenset[str]]


def modules(root: Path, folders: tuple[str, ...]) -> dict[str, Path]:
    """``retryproof.<folder>.<module>`` -> its file, for every module of ``folders``; a
    hidden folder is none of ours (the matrix's ``.venv``s under adapters/implementations)."""
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if any(part.startswith(".") for part in parts):
                continue
            name = ".".join(("retryproof", *(parts[:-1] if parts[-1] == "__init__" else parts)))
            found[name] = path
    return found


def import_graph(root: Path, folders: tuple[str, ...] = FOLDERS) -> Graph:
    """Module -> the modules of ours it imports (a name imported from a package is the
    submodule when there is one, else the package)."""
    files = modules(root, folders)

    def ours(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per dot after the first
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                named.update(
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names
                )
        targets = {ours(item) for item in named if item.startswith("retryproof.")}
        graph[name] = frozenset(target for target in targets if target is not None and target != name)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _reachable(graph: Graph, start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def arrows_back_up(graph: Graph, files: Mapping[str, Path]) -> Iterator[str]:
    """Paths that leave a sub-package (``conformance/writers/``, ``adapters/binding/``)
    and come back into it through a module outside it: the sub-package then sits both
    above and below that module."""
    packages = [name for name, path in files.items() if path.name == "__init__.py" and name.count(".") >= 2]
    for name in graph:
        inside = [package for package in packages if name.startswith(package + ".")]
        if not inside:
            continue
        package = max(inside, key=len)
        for target in graph[name]:
            if target == package or target.startswith(package + "."):
                continue
            back = sorted(item for item in _reachable(graph, target) if item.startswith(package + "."))
            if back:
                yield f"{name} -> {target} -> ... -> {back[0]}"


def _part(module: str) -> str:
    return module.split(".")[1]


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(REPOSITORY)


def test_the_modules_import_each_other_without_a_cycle(graph):
    assert cycles(graph) == []


def test_no_arrow_runs_back_up_into_a_sub_package(graph):
    assert list(arrows_back_up(graph, modules(REPOSITORY, FOLDERS))) == []


def test_each_part_imports_only_the_parts_below_it(graph):
    crossings = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if _part(target) not in MAY_IMPORT[_part(module)]
    )
    assert crossings == []


def test_the_drawing_sees_lazy_and_type_only_imports_and_their_cycles(tmp_path):
    """The checks above have teeth: a cycle closed only by an import inside a function,
    a type-only arrow and a path back into a sub-package are all found."""
    (tmp_path / "conformance" / "writers").mkdir(parents=True)
    for package in ("conformance", "conformance/writers"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "conformance" / "options.py").write_text(
        "def formats():\n    from retryproof.conformance.writers.files import FORMATS\n    return FORMATS\n"
    )
    (tmp_path / "conformance" / "events.py").write_text(
        "from retryproof.conformance.options import formats\nTYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n    from retryproof.conformance import replay_file\n"
    )
    (tmp_path / "conformance" / "replay_file.py").write_text("from .writers.escape import stem\n")
    (tmp_path / "conformance" / "writers" / "escape.py").write_text("stem = str\n")
    (tmp_path / "conformance" / "writers" / "files.py").write_text(
        "from retryproof.conformance import events, replay_file\n"
    )
    drawn = import_graph(tmp_path, ("conformance",))
    assert drawn["retryproof.conformance.events"] == {
        "retryproof.conformance.options",
        "retryproof.conformance.replay_file",
    }
    assert cycles(drawn) == [
        ["retryproof.conformance.events", "retryproof.conformance.options", "retryproof.conformance.writers.files"]
    ]
    assert (
        "retryproof.conformance.writers.files -> retryproof.conformance.replay_file -> ... -> "
        "retryproof.conformance.writers.escape"
    ) in set(arrows_back_up(drawn, modules(tmp_path, ("conformance",))))
