"""The order the suite's tests are dealt to pytest-xdist workers in (tests/conftest.py).

The worksteal schedule deals the collection out in equal runs, one per worker, and an
idle worker steals from the end of a busy one's queue: a long test late in a run is
stolen by nobody, and the other workers stand idle while its worker ends it (on 2 CPUs,
with 5 workers, they ended up to 57 s apart). So each run begins with its share of the
longest tests. And the tests that render pages in headless Chromium are dealt together,
in the last run after its long tests: one worker's one browser renders every page, and
is ended once they are done (tests/conftest.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol, TypeVar


class _Item(Protocol):
    nodeid: str


Item = TypeVar("Item", bound=_Item)

#: The suite's longest tests (20-60 s each on 2 loaded CPUs; ``benchmarks/bench_suite.py``
#: lists them), longest first, each named once even where several tests read what it
#: computes (``kit.once_per_session``): the others would wait for it on another worker.
LONG_TESTS = (
    "tests/adapters/test_bundled_implementations.py::test_the_matrix_installs_a_real_target",
    "tests/conformance/test_pytest_plugin_scale_out.py::test_plugin_shards_merge_into_the_whole_run",
    "tests/bindings/test_binding_faults.py::test_a_failing_crash_point_replays_exactly",
    "tests/faulty/test_kill_matrix.py::test_each_faulty_runtime_is_killed_by_its_declared_scenarios",
    "tests/bindings/test_binding_faults.py::test_the_fixed_claim_service_passes_every_fault_scenario",
    "tests/conformance/test_reference_run.py::test_reference_runtime_passes_every_scenario",
    "tests/conformance/test_kill_nemesis.py::test_a_runtime_recording_its_effect_late_is_never_passed",
    "tests/independent/test_node_harness.py::test_clean_runtime_passes_every_scenario_it_can_take_part_in",
    "tests/bindings/test_binding_mcp.py::test_the_reference_over_mcp_passes",
    "tests/bindings/test_binding_faults.py::test_each_defect_is_caught_by_the_scenarios_aimed_at_it[mcp-",
    "tests/bindings/test_binding_http.py::test_the_reference_over_http_passes_every_scenario_a_binding_offers",
    "tests/conformance/test_judging_holes.py::test_a_fuzz_digest_conflict_answers_no_to_reuse_not_to_races",
    "tests/bindings/test_tool_shapes.py::test_a_tool_bound_as_it_is_passes_every_scenario_its_shape_changes",
)


#: The files whose tests render pages in headless Chromium (tests/conformance/headless_chromium.py).
#: A browser costs its worker 0.7-0.9 CPU-s to launch and 0.003-0.014 CPU-s a second while it
#: waits for a page; two workers each kept one for 36-67 s.
BROWSER_FILES = ("tests/conformance/test_pictures.py", "tests/conformance/test_report_artefacts.py")


def renders_pages(item: _Item) -> bool:
    return item.nodeid.split("::")[0] in BROWSER_FILES


def long_tests_first(items: Sequence[Item], workers: int) -> list[Item]:
    """``items`` reordered so that each of the ``workers`` runs worksteal deals first (what
    is left, shared evenly among the idle workers) begins with its share of ``LONG_TESTS``,
    the last run then with every test of ``BROWSER_FILES``, the rest in collection order."""
    first = list(
        {item.nodeid: item for prefix in LONG_TESTS for item in items if item.nodeid.startswith(prefix)}.values()
    )
    chosen = {item.nodeid for item in first}
    rendering = [item for item in items if item.nodeid not in chosen and renders_pages(item)]
    chosen.update(item.nodeid for item in rendering)
    rest = iter([item for item in items if item.nodeid not in chosen])
    runs = [first[worker::workers] for worker in range(workers)]
    runs[-1].extend(rendering)
    left = len(items)
    for worker, run in enumerate(runs):
        size = left // (workers - worker)
        left -= size
        run.extend(itertools.islice(rest, max(0, size - len(run))))
    return [item for run in runs for item in run] + list(rest)
