"""retryproof-harness/1 for a LangGraph agent with SQLite checkpoints.

A task creation is one turn of a tool-calling agent: the ``agent`` node asks a
deterministic fake chat model (langchain-core's ``FakeMessagesListChatModel``), which
answers the user's request with a ``write_task`` tool call; LangGraph's prebuilt
``ToolNode`` runs the tool, which writes the task object; the agent then answers with
the tool's result. The client_submission_id is the thread id, checkpoints live in
``SqliteSaver`` on ``<state dir>/checkpoints.sqlite``, and a call resumes an
unfinished run of its thread with ``invoke(None, config)`` the way LangGraph's durable
execution docs say. LangGraph alone decides what runs; this file only translates.
See README.md beside it for every mapping decision.

Run with the interpreter of this folder's virtual environment (``./setup``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from retryproof.adapters.implementations.task_store import StoreListing, TaskStore, creation_result
from retryproof.adapters.implementations.versions import stack_version
from retryproof.adapters.python_host import HostedRuntime, serve_hosted
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, check_submission_id, request_digest
from retryproof.spec.protocol import ProtocolError

FAILPOINTS = (
    "write_task.after_task_write",
    "write_task.after_task_created",
    "write_task.after_commit",
)

#: LangGraph's most durable mode: every step's checkpoint is written before the next step starts.
DURABILITY = "sync"


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def fake_model(messages: list[AnyMessage]) -> FakeMessagesListChatModel:
    """The chat model of one agent step: langchain-core's fake, given the one answer a
    tool-calling model gives here. To the user's request (the task as JSON) it answers
    with a ``write_task`` call; to the tool's result it answers with that result. Its
    tool call id is a function of the conversation, so a replayed step says the same."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        answer = AIMessage(content=last.content)
    else:
        call = {"name": "write_task", "args": {"task": json.loads(last.content)}, "id": f"call-{len(messages)}"}
        answer = AIMessage(content="", tool_calls=[call])
    return FakeMessagesListChatModel(responses=[answer])


class LangGraphRuntime(StoreListing, HostedRuntime):
    implementation = {
        "name": "langgraph",
        "version": stack_version("langgraph", "langgraph-checkpoint-sqlite", "langchain-core"),
        "language": "python",
    }
    capabilities = ("write_task", "legacy", "tamper", "multiprocess")
    tamper_actions = ("remove_task", "set_receipt_schema")
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        super().__init__(state_dir, failpoints)
        self.store = TaskStore(state_dir)
        connection = sqlite3.connect(os.path.join(state_dir, "checkpoints.sqlite"), check_same_thread=False)
        self.graph = self._build(SqliteSaver(connection))

    def _build(self, checkpointer: SqliteSaver) -> Any:
        store, failpoint = self.store, self.failpoint

        @tool
        def write_task(task: dict[str, Any], config: RunnableConfig) -> str:
            """Create a task object."""
            configurable = config["configurable"]
            task_id = TaskStore.new_id()
            digest = request_digest(task)
            key = configurable["client_submission_id"]
            store.write(
                task_id, {"task_id": task_id, "task": task, "client_submission_id": key, "request_digest": digest}
            )
            failpoint("write_task.after_task_write")
            output = {
                "task_id": task_id,
                "task_path": store.path(task_id),
                "request_digest": digest,
                "digest_schema_version": DIGEST_SCHEMA_VERSION,
                # Which call ran the tool: tells "this call wrote it" from a checkpointed result.
                "caller": configurable["caller"],
            }
            return json.dumps(output)

        def agent(state: AgentState) -> dict[str, Any]:
            if isinstance(state["messages"][-1], ToolMessage):
                # The tools step is checkpointed (durability "sync") before this step runs.
                failpoint("write_task.after_task_created")
            # The fake has no bind_tools (NotImplementedError): it knows its one tool already.
            return {"messages": [fake_model(state["messages"]).invoke(state["messages"])]}

        builder = StateGraph(AgentState)
        builder.add_node("agent", agent)
        builder.add_node("tools", ToolNode([write_task]))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        return builder.compile(checkpointer=checkpointer)

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Any = None
    ) -> Mapping[str, Any]:
        request_digest(task)  # the application validates its request before the agent sees it
        if client_submission_id is not None:
            check_submission_id(client_submission_id)
        # Without a key a call is a new conversation: LangGraph needs a thread id to checkpoint.
        thread_id = client_submission_id or "legacy-" + uuid.uuid4().hex
        caller = uuid.uuid4().hex
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "caller": caller, "client_submission_id": client_submission_id}
        }
        if self.graph.get_state(config).next:
            # An unfinished run of this thread (a crash, an error): resume it, as documented.
            state = self.graph.invoke(None, config, durability=DURABILITY)
        else:
            request = HumanMessage(content=json.dumps(task))
            state = self.graph.invoke({"messages": [request]}, config, durability=DURABILITY)
        self.failpoint("write_task.after_commit")
        return creation_result(_tool_output(state["messages"]), caller, client_submission_id)

    def tamper(self, action: str, **args: Any) -> Mapping[str, Any]:
        if action == "remove_task":
            self.store.remove(args["task_id"])
        elif action == "set_receipt_schema":
            self._rewrite_tool_result(args["client_submission_id"], args["digest_schema_version"])
        else:
            raise ProtocolError("invalid_request", f"unsupported tamper action {action!r}")
        return {}

    def _rewrite_tool_result(self, thread_id: str, schema_version: str) -> None:
        """As if an older application version had run the tool: its checkpointed result
        names another digest schema (``update_state`` replaces a message by its id)."""
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        messages = self.graph.get_state(config).values.get("messages", [])
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            raise ProtocolError("not_found", "no tool result in this thread")
        output = dict(json.loads(results[-1].content), digest_schema_version=schema_version)
        replaced = results[-1].model_copy(update={"content": json.dumps(output)})
        self.graph.update_state(config, {"messages": [replaced]})


def _tool_output(messages: list[AnyMessage]) -> dict[str, Any]:
    """The latest ``write_task`` result of the thread, as the tool returned it."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.name == "write_task":
            return json.loads(message.content)
    raise ProtocolError("internal_error", "the agent's turn ended without a write_task result")


def main() -> int:
    return serve_hosted(LangGraphRuntime, "langgraph harness")


if __name__ == "__main__":
    sys.exit(main())
