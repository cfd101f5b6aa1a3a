"""The LangGraph behaviours behind the failing cells, shown without retryproof.

A tool-calling agent as README.md describes it (fake chat model, prebuilt ToolNode,
SqliteSaver, durability "sync"), whose tool appends a line to a file: the effect.
The caller's key is the thread id.

    part 1: the same request twice on one thread (a retry after a lost response):
            a new turn, the tool runs again -> 2 effects
    part 2: the process dies inside the tool after its effect (before LangGraph
            records the step); the caller resumes with invoke(None, config) as the
            docs say -> the tool runs again from its start -> 2 effects
    part 3: eight threads invoke one thread id at once -> 8 effects, no waiting

Run: .venv/bin/python experiment.py   (this folder's environment, see ./setup)
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def agent_graph(folder: str, die_in_tool: bool = False) -> Any:
    effects = os.path.join(folder, "effects.txt")

    @tool
    def write_task(task: dict[str, Any]) -> str:
        """Create a task."""
        with open(effects, "a") as handle:
            handle.write(json.dumps(task) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if die_in_tool:
            os._exit(9)  # as SIGKILL: no exception handler, no checkpoint of this step
        return "done"

    def agent(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            answer = AIMessage(content=last.content)
        else:
            call = {"name": "write_task", "args": {"task": json.loads(last.content)}, "id": "call-1"}
            answer = AIMessage(content="", tool_calls=[call])
        return {"messages": [FakeMessagesListChatModel(responses=[answer]).invoke(state["messages"])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([write_task]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    connection = sqlite3.connect(os.path.join(folder, "checkpoints.sqlite"), check_same_thread=False)
    return builder.compile(checkpointer=SqliteSaver(connection))


def effects(folder: str) -> int:
    try:
        with open(os.path.join(folder, "effects.txt")) as handle:
            return len(handle.readlines())
    except FileNotFoundError:
        return 0


def request() -> dict[str, Any]:
    """The user's request, a new message per call as an application sends it."""
    return {"messages": [HumanMessage(content=json.dumps({"subject": "s"}))]}


CONFIG = {"configurable": {"thread_id": "order-1"}}


def part1(folder: str) -> None:
    graph = agent_graph(folder)
    graph.invoke(request(), CONFIG, durability="sync")
    graph.invoke(request(), CONFIG, durability="sync")  # the retry: same thread, same request
    print(f"part 1: same request twice on thread order-1 -> {effects(folder)} effects (a safe retry: 1)")


def part2(folder: str) -> None:
    # The first attempt runs in a child process that dies inside the tool.
    child = subprocess.run([sys.executable, __file__, "--die-in-tool", folder], timeout=120)
    graph = agent_graph(folder)
    pending = graph.get_state(CONFIG).next
    graph.invoke(None, CONFIG, durability="sync")  # resume, as the durable-execution docs say
    print(
        f"part 2: died in the tool (exit {child.returncode}), state.next={pending}, resumed with "
        f"invoke(None) -> {effects(folder)} effects (a safe resume: 1)"
    )


def part3(folder: str) -> None:
    graph = agent_graph(folder)
    barrier = threading.Barrier(8)

    def call() -> None:
        barrier.wait()
        graph.invoke(request(), CONFIG, durability="sync")

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    print(f"part 3: 8 concurrent calls on thread order-1 -> {effects(folder)} effects (a safe duplicate: 1)")


def main() -> None:
    if sys.argv[1:2] == ["--die-in-tool"]:
        agent_graph(sys.argv[2], die_in_tool=True).invoke(request(), CONFIG, durability="sync")
        return
    for part in (part1, part2, part3):
        with tempfile.TemporaryDirectory() as folder:
            part(folder)


if __name__ == "__main__":
    main()
