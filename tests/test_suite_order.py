"""The suite's own schedule (tests/suite_order.py): each pytest-xdist worker starts on its
share of the longest tests, and each of those names a test that exists."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from suite_order import BROWSER_FILES, LONG_TESTS, long_tests_first

ROOT = Path(__file__).resolve().parents[1]


def _items(names: list[str]) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=name) for name in names]


def test_each_worker_starts_on_its_share_of_the_long_tests():
    long = [f"{prefix}[case]" for prefix in LONG_TESTS[:7]]
    items = _items([f"tests/test_{n}.py::test_short" for n in range(40)] + long)
    items = long_tests_first(items, 3)
    assert sorted(item.nodeid for item in items) == sorted(
        [*(f"tests/test_{n}.py::test_short" for n in range(40)), *long]
    )
    # worksteal's first deal of 47 tests to 3 idle workers: 15, 16, 16 in collection order
    runs = [items[:15], items[15:31], items[31:]]
    assert [[item.nodeid for item in run if item.nodeid in long] for run in runs] == [
        long[0::3],
        long[1::3],
        long[2::3],
    ]
    for run in runs:  # the long tests first
        flags = [item.nodeid in long for item in run]
        assert flags == sorted(flags, reverse=True)


def test_on_one_worker_the_long_tests_come_first():
    items = _items(["tests/test_a.py::test_a", LONG_TESTS[1], LONG_TESTS[0]])
    assert [item.nodeid for item in long_tests_first(items, 1)] == [
        LONG_TESTS[0],
        LONG_TESTS[1],
        "tests/test_a.py::test_a",
    ]


def test_each_long_test_names_a_test_function_of_its_file():
    for prefix in LONG_TESTS:
        path, name = prefix.split("::")
        function = re.match(r"\w+", name).group(0)
        assert re.search(rf"^def {function}", (ROOT / path).read_text(encoding="utf-8"), re.M), prefix


def test_the_browser_files_are_the_files_that_render_pages_and_one_run_deals_them_together():
    """A file that renders pages but is not named would have its browser ended after each
    of its tests (tests/conftest.py), and launched again for the next."""
    rendering = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"^import headless_chromium", path.read_text(encoding="utf-8"), re.M)
    }
    assert rendering == set(BROWSER_FILES)
    pages = [f"{path}::test_{n}" for path in BROWSER_FILES for n in range(3)]
    items = _items([f"tests/test_{n}.py::test_short" for n in range(40)] + pages + [LONG_TESTS[0]])
    order = [item.nodeid for item in long_tests_first(items, 3)]
    # the last of the three runs: its long tests (none here), then every page, together
    assert order[31:37] == pages
