"""An MCP server that leaves a grandchild behind (like npx does), in one of several ways.

The grandchild writes its own pid to $GRANDCHILD_PID_FILE (the path goes
on its command line, so it survives a cleared environment) and the server
waits for it before it serves. The grandchild ignores SIGTERM only when
GRANDCHILD_STUBBORN=1, so the stop contract has to escalate to SIGKILL.

- default: the grandchild stays in the server's process group and environment;
- GRANDCHILD_SETSID=1: it leaves the group (``setsid``), as daemonising helpers do;
- GRANDCHILD_SCRUB=1: ``setsid env -i``: a new session and an empty
  environment, so neither the group nor the tag names it;
- with GRANDCHILD_DETACH=1 as well, ``setsid --fork``: the process between
  them exits at once, so the grandchild is an orphan from its first moment
  and nothing links it to the server but the subreaper it is re-parented to.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

code = "import os, signal, sys\n"
code += "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
code += "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
if os.environ.get("GRANDCHILD_STUBBORN") == "1":
    code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
# Block until a signal ends it (an ignored SIGTERM does not wake pause()).
code += "while True:\n    signal.pause()\n"

pid_file = os.environ.get("GRANDCHILD_PID_FILE") or f"/tmp/grandchild-{os.getpid()}.pid"
argv = [sys.executable, "-c", code, pid_file]
if os.environ.get("GRANDCHILD_SCRUB") == "1":
    fork = ["--fork"] if os.environ.get("GRANDCHILD_DETACH") == "1" else []
    argv = ["setsid", *fork, "env", "-i", *argv]
# The grandchild keeps stdout/stderr open, as a wrapper's child would.
grandchild = subprocess.Popen(argv, start_new_session=os.environ.get("GRANDCHILD_SETSID") == "1")
deadline = time.monotonic() + 30
while not Path(pid_file).exists() and time.monotonic() < deadline:
    time.sleep(0.01)
left_pid = int(Path(pid_file).read_text())

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("grandchild")


@server.tool()
def grandchild_pid() -> int:
    """The pid of the process this server left behind."""
    return left_pid


if __name__ == "__main__":
    server.run()
