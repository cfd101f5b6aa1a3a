"""badge.json: a shields.io endpoint document (https://shields.io/badges/endpoint-badge),
so a README can show the verdict of the last run as a badge served from CI artefacts."""

from __future__ import annotations

import json

from retryproof.conformance.events import RunFinished

#: shields.io named colours: green only for a conformant run; red when a MUST scenario
#: blocks; grey for a partial run that blocks nothing (conformance not established).
COLOURS = {"conformant": "brightgreen", "blocked": "red", "partial": "lightgrey"}


def render_badge(run: RunFinished) -> str:
    verdict = run.verdict
    tone = "conformant" if verdict.conformant else "blocked" if verdict.blocking else "partial"
    document = {
        "schemaVersion": 1,
        "label": "retryproof",
        # A certificate that lacks a tool path says which it covers (VERDICT-R17).
        "message": (f"conformant ({', '.join(verdict.certified)} only)" if verdict.scope else "conformant")
        if verdict.conformant
        else "not conformant",
        "color": COLOURS[tone],
    }
    return json.dumps(document) + "\n"
