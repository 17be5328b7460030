"""An MCP server that leaves a grandchild in its process group (like npx does).

The grandchild's pid goes to $GRANDCHILD_PID_FILE. It ignores SIGTERM only
when GRANDCHILD_STUBBORN=1, so the stop contract has to escalate to SIGKILL.
With GRANDCHILD_SETSID=1 it leaves the group (setsid), as daemonising helpers do.
"""

import os
import subprocess
import sys
from pathlib import Path

code = "import signal\n"
if os.environ.get("GRANDCHILD_STUBBORN") == "1":
    code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
# Block until a signal ends it (an ignored SIGTERM does not wake pause()).
code += "while True:\n    signal.pause()\n"
# The grandchild keeps stdout/stderr open, as a wrapper's child would.
grandchild = subprocess.Popen(
    [sys.executable, "-c", code], start_new_session=os.environ.get("GRANDCHILD_SETSID") == "1"
)
pid_file = os.environ.get("GRANDCHILD_PID_FILE")
if pid_file:
    Path(pid_file).write_text(str(grandchild.pid))

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("grandchild")


@server.tool()
def grandchild_pid() -> int:
    """The pid of the process this server forked."""
    return grandchild.pid


if __name__ == "__main__":
    server.run()
