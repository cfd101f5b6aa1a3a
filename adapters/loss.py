"""How a call's answer is lost on purpose (``Connection.lose_response``).

Two faults, placed where the defects of a retried side effect live:

- *withheld*: the request reaches the runtime whole, its answer reaches the kit and
  is never delivered; the caller's connection then closes. The effect is done and the
  response is lost: the lost-response case of A2, for real.
  With ``kill`` the runtime is SIGKILLed before the caller's connection closes.
- *cut*: the caller's connection closes while the call runs, at a point the scenario
  chose: a delay after the request reached the runtime (``after_s``), or the moment
  the call's effect shows in the authoritative listing (``when_listed``). A runtime
  that cancels its handler when its caller leaves is caught in the middle of it.

Both are plain data, so a scenario's seeded choice of them is its evidence and replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Loss:
    kind: Literal["withheld", "cut"]
    #: cut: seconds after the request reached the runtime.
    after_s: float | None = None
    #: cut: once the call's effect is in the listing (polled while the call runs).
    when_listed: bool = False
    #: withheld: the runtime is SIGKILLed (its whole group) the moment its answer is
    #: complete, before the caller's connection closes: a crash before the response.
    kill: bool = False

    def describe(self) -> dict[str, Any]:
        if self.kind == "withheld":
            return {"fault": "answer withheld" + (", the runtime SIGKILLed" if self.kill else "")}
        if self.when_listed:
            return {"fault": "cut mid-call", "at": "once the effect is listed"}
        return {"fault": "cut mid-call", "at": f"{self.after_s:.3f}s after the request reached the server"}


WITHHELD = Loss("withheld")
WITHHELD_THEN_KILLED = Loss("withheld", kill=True)
