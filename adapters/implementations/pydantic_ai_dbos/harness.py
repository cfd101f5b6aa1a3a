"""retryproof-harness/1 for a Pydantic AI agent made durable with DBOS, on SQLite.

A task creation is one agent run inside a DBOS workflow whose workflow id is the
client_submission_id, as Pydantic AI's DBOS docs say: the agent has the
``DBOSDurability`` capability, so its model requests and tool calls are DBOS steps,
and ``agent.run()`` is called inside the application's own ``@DBOS.workflow``. The
model is Pydantic AI's ``FunctionModel`` (no network, no weights): to the request it
answers with a ``write_task`` tool call, to the tool's return with that return. The
tool writes the task object. DBOS and Pydantic AI alone decide what runs; this file
only translates. See README.md beside it for every mapping decision.

Run with the interpreter of this folder's virtual environment (``./setup``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID
from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from retryproof.adapters.implementations.dbos_startup import await_startup_recovery
from retryproof.adapters.implementations.task_store import StoreListing, TaskStore, creation_result
from retryproof.adapters.implementations.versions import stack_version
from retryproof.adapters.python_host import HostedRuntime, serve_hosted
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, check_submission_id, request_digest

FAILPOINTS = (
    "write_task.after_task_write",
    "write_task.after_task_created",
    "write_task.after_commit",
)

# DBOS registers workflows and steps when they are defined, before launch, so the agent
# and the workflow are module-level and reach the one runtime of this process here.
RUNTIME: PydanticAiRuntime


def model_function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: the tool call to the user's request, the tool's return as the answer."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            # The tool step is recorded by DBOS before this model step runs.
            RUNTIME.failpoint("write_task.after_task_created")
            return ModelResponse(parts=[TextPart(content=part.model_response_str())])
    request = json.loads(messages[-1].parts[-1].content)
    return ModelResponse(parts=[ToolCallPart("write_task", {"task": request["task"]}, tool_call_id="call-1")])


agent = Agent(FunctionModel(model_function), name="tasks", deps_type=dict, capabilities=[DBOSDurability()])


@agent.tool
def write_task(ctx: RunContext[dict[str, Any]], task: dict[str, Any]) -> str:
    """Create a task object."""
    return store_task(task, ctx.deps["client_submission_id"], ctx.deps["caller"])


@DBOS.step()
def store_task(task: dict[str, Any], key: str | None, caller: str) -> str:
    """The tool's I/O as a DBOS step, as Pydantic AI's DBOS docs ask of a side-effecting
    tool (the integration makes model requests steps, never function tools)."""
    task_id = TaskStore.new_id()
    digest = request_digest(task)
    RUNTIME.store.write(
        task_id, {"task_id": task_id, "task": task, "client_submission_id": key, "request_digest": digest}
    )
    RUNTIME.failpoint("write_task.after_task_write")
    return json.dumps(
        {
            "task_id": task_id,
            "task_path": RUNTIME.store.path(task_id),
            "request_digest": digest,
            "digest_schema_version": DIGEST_SCHEMA_VERSION,
            # Which call ran the tool: tells "this call wrote it" from a recorded result.
            "caller": caller,
        }
    )


@DBOS.workflow()
async def create_task(task: dict[str, Any], client_submission_id: str | None, caller: str) -> dict[str, Any]:
    deps = {"client_submission_id": client_submission_id, "caller": caller}
    result = await agent.run(json.dumps({"task": task}), deps=deps)
    return json.loads(result.output)


class PydanticAiRuntime(StoreListing, HostedRuntime):
    implementation = {
        "name": "pydantic-ai+dbos",
        "version": stack_version("pydantic-ai-slim", "dbos"),
        "language": "python",
    }
    capabilities = ("write_task", "legacy", "tamper", "multiprocess")
    tamper_actions = ("remove_task",)
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        global RUNTIME
        super().__init__(state_dir, failpoints)
        RUNTIME = self  # the module-level tool, step and model reach the runtime here
        self.store = TaskStore(state_dir)
        config: DBOSConfig = {
            "name": "retryproof-pydantic-ai",
            "system_database_url": f"sqlite:///{os.path.join(state_dir, 'dbos.sqlite')}",
            "log_level": "WARNING",
        }
        DBOS(config=config)

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Any = None
    ) -> Mapping[str, Any]:
        request_digest(task)  # the application validates its request before the agent sees it
        caller = uuid.uuid4().hex
        if client_submission_id is None:
            handle = DBOS.start_workflow(create_task, task, None, caller)
        else:
            check_submission_id(client_submission_id)
            with SetWorkflowID(client_submission_id):
                handle = DBOS.start_workflow(create_task, task, client_submission_id, caller)
        output = handle.get_result()
        self.failpoint("write_task.after_commit")
        return creation_result(output, caller, client_submission_id)

    @contextlib.contextmanager
    def _serving(self) -> Iterator[None]:
        DBOS.launch()  # recovers this executor's PENDING workflows, as a restarted app would
        await_startup_recovery()
        try:
            yield
        finally:
            DBOS.destroy()


def main() -> int:
    return serve_hosted(PydanticAiRuntime, "pydantic-ai harness")


if __name__ == "__main__":
    sys.exit(main())
