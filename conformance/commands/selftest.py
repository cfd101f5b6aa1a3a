"""``retryproof selftest``: the kill matrix, the evidence that the kit has teeth.

Runs the catalogue against the bundled reference runtime and every bundled faulty
runtime (``python -m retryproof.reference_impl --fault NAME``), each through its harness process
like any third-party runtime, on the scheduler of ``retryproof run --jobs``. The verdict:

* the reference passes every scenario (a scenario skipped for a missing tool, such
  as strace, is shown as skipped, never as passed);
* every faulty runtime *fails* each scenario its variant declares as its killer
  (``killed_by``); failing some other scenario does not count, because a kit that
  kills a defect by accident would stop killing it after an unrelated fix.

So a faulty runtime runs only its killers: the other cells of its row would be judged
by nothing, and they cost most of the time (a full FUZZ-MODEL budget per variant among
them). Its row shows ``-`` there.

Exit 0 when both hold, 1 otherwise, 2 when the kit cannot run. The matrix is printed
(tabulate) and written as ``kill-matrix.md``, ``kill-matrix.json`` and ``kill-matrix.html``
(a grid whose failed cells link to the timelines of ``<runtime>/report.html``, written
for each runtime with a failed or error cell) in ``--out``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from retryproof.conformance.catalogue import Entry, catalogue
from retryproof.conformance.errors import KitError
from retryproof.conformance.events import RunFinished, ScenarioResult
from retryproof.conformance.file_names import file_stem
from retryproof.conformance.machine_paths import typed_interpreter, typed_line
from retryproof.conformance.options import REFERENCE_COMMAND, Options, default_jobs
from retryproof.conformance.schedule import Turn, in_order
from retryproof.conformance.writers.content import STATUS_CELLS
from retryproof.conformance.writers.files import prepare_directory, write_atomically
from retryproof.conformance.writers.grid import STATUS_TONES, GridCell, render_grid
from retryproof.conformance.writers.html import evidence_anchor, render_html

REFERENCE = "reference"


@dataclass(frozen=True)
class Runtime:
    name: str
    defect: str
    killed_by: tuple[str, ...]

    @property
    def command(self) -> tuple[str, ...]:
        return REFERENCE_COMMAND if self.name == REFERENCE else (*REFERENCE_COMMAND, "--fault", self.name)


def _python() -> str:
    """The kit's interpreter as typed here: a bare ``python`` has the kit only with its
    environment active."""
    return typed_interpreter(os.getcwd(), os.path.expanduser("~"))


def bundled_runtimes() -> list[Runtime]:
    """The reference and the variants ``python -m retryproof.reference_impl.faulty`` lists."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "retryproof.reference_impl.faulty"], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        listing = typed_line((_python(), "-m", "retryproof.reference_impl.faulty"))
        raise KitError("listing the faulty runtimes timed out", f"run {listing} to see why") from None
    if done.returncode != 0:
        raise KitError(
            "cannot list the bundled faulty runtimes", done.stderr.strip()[-500:] or "is reference_impl installed?"
        )
    variants = json.loads(done.stdout)
    known = {item.id for item in catalogue()}
    runtimes = [Runtime(REFERENCE, "none: the reference runtime", ())]
    for variant in variants:
        unknown = sorted(set(variant["killed_by"]) - known)
        if not variant["killed_by"] or unknown:
            raise KitError(
                f"faulty runtime {variant['name']} declares no killer or unknown ones: {unknown}",
                "killed_by must name catalogue ids",
            )
        runtimes.append(Runtime(variant["name"], variant["defect"], tuple(variant["killed_by"])))
    return runtimes


def runtime_options(runtime: Runtime, seed: int, only: tuple[str, ...] = ()) -> Options:
    """A runtime's run; a faulty one's reproduce lines name the kit's interpreter (``_python``)."""
    if runtime.name == REFERENCE:
        return Options(command=runtime.command, target="", seed=seed, only=only)
    harness = typed_line((_python(), "-m", "retryproof.reference_impl", "--fault", runtime.name), one_word=True)
    return Options(command=runtime.command, target=f"--harness {harness}", seed=seed, only=only)


def judge(runtime: Runtime, outcome: dict[str, Any]) -> list[str]:
    """Why this runtime's row breaks the selftest (empty when it does not)."""
    if outcome["error"]:
        return [f"{runtime.name}: the kit could not run it: {outcome['error']}"]
    results = outcome["results"]
    if runtime.name == REFERENCE:
        return [
            f"reference: {scenario_id} {result['status']}: {result['reason']}"
            for scenario_id, result in results.items()
            if result["status"] not in ("passed", "skipped")
        ]
    # A killer with no result (its run ended before it) killed nothing: it counts as survived.
    return [
        f"{runtime.name} survived {scenario_id} ({results.get(scenario_id, {}).get('status', 'not run')}), the scenario aimed at its defect"
        for scenario_id in runtime.killed_by
        if results.get(scenario_id, {}).get("status") != "failed"
    ]


