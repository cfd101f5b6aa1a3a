"""``procfs``: one reading of ``/proc/PID/stat`` for the port check and the wrapped-start watch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from retryproof.adapters.procfs import running, stat_fields, visible_pids

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")

# A name with ") " in it, as a process may give itself: the fields start after the last ")".
NAMED = "import sys, time; open('/proc/self/comm', 'w').write('a) b'); print(flush=True); time.sleep(30)"


def test_a_process_whose_name_holds_a_parenthesis_is_read_by_its_fields_until_it_is_reaped():
    child = subprocess.Popen([sys.executable, "-S", "-c", NAMED], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline()  # named by now
        fields = stat_fields(child.pid)
        assert fields is not None and int(fields[1]) == os.getpid(), fields  # its parent: this process
        assert running(child.pid) and child.pid in visible_pids()
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped
        assert stat_fields(child.pid)[0] == "Z" and not running(child.pid)
    finally:
        child.kill()
        child.wait()
    assert stat_fields(child.pid) is None and not running(child.pid)
