"""``python -m retryproof.reference_impl.faulty``: the bundled variants as JSON, one object each
(name, the defect in one sentence, the scenarios that must kill it).

The kit's selftest reads this through a process, as it reaches every runtime:
the kit never imports ``reference_impl``.
"""

from __future__ import annotations

import json
import sys

from retryproof.reference_impl.faulty import VARIANTS, describe, killed_by


def main() -> int:
    catalogue = [{"name": name, "defect": describe(name), "killed_by": list(killed_by(name))} for name in VARIANTS]
    json.dump(catalogue, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