def matrix_rows(
    runtimes: list[Runtime], outcomes: dict[str, dict[str, Any]], scenario_ids: list[str]
) -> list[list[str]]:
    rows = []
    for runtime in runtimes:
        results = outcomes[runtime.name]["results"]
        cells = []
        for scenario_id in scenario_ids:
            status = results.get(scenario_id, {}).get("status")
            cell = STATUS_CELLS.get(status, "-")
            if scenario_id in runtime.killed_by:
                cell = f"[{cell}]"  # a declared killer: must read [FAIL]
            cells.append(cell)
        rows.append([runtime.name, *cells])
    return rows


def write_files(
    out: str,
    runtimes: list[Runtime],
    outcomes: dict[str, dict[str, Any]],
    scenario_ids: list[str],
    problems: list[str],
    seed: int,
    seconds: float,
    jobs: int,
    runs: Mapping[str, RunFinished] | None = None,
) -> list[str]:
    """The kill matrix as markdown, JSON and HTML, and the report.html of each runtime
    in ``runs`` that failed a scenario or ended one in error; the paths written."""
    headers = ["runtime", *scenario_ids]
    rows = matrix_rows(runtimes, outcomes, scenario_ids)
    verdict = (
        "the kit has teeth: every faulty runtime killed by its declared scenarios, the reference clean"
        if not problems
        else f"{len(problems)} problem(s)"
    )
    defects = [
        [runtime.name, runtime.defect, ", ".join(runtime.killed_by) or "-", outcomes[runtime.name]["seconds"]]
        for runtime in runtimes
    ]
    markdown = "\n".join(
        [
            "# retryproof selftest: kill matrix",
            "",
            f"Verdict: **{verdict}**. Seed {seed}; wall time {seconds:.1f} s on {jobs} jobs.",
            "",
            "Cells: pass / FAIL / error / skip / n/a, or - where the scenario was not run: a faulty runtime runs "
            "only its declared killers, the cells in brackets, which must read [FAIL].",
            "",
            tabulate(rows, headers=headers, tablefmt="github"),
            "",
            "## The runtimes",
            "",
            tabulate(defects, headers=["runtime", "defect", "must be killed by", "seconds"], tablefmt="github"),
            "",
            *(["## Problems", "", *[f"- {problem}" for problem in problems], ""] if problems else []),
        ]
    )
    md_path, json_path = os.path.join(out, "kill-matrix.md"), os.path.join(out, "kill-matrix.json")
    write_atomically(md_path, markdown)
    document = {
        "seed": seed,
        "seconds": round(seconds, 1),
        "jobs": jobs,
        "ok": not problems,
        "problems": problems,
        "scenarios": scenario_ids,
        "runtimes": [
            {
                "name": runtime.name,
                "defect": runtime.defect,
                "killed_by": list(runtime.killed_by),
                **outcomes[runtime.name],
            }
            for runtime in runtimes
        ],
    }
    write_atomically(json_path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    pages, written = _report_pages(out, runs or {})
    html_path = os.path.join(out, "kill-matrix.html")
    intro = [
        f"Verdict: {verdict}. Seed {seed}; wall time {seconds:.1f} s on {jobs} jobs.",
        "A faulty runtime runs only its declared killers, the outlined cells, which must read FAIL; "
        "a FAIL or error cell links to the failing call on that runtime's timeline.",
    ]
    grid = [(runtime.name, _grid_cells(runtime, outcomes[runtime.name], scenario_ids, pages)) for runtime in runtimes]
    notes = [f"{runtime.name}: {runtime.defect}" for runtime in runtimes if runtime.defect]
    write_atomically(
        html_path, render_grid("retryproof selftest: kill matrix", intro, scenario_ids, grid, notes, upright=True)
    )
    return [md_path, json_path, html_path, *written]


def _report_pages(out: str, runs: Mapping[str, RunFinished]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Write ``<runtime>/report.html`` for each run with a failed or error scenario:
    (runtime -> scenario id -> the link to its evidence relative to ``out``, the paths)."""
    pages: dict[str, dict[str, str]] = {}
    written = []
    for name, run in runs.items():
        broken = [result for result in run.results if result.status in ("failed", "error")]
        if not broken:
            continue
        page = f"{file_stem(name, 'runtime')}/report.html"
        written.append(os.path.join(out, page))
        write_atomically(written[-1], render_html(run))
        pages[name] = {result.entry.id: f"{page}#{evidence_anchor(result)}" for result in broken}
    return pages, written


def _grid_cells(
    runtime: Runtime, outcome: Mapping[str, Any], scenario_ids: list[str], pages: Mapping[str, Mapping[str, str]]
) -> list[GridCell]:
    cells = []
    for scenario_id in scenario_ids:
        declared = scenario_id in runtime.killed_by
        result = outcome["results"].get(scenario_id)
        if result is None:
            cells.append(GridCell("-", "none", title=outcome.get("error"), marked=declared))
            continue
        status = result["status"]
        link = pages.get(runtime.name, {}).get(scenario_id)
        cells.append(GridCell(STATUS_CELLS[status], STATUS_TONES[status], link, result["reason"], declared))
    return cells


def run_all(
    runtimes: list[Runtime], seed: int, jobs: int | None = None, runs: dict[str, RunFinished] | None = None
) -> dict[str, dict[str, Any]]:
    """Every runtime's outcome on the scenarios it is judged on: its killers, or for
    the reference (which declares none) the whole catalogue. All (runtime, scenario)
    pairs go through the scheduler of ``retryproof run --jobs`` (``jobs`` threads,
    default ``options.default_jobs()``): the scenarios of one runtime run beside
    those of the next, and the *alone* scenarios keep the machine to themselves here
    too. Each runtime's ``shares_server`` scenarios take turns on one harness of its
    own (``sharing.py``; never two sharing scenarios together), the last one ending it.
    A runtime's handshake (``handshake``) is made by the first of its scenarios to
    start, on that scenario's thread, so the handshakes of the next runtimes overlap
    the scenarios of the first (made all before the scenarios, eighteen starts kept
    the other job waiting). ``runs``, when given, receives each runtime's finished
    run (for its report.html)."""
    from retryproof.conformance.runner import Marks, Run, handshake, select
    from retryproof.conformance.scenarios import registry

    jobs = jobs or default_jobs()
    # Each runtime's selection, once: its pairs below and its run's ``selection``.
    selections = {runtime.name: select(runtime.killed_by, ()) for runtime in runtimes}
    sessions: dict[str, Run] = {}
    errors: dict[str, str] = {}
    shaking = {runtime.name: threading.Lock() for runtime in runtimes}

    def session_of(runtime: Runtime) -> Run | None:
        """The runtime's run, after its handshake (made here once); None when it failed."""
        with shaking[runtime.name]:
            if runtime.name not in sessions and runtime.name not in errors:
                options = runtime_options(runtime, seed, runtime.killed_by)
                try:
                    hello, kept = handshake(options)
                except KitError as exc:
                    errors[runtime.name] = exc.message
                else:
                    entries = selections[runtime.name]
                    # The harness its handshake started is its first sharing scenario's (ended at once when none is).
                    sessions[runtime.name] = Run(options, hello, [], len(entries), selection=entries, handshake=kept)
            return sessions.get(runtime.name)

    def compute(pair: tuple[Runtime, Entry], turn: Turn) -> ScenarioResult | None:
        session = session_of(pair[0])
        return None if session is None else session.compute(pair[1], turn)

    pairs = [(runtime, entry) for runtime in runtimes for entry in selections[runtime.name]]
    marks = Marks(registry(), through_binding=False)  # the marks of every runtime's run (``Run.marks``)
    try:
        for (runtime, _), result in in_order(
            pairs,
            compute,
            jobs,
            alone=lambda pair: marks.alone(pair[1]),
            long=lambda pair: marks.long(pair[1]),
            shared=lambda pair: marks.shared(pair[1]),
            turn=lambda pair: marks.turn(pair[1]),
        ):
            if result is not None:
                sessions[runtime.name].record(result)
    finally:
        for session in sessions.values():
            session.close()  # a shared harness its last turn did not end (an interrupt)
    outcomes = {}
    for runtime in runtimes:
        if runtime.name not in sessions:
            outcomes[runtime.name] = {"error": errors[runtime.name], "results": {}, "seconds": 0.0}
            continue
        session = sessions[runtime.name]
        if runs is not None:
            runs[runtime.name] = session.finish()
        results = {
            result.entry.id: {"status": result.status, "reason": result.reason, "reproduce": result.reproduce}
            for result in session.results
        }
        # Scenario time summed: with many jobs, the runtimes' wall times overlap.
        busy = sum(result.duration_s for result in session.results)
        outcomes[runtime.name] = {"error": None, "results": results, "seconds": round(busy, 2)}
    return outcomes


def main(args) -> int:
    claim = prepare_directory(args.out)  # before minutes of runs, not after; held until the matrix is written
    runtimes = bundled_runtimes()
    began = time.perf_counter()
    runs: dict[str, RunFinished] = {}
    outcomes = run_all(runtimes, args.seed, jobs=args.jobs, runs=runs)
    seconds = time.perf_counter() - began
    scenario_ids = [item.id for item in catalogue()]
    problems = [problem for runtime in runtimes for problem in judge(runtime, outcomes[runtime.name])]
    print(
        tabulate(
            matrix_rows(runtimes, outcomes, scenario_ids),
            headers=["runtime", *[s[:14] for s in scenario_ids]],
            tablefmt="simple",
        )
    )
    for path in write_files(args.out, runtimes, outcomes, scenario_ids, problems, args.seed, seconds, args.jobs, runs):
        print(f"wrote {path}")
    claim.release()
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(
        f"selftest: {len(runtimes)} runtimes in {seconds:.1f}s: "
        + ("the kit has teeth" if not problems else f"{len(problems)} problem(s)")
    )
    return 0 if not problems else 1
