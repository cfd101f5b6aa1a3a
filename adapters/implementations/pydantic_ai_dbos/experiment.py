"""The Pydantic AI + DBOS behaviours behind the failing cells, shown without retryproof.

An agent as README.md describes it (``DBOSDurability``, a ``FunctionModel`` that calls
the tool, the tool's I/O a ``@DBOS.step``), run in a ``@DBOS.workflow`` whose id is
the caller's key. The tool appends a line to a file: the effect.

    part 1: the key again with another request -> the first run's output, 1 effect
    part 2: the process dies inside the tool step after its effect; a restart's
            DBOS.launch() recovers the workflow -> the step runs again, 2 effects

Run: .venv/bin/python experiment.py   (this folder's environment, see ./setup)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

FOLDER = os.environ.get("EXPERIMENT_DIR", "")


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(content=part.model_response_str())])
    return ModelResponse(parts=[ToolCallPart("write_task", {"subject": messages[-1].parts[-1].content})])


agent = Agent(FunctionModel(model), name="experiment", capabilities=[DBOSDurability()])


@agent.tool_plain
def write_task(subject: str) -> str:
    """Create a task."""
    return effect(subject)


@DBOS.step()
def effect(subject: str) -> str:
    with open(os.path.join(FOLDER, "effects.txt"), "a") as handle:
        handle.write(subject + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    if os.environ.get("DIE_IN_TOOL"):
        os._exit(9)  # as SIGKILL: the step's output is never recorded
    return f"task for {subject}"


@DBOS.workflow()
async def run(prompt: str) -> str:
    return (await agent.run(prompt)).output


def effects() -> list[str]:
    with open(os.path.join(FOLDER, "effects.txt")) as handle:
        return handle.read().split()


def start() -> None:
    DBOS(
        config={"name": "experiment", "system_database_url": f"sqlite:///{FOLDER}/dbos.sqlite", "log_level": "WARNING"}
    )
    DBOS.launch()


def part(name: str) -> None:
    start()
    if name == "1":
        with SetWorkflowID("order-1"):
            first = DBOS.start_workflow(run, "first").get_result()
        with SetWorkflowID("order-1"):
            second = DBOS.start_workflow(run, "second").get_result()
        print(f"part 1: key order-1 asked 'first' -> {first!r}, then 'second' -> {second!r}; effects {effects()}")
    elif name == "2-die":
        with SetWorkflowID("order-2"):
            DBOS.start_workflow(run, "second-try").get_result()
    elif name == "2-recover":
        status = DBOS.get_workflow_status("order-2")
        handle = DBOS.retrieve_workflow("order-2")
        print(f"part 2: after the kill, recovered at launch ({status.status if status else None}) -> ", end="")
        print(f"{handle.get_result()!r}; effects {effects()}")
    DBOS.destroy()


def main() -> None:
    if len(sys.argv) > 1:
        part(sys.argv[1])
        return
    for steps in (["1"], ["2-die", "2-recover"]):
        with tempfile.TemporaryDirectory() as folder:
            for step in steps:
                environment = dict(os.environ, EXPERIMENT_DIR=folder, DIE_IN_TOOL="1" if step == "2-die" else "")
                subprocess.run([sys.executable, __file__, step], env=environment, timeout=120)


if __name__ == "__main__":
    main()
