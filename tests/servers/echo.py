"""A well-behaved stdio MCP server for tests, with switches for misbehaviour.

Environment switches (all optional):
- ECHO_STATE_FILE + ECHO_ON_RESTART=hang|crash: the first run creates the
  state file and serves normally; later runs hang before the handshake, or
  exit at once, so a test can break only the *respawned* child.
- ECHO_MARKER_DIR: slow tools create <dir>/<tool>.started when they begin,
  so a test knows the call is in flight before it kills the child.
- ECHO_FAIL_WHILE: exit at start while this file exists (a fixable breakage).
- ECHO_NOTES_FILE: write_note appends its text here (a non-idempotent effect).
- ECHO_EXTRA_TOOL_FILE: while this file exists at start, the server also has
  a tool named `extra` (so a respawn can change the tool list).
"""

import asyncio
import os
import sys
import threading
from pathlib import Path

fail_while = os.environ.get("ECHO_FAIL_WHILE")
if fail_while and Path(fail_while).exists():
    print(f"echo: {fail_while} exists, refusing to start", file=sys.stderr, flush=True)
    sys.exit(2)

state_file = os.environ.get("ECHO_STATE_FILE")
if state_file:
    if Path(state_file).exists():
        mode = os.environ.get("ECHO_ON_RESTART", "")
        if mode == "hang":
            print("echo: hanging before the handshake", file=sys.stderr, flush=True)
            # Hang until the stop contract ends us (stdin EOF is ignored here).
            threading.Event().wait()
        elif mode == "crash":
            print("echo: crashing at start", file=sys.stderr, flush=True)
            sys.exit(7)
    else:
        Path(state_file).write_text(str(os.getpid()))


from asking import add_asking_tools  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402

server = MCPServer("echo")
print(f"echo: started pid {os.getpid()}", file=sys.stderr, flush=True)


def _mark(tool: str) -> None:
    folder = os.environ.get("ECHO_MARKER_DIR")
    if folder:
        Path(folder, f"{tool}.started").write_text(str(os.getpid()))


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami() -> int:
    """The server's pid."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow_read(seconds: float) -> str:
    """A read-only call that takes a while."""
    _mark("slow_read")
    await asyncio.sleep(seconds)
    return f"read after {seconds}"


@server.tool()
async def slow_write(seconds: float) -> str:
    """A call with effects (no safety hints) that takes a while."""
    _mark("slow_write")
    await asyncio.sleep(seconds)
    return f"wrote after {seconds}"


@server.tool()
def write_note(text: str) -> str:
    """Append to the notes file: not safe to replay."""
    with open(os.environ["ECHO_NOTES_FILE"], "a") as notes:
        notes.write(text + "\n")
    return "noted"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(message: str) -> str:
    """A tool that reports an error result (the server stays healthy)."""
    raise ValueError(message)


@server.tool()
def crash(code: int = 3) -> str:
    """Kill the server process on the spot."""
    print(f"echo: crashing with {code}", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
async def blob(size: int, ctx: Context, progress: bool = False) -> str:
    """`size` characters of text with quotes and newlines (which JSON escapes), once: a large
    result; after one progress report if `progress` (a reply over HTTP is then a stream)."""
    if progress:
        await ctx.report_progress(1, 1, "almost there")
    line = '{"row": "one line of a large tool result"}\n'
    return (line * (size // len(line) + 1))[:size]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def getenv(name: str) -> str:
    """An environment variable of the server process (empty when unset)."""
    return os.environ.get(name, "")


add_asking_tools(server)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def count(steps: int, ctx: Context) -> str:
    """Report progress `steps` times, then answer."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
    return f"counted {steps}"


extra = os.environ.get("ECHO_EXTRA_TOOL_FILE")
if extra and Path(extra).exists():

    @server.tool()
    def extra_tool() -> str:
        """Only present while the extra-tool file exists."""
        return "extra"


@server.resource("note://hello")
def hello() -> str:
    """A static resource."""
    return "hello from echo"


@server.prompt()
def greet(name: str) -> str:
    """A prompt with one argument."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    server.run()
