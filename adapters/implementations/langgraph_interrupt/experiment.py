"""LangGraph's two approval failures, shown without the kit.

Run with this folder's interpreter: ``.venv/bin/python experiment.py``. Each part uses
only langgraph, its SQLite checkpointer and a marker line per effect in a temporary
directory; the graph is interrupt() in node ``approval``, the effect in node ``tool``.

1. The audit write of the tool's update fails in the stream's consumer: the thread is
   finished, and no later stream of it yields the update again.
2. The process dies inside ``tool`` after the effect: invoked again with None in a new
   process, the thread runs ``tool`` a second time.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

CONFIG = {"configurable": {"thread_id": "op-1"}}


class State(TypedDict, total=False):
    target: str
    approved: bool
    effect: str


def compiled(folder: str, die_after_effect: bool = False):
    def approval(state: State) -> State:
        return {"approved": bool(interrupt({"target": state["target"]}))}

    def tool(state: State) -> State:
        with open(os.path.join(folder, "effects.log"), "a") as log:
            log.write(state["target"] + "\n")
            log.flush()
            os.fsync(log.fileno())
        if die_after_effect:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"effect": "applied"}

    builder = StateGraph(State)
    builder.add_node("approval", approval)
    builder.add_node("tool", tool)
    builder.add_edge(START, "approval")
    builder.add_edge("approval", "tool")
    builder.add_edge("tool", END)
    connection = sqlite3.connect(os.path.join(folder, "checkpoints.sqlite"), check_same_thread=False)
    return builder.compile(checkpointer=SqliteSaver(connection))


def effects(folder: str) -> int:
    try:
        with open(os.path.join(folder, "effects.log")) as log:
            return len(log.readlines())
    except FileNotFoundError:
        return 0


def stream(graph, command) -> list:
    return list(graph.stream(command, CONFIG, stream_mode="updates", durability="sync"))


def audit_write_fails() -> None:
    with tempfile.TemporaryDirectory() as folder:
        graph = compiled(folder)
        stream(graph, {"target": "repo-1"})
        audited = []
        try:
            for update in graph.stream(Command(resume=True), CONFIG, stream_mode="updates", durability="sync"):
                if "tool" in update:
                    raise OSError("audit sink down")
                audited.append(update)
        except OSError as exc:
            print(f"1. the audit write of the tool's update fails: {exc}")
        snapshot = graph.get_state(CONFIG)
        print(f"   audited: {audited}; thread next: {snapshot.next}; effect: {snapshot.values.get('effect')}")
        print(f"   streamed again with None: {stream(graph, None)}; effects: {effects(folder)}")


def crash_after_effect() -> None:
    with tempfile.TemporaryDirectory() as folder:
        stream(compiled(folder), {"target": "repo-1"})
        child = subprocess.run([sys.executable, __file__, "--approve-and-die", folder], timeout=60)
        graph = compiled(folder)
        print("2. the process dies after the effect")
        print(
            f"   approving process exit: {child.returncode}; thread next: {graph.get_state(CONFIG).next}; effects: {effects(folder)}"
        )
        print(f"   invoked with None in a new process: {stream(graph, None)}; effects: {effects(folder)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--approve-and-die"]:
        stream(compiled(sys.argv[2], die_after_effect=True), Command(resume=True))
    else:
        audit_write_fails()
        crash_after_effect()
