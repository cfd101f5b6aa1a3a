"""strace, except that its first recording start (``-ttt``, no ``inject=``) is lost as
strace 6.1 loses one now and then: the server never runs (its stand-in, this process's
child, dies by SIGKILL 0.3 s into the start), and this process says "delayed wait data
set already" and lives on holding the pipes the server would have had.
argv[1]: the real strace; argv[2]: a file marking that the start was lost; the rest:
strace's arguments."""

import os
import subprocess
import sys
import time

real, lost, args = sys.argv[1], sys.argv[2], sys.argv[3:]
recording = "--" in args and "-ttt" in args and not any(arg.startswith("inject=") for arg in args)
if not recording or os.path.exists(lost):
    os.execv(real, [real, *args])
open(lost, "w").close()
dies = "import os, signal, time; time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)"
child = subprocess.Popen([sys.executable, "-S", "-c", dies])
child.wait()
sys.stderr.write(f"strace: dispatch_event: pid {child.pid} has delayed wait data set already\n")
sys.stderr.flush()
time.sleep(120)
