"""An MCP server that tries what a sandbox forbids: writes, reads, TCP, a grandchild, memory.

Every tool answers with what happened, the OS's own error included
(``PermissionError: [Errno 13] Permission denied: '...'``), so a test sees
exactly what the kernel said to the server.
"""

import os
import socket
import subprocess
import sys
import tempfile

from mcp.server.mcpserver import MCPServer

server = MCPServer("contained")
#: What ``allocate`` keeps alive.
held: list[bytearray] = []


def _error(exc: OSError) -> str:
    return f"{type(exc).__name__}: {exc}"


@server.tool()
def write(path: str, text: str) -> str:
    """Write ``text`` to ``path``."""
    try:
        with open(path, "w") as out:
            out.write(text)
    except OSError as exc:
        return _error(exc)
    return "written"


@server.tool()
def read(path: str) -> str:
    """The text of ``path``."""
    try:
        with open(path) as source:
            return "read: " + source.read()
    except OSError as exc:
        return _error(exc)


@server.tool()
def connect(port: int) -> str:
    """Open a TCP connection to 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as exc:
        return _error(exc)


@server.tool()
def grandchild_write(path: str) -> str:
    """Have a process of our own write to ``path``; what it printed."""
    code = "import sys\ntry:\n open(sys.argv[1], 'w').write('x'); print('written')\n"
    code += "except OSError as exc:\n print(type(exc).__name__ + ': ' + str(exc))\n"
    done = subprocess.run(
        [sys.executable, "-c", code, path], capture_output=True, text=True, timeout=30
    )
    return done.stdout.strip() or done.stderr.strip()


@server.tool()
def temp_file() -> str:
    """Create a file in the temporary folder; its path."""
    with tempfile.NamedTemporaryFile(delete=False) as out:
        out.write(b"x")
    return out.name


@server.tool()
def allocate(mib: int) -> str:
    """Hold ``mib`` MiB of touched memory."""
    held.append(bytearray(b"\x01" * (mib * 1024 * 1024)))
    return f"holding {sum(len(b) for b in held) // (1024 * 1024)} MiB, pid {os.getpid()}"


@server.tool()
async def allocate_then_wait(mib: int, seconds: float) -> str:
    """Hold ``mib`` MiB, then answer after ``seconds`` (a call in flight while over a limit)."""
    import anyio

    held.append(bytearray(b"\x01" * (mib * 1024 * 1024)))
    await anyio.sleep(seconds)
    return f"answered after holding {mib} MiB"


if __name__ == "__main__":
    server.run()
