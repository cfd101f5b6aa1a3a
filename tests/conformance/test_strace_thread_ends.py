"""How a trace says a thread ended in a call: by another thread's exit_group, by a kill,
or with strace unable to read the result (``= ? <unavailable>``). CRASH-POINTS tells a
kill it landed from a call an exit ended by these lines."""

from __future__ import annotations

import subprocess
import sys

from retryproof.conformance.strace import NthEntry, entered, parse_trace, tracing_options

#: A thread blocked in a write to a pipe nobody reads while the main thread exits the
#: process (exit_group): the write never returns, and no kill ends it.
EXIT_IN_A_WRITE = """
import os, threading, time
read_end, write_end = os.pipe()
threading.Thread(target=os.write, args=(write_end, b"x" * (1 << 20)), daemon=True).start()
time.sleep(0.3)
os._exit(0)
"""


def test_a_real_trace_says_a_call_ended_by_another_threads_exit_group_is_no_kill(tmp_path, strace):
    """strace's own words, with the options the scenarios trace with: the blocked write
    is ended by the exit, not running and not killed. With ``-qq`` strace leaves out the
    ``+++ exited with 0 +++`` line and the write would read as a kill's."""
    trace = tmp_path / "trace"
    command = [strace, *tracing_options(strace), "-ttt", "-e", "trace=write", "-o", str(trace), "--"]
    done = subprocess.run([*command, sys.executable, "-S", "-c", EXIT_IN_A_WRITE], timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr
    text = trace.read_text()
    entry = NthEntry("write", 1).read(text.encode())
    assert entry is not None, text
    assert (entry.finished, entry.ended, entry.exited, entry.running) == (False, True, True, False), text


UNAVAILABLE = """\
31 1.10 write(4<pipe:[15]>, "xxxx"..., 65536 <unfinished ...>
30 1.20 write(2</dev/null>, "bye", 3) = 3
31 1.41 <... write resumed>) = ? <unavailable>
31 1.42 +++ exited with 0 +++
"""


def test_a_result_strace_could_not_read_is_a_thread_that_ended_in_the_call():
    """``= ? <unavailable>``: ptrace failed as strace read the result, the thread gone.
    It is an end in the call, as ``= ?`` is, and never a return; ``? ERESTARTSYS`` is."""
    entry = NthEntry("write", 1).read(UNAVAILABLE.encode())
    assert entry is not None and entry.call.pid == 31
    assert (entry.finished, entry.ended, entry.exited, entry.running) == (False, True, True, False)
    whole = UNAVAILABLE.replace(
        ' <unfinished ...>\n30 1.20 write(2</dev/null>, "bye", 3) = 3\n31 1.41 <... write resumed>)', ")"
    )
    entry = NthEntry("write", 1).read(whole.encode())
    assert (entry.finished, entry.ended, entry.exited) == (False, True, True), whole
    assert [call.result for call in entered(UNAVAILABLE.splitlines())] == ["?", "3"]
    assert [call.result for call in parse_trace(UNAVAILABLE.splitlines())] == ["3", "?"]
    restarted = UNAVAILABLE.replace("= ? <unavailable>", "= ? ERESTARTSYS (To be restarted if SA_RESTART is set)")
    entry = NthEntry("write", 1).read(restarted.encode())
    assert (entry.finished, entry.ended) == (True, False)
