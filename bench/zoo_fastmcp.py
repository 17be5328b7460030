"""A small FastMCP server (the standalone ``fastmcp`` package), the zoo's ninth kind.

Run by bench/on_demand.py ``--zoo`` with the zoo's own Python (which has
``fastmcp`` installed); two tools, so it lists like a real one.
"""

from fastmcp import FastMCP

server = FastMCP("zoo-fastmcp")


@server.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


if __name__ == "__main__":
    server.run()
