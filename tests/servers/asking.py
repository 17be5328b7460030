"""The tools that ask the client back, for the test servers that offer them (not a server).

``ask`` asks the client's model (sampling), ``confirm`` the user (elicitation).
Their resolvers ask in whichever era the connection speaks: a server->client
request mid-call (handshake era), or an ``input_required`` result the client
answers by retrying (2026-07-28). A server script imports this from its own
folder (``sys.path[0]``).
"""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel


class Verdict(BaseModel):
    ok: bool


def _sample(question: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=50,
    )


def _confirm(question: str) -> Elicit[Verdict]:
    return Elicit(question, Verdict)


async def ask(question: str, answer: Annotated[CreateMessageResult, Resolve(_sample)]) -> str:
    """Ask the client's model (sampling) and return its answer."""
    content = answer.content
    return content.text if isinstance(content, TextContent) else str(content)


async def confirm(question: str, verdict: Annotated[Verdict, Resolve(_confirm)]) -> str:
    """Ask the user (elicitation) a yes/no question."""
    return "confirmed" if verdict.ok else "declined"


def add_asking_tools(server: MCPServer) -> None:
    server.tool()(ask)
    server.tool()(confirm)
