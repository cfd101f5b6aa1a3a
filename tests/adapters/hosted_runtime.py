"""A minimal runtime for the Python host test: counts calls in a file of its state dir."""

import json
import os

from retryproof.adapters.python_host import HostedRuntime


class Counter(HostedRuntime):
    implementation = {"name": "counter", "version": "1", "language": "python"}
    capabilities = ("write_task",)
    failpoints = ("write_task.after_commit",)

    def list_tasks(self):
        path = os.path.join(self.state_dir, "tasks.json")
        return {"tasks": json.load(open(path)) if os.path.exists(path) else []}

    def write_task(self, task, client_submission_id=None, invocation=None):
        tasks = self.list_tasks()["tasks"] + [{"task_id": f"T{len(self.list_tasks()['tasks']) + 1}"}]
        with open(os.path.join(self.state_dir, "tasks.json"), "w") as handle:
            json.dump(tasks, handle)
        self.failpoint("write_task.after_commit")
        return {"task_id": tasks[-1]["task_id"]}


def make(state_dir, failpoints):
    return Counter(state_dir, failpoints)


class RemovesOnly(Counter):
    """Performs one tamper action and declares exactly that one."""

    capabilities = ("write_task", "tamper")
    tamper_actions = ("remove_task",)

    def tamper(self, action, task_id):
        return {}


def make_removes_only(state_dir, failpoints):
    return RemovesOnly(state_dir, failpoints)
