"""junit.xml for CI: one testcase per scenario. A failure fails the case; error is an
error; a MUST scenario skipped for a missing test hook (it blocks the verdict as not
verified) is a failure too, so junit.xml never shows green for a run that exits 1;
other skips, not_applicable and baseline-expected failures are skipped with the
reason; a stale baseline entry (xpass) is a failure, as it is for the exit code."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from retryproof.conformance.events import RunFinished
from retryproof.conformance.writers.escape import xml_text


def render_junit(run: RunFinished) -> str:
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    suite = ET.Element("testsuite", name="retryproof", tests=str(len(run.results)), time=f"{run.duration_s:.3f}")
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("implementation", f"{run.info.implementation.get('name')} {run.info.implementation.get('version')}"),
        ("seed", run.info.seed),
        ("spec_version", run.info.spec_version),
        ("spec_fingerprint", run.info.spec_fingerprint),
        ("verdict", run.verdict.headline),
        ("tool_paths", ", ".join(f"{path} {state}" for path, state in run.verdict.tool_paths)),
    ):
        ET.SubElement(properties, "property", name=name, value=xml_text(value))
    blocking = dict(run.verdict.blocking)
    for result in run.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"retryproof.{result.entry.level}",
            name=result.entry.id,
            time=f"{result.duration_s:.3f}",
        )
        reason = xml_text(result.reason or "")
        if result.baseline == "xfail":
            ET.SubElement(
                case, "skipped", message=xml_text(f"expected failure (baseline): {result.status}: {result.reason}")
            )
            counts["skipped"] += 1
        elif result.baseline == "xpass":
            element = ET.SubElement(
                case, "failure", message="stale baseline entry: the scenario passes now; remove it from the baseline"
            )
            counts["failures"] += 1
            element.text = xml_text(result.reproduce)
        elif result.status == "failed":
            element = ET.SubElement(case, "failure", message=reason)
            element.text = xml_text(f"reproduce: {result.reproduce}")
            counts["failures"] += 1
        elif result.status == "error":
            element = ET.SubElement(case, "error", message=reason)
            element.text = xml_text(f"reproduce: {result.reproduce}")
            counts["errors"] += 1
        elif result.entry.id in blocking:
            element = ET.SubElement(case, "failure", message=xml_text(blocking[result.entry.id]))
            element.text = xml_text(f"reproduce: {result.reproduce}")
            counts["failures"] += 1
        elif result.status in ("skipped", "not_applicable"):
            ET.SubElement(case, "skipped", message=xml_text(f"{result.status}: {result.reason}"))
            counts["skipped"] += 1
        if result.evidence or result.calls:
            evidence = {"evidence": result.evidence, "calls": list(result.calls)}
            ET.SubElement(case, "system-out").text = xml_text(
                json.dumps(evidence, indent=1, ensure_ascii=False, default=str)
            )
        if result.stderr:
            ET.SubElement(case, "system-err").text = xml_text(result.stderr)
    for key, value in counts.items():
        suite.set(key, str(value))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
