"""A wrapper like strace when strace 6.1 loses a start: it runs its command
(``argv[1:]``) as its child, and when that child ends it says so on stderr and lives
on, holding the child's pipes, as strace did ("pid ... has delayed wait data set
already"). The kit must notice the command's end, not wait for this process's."""

import subprocess
import sys
import time

child = subprocess.Popen(sys.argv[1:])
child.wait()
sys.stderr.write(f"lives_on: pid {child.pid} has delayed wait data set already\n")
sys.stderr.flush()
time.sleep(120)
