"""badge.json: a shields.io endpoint document (https://shields.io/badges/endpoint-badge),
so a README can show the verdict of the last run as a badge served from CI artefacts."""

from __future__ import annotations

import json

from retryproof.conformance.events import RunFinished

#: shields.io named colours: green only for a conformant run; red when a MUST scenario
#: blocks; grey for a partial run that blocks nothing (conformance not established).
COLOURS = {"conformant": "brightgreen", "blocked": "red", "partial": "lightgrey"}


def tone(run: RunFinished) -> str:
    """conformant, blocked (a MUST scenario blocks) or partial: the badges' colour."""
    verdict = run.verdict
    return "conformant" if verdict.conformant else "blocked" if verdict.blocking else "partial"


def message(run: RunFinished) -> str:
    """The badges' message, in the headline's words (VERDICT-R10: a partial run that
    blocks nothing is PARTIAL, not NOT CONFORMANT); a certificate that lacks a tool
    path says which it covers (VERDICT-R17)."""
    verdict = run.verdict
    if not verdict.conformant:
        return "partial run" if tone(run) == "partial" else "not conformant"
    return f"conformant ({', '.join(verdict.certified)} only)" if verdict.scope else "conformant"


def render_badge(run: RunFinished) -> str:
    document = {
        "schemaVersion": 1,
        "label": "retryproof",
        "message": message(run),
        "color": COLOURS[tone(run)],
    }
    return json.dumps(document) + "\n"
