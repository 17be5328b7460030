"""The server the MCP conformance suite's server scenarios expect, over stdio or HTTP.

The suite (``@modelcontextprotocol/conformance``) tests a server by calling
fixed tools, resources and prompts by name (``test_simple_text``,
``test://static-text``, ``test_simple_prompt``, ...), as its scenario
descriptions specify. Its own reference server (examples/servers/typescript/
everything-server.ts in the suite's repository) is not in the npm package and
speaks streamable HTTP only, so ``bench/conformance.py`` cannot run it as a
tray's stdio child. This is an equivalent written with the Python SDK's
``MCPServer``: the same names and payloads, servable over both transports, so
the bench can test it directly (streamable HTTP) and through the tray's
gateway (stdio child) and compare like with like.

It covers the scenarios of both protocol eras: the handshake era
(2025-06-18, 2025-11-25: logging, progress, sampling, elicitation,
subscriptions, completion, SSE polling) and the stateless 2026-07-28 era
(``server/discover`` and per-request ``_meta`` come from the SDK;
InputRequiredResult tools and prompts, header mirroring, capability errors
and list-change triggers are here).

Run:
    python tests/servers/conformance_server.py              # stdio
    python tests/servers/conformance_server.py --http --port 0 --port-file FILE
        # streamable HTTP at http://127.0.0.1:PORT/mcp; the bound port is
        # written to FILE once the socket listens
"""

import argparse
import asyncio
import base64
import json
import socket
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import uvicorn
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    JSONRPCMessage,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

# The handshake-era logging API is deprecated at 2026-07-28; this server speaks both eras.
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28.*")

#: A 1x1 PNG and a minimal WAV header, base64.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_TINY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

#: A fixed key, so sealed requestState survives a restart; tests only.
STATE_KEY = b"mcp-tray conformance fixture request-state key (tests only)"

server = MCPServer(
    "mcp-tray-conformance-server",
    version="1.0.0",
    request_state_security=RequestStateSecurity(keys=[STATE_KEY]),
)

#: URIs a handshake-era client subscribed to (resources/subscribe).
subscribed: set[str] = set()


# ------------------------------------------------------------------ content tools


@server.tool()
def test_simple_text() -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Returns one image block (a 1x1 PNG)."""
    return [ImageContent(type="image", data=PNG_1X1, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Returns one audio block (a tiny WAV)."""
    return [AudioContent(type="audio", data=WAV_TINY, mime_type="audio/wav")]


def _embedded(uri: str, mime_type: str, text: str) -> EmbeddedResource:
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(uri=uri, mime_type=mime_type, text=text),
    )


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Returns one embedded text resource."""
    return [
        _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    ]


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Returns text, an image and an embedded resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        _embedded(
            "test://mixed-content-resource",
            "application/json",
            json.dumps({"test": "data", "value": 123}),
        ),
    ]


@server.tool()
def test_error_handling() -> str:
    """Always fails: the result has isError true."""
    raise RuntimeError("This tool intentionally returns an error for testing")


# ------------------------------------------------- notifications during a call


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log notifications, 50 ms apart."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs once at info (2026-07-28: only when the request set a log level)."""
    await ctx.info("test_logging_tool ran")
    return "logged"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100, 50 ms apart."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
    return "Tool with progress executed successfully"


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE response stream mid-call, so the client resumes (SSE polling)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


# ------------------------------------------ server-to-client requests (handshake era)


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model (sampling/createMessage) and returns its answer."""
    try:
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        return f"Sampling failed: {exc}"
    content = result.content
    answer = content.text if isinstance(content, TextContent) else "(no text)"
    return f"LLM response: {answer}"


async def _elicit_and_report(ctx: Context, message: str, schema: type[BaseModel], said: str) -> str:
    """Elicits ``schema``; reports the action and the accepted content after ``said``."""
    try:
        result = await ctx.elicit(message=message, schema=schema)
    except MCPError as exc:
        return f"Elicitation failed: {exc}"
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"{said}: action={result.action}, content={content}"


class UserAnswer(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user (elicitation/create) for a username and an email."""
    return await _elicit_and_report(ctx, message, UserAnswer, "User response")


class Defaults(BaseModel):
    """SEP-1034: a default for every primitive type."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits with defaults for string, integer, number, enum and boolean (SEP-1034)."""
    return await _elicit_and_report(
        ctx, "Please review your details", Defaults, "Elicitation completed"
    )


class Enums(BaseModel):
    """SEP-1330: the five enum shapes."""

    untitledSingle: str = Field(
        description="Untitled single-select",
        json_schema_extra={"enum": ["option1", "option2", "option3"]},
    )
    titledSingle: str = Field(
        description="Titled single-select",
        json_schema_extra={
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]
        },
    )
    legacyEnum: str = Field(
        description="Legacy titled single-select (enumNames)",
        json_schema_extra={
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
    )
    untitledMulti: list[str] = Field(
        description="Untitled multi-select",
        json_schema_extra={"items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    )
    titledMulti: list[str] = Field(
        description="Titled multi-select",
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            }
        },
    )


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits with all five enum schema variants (SEP-1330)."""
    return await _elicit_and_report(ctx, "Please pick some options", Enums, "Elicitation completed")


# ------------------------------------------------------ 2026-07-28 era fixtures


@server.tool()
def test_x_mcp_header(
    region: Annotated[
        str,
        Field(
            description="Mirrored into the Mcp-Param-Region header",
            json_schema_extra={"x-mcp-header": "Region"},
        ),
    ] = "<none>",
) -> str:
    """Has an argument mirrored into a custom header (SEP-2243)."""
    return f"region={region}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Fails with -32021 unless the client declared the sampling capability."""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool requires the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "The client declared sampling."


def _dynamic() -> str:
    """Briefly registered by the list-change triggers."""
    return "dynamic"


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Changes the tool list and announces it on subscriptions/listen streams."""
    server.add_tool(_dynamic, name="test_dynamic_tool")
    server.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "tool list changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Changes the prompt list and announces it on subscriptions/listen streams."""
    server.add_prompt(Prompt.from_function(_dynamic, name="test_dynamic_prompt"))
    server.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    return "prompt list changed"


def _ask(message: str, field: str, kind: str = "string") -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    return CreateMessageRequest(
        params=CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=max_tokens,
        )
    )


def _answer(responses: Any, key: str, field: str) -> str | None:
    """The accepted elicitation's ``field``, or None."""
    answer = (responses or {}).get(key)
    if isinstance(answer, ElicitResult) and answer.content:
        value = answer.content.get(field)
        return None if value is None else str(value)
    return None


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Needs the user's input: asks for it in an InputRequiredResult, never a request."""
    name = _answer(ctx.input_responses, "user_name", "name")
    if name is not None:
        return f"Hello, {name}!"
    return InputRequiredResult(input_requests={"user_name": _ask("What is your name?", "name")})


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Round 1 asks for a name (elicitation); round 2 greets."""
    responses = ctx.input_responses
    if responses and "user_name" in responses:
        return f"Hello, {_answer(responses, 'user_name', 'name') or 'stranger'}!"
    return InputRequiredResult(input_requests={"user_name": _ask("What is your name?", "name")})


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """Round 1 asks the model (sampling); round 2 returns its answer."""
    answer = (ctx.input_responses or {}).get("capital_question")
    if answer is not None:
        content = answer.content if isinstance(answer, CreateMessageResult) else None
        return f"Model said: {content.text if isinstance(content, TextContent) else '?'}"
    return InputRequiredResult(
        input_requests={"capital_question": _sample("What is the capital of France?", 100)}
    )


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """Round 1 asks for the client's roots; round 2 counts them."""
    answer = (ctx.input_responses or {}).get("client_roots")
    if answer is not None:
        roots = answer.roots if isinstance(answer, ListRootsResult) else []
        return f"The client has {len(roots)} root(s): " + ", ".join(str(r.uri) for r in roots)
    return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Round 2 checks that the requestState of round 1 came back."""
    if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "awaiting-confirm":
        return "state-ok: confirmed"
    return InputRequiredResult(
        input_requests={"confirm": _ask("Please confirm", "ok", "boolean")},
        request_state="awaiting-confirm",
    )


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Round 1 asks for three inputs at once; round 2 needs all three."""
    wanted = {"user_name", "greeting", "client_roots"}
    if wanted <= set(ctx.input_responses or {}):
        return "All three inputs received."
    return InputRequiredResult(
        input_requests={
            "user_name": _ask("What is your name?", "name"),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        },
        request_state="three-inputs",
    )


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Three rounds: name, then colour (new requestState each time), then the answer."""
    state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {}
    responses = ctx.input_responses or {}
    if state.get("round") == 2 and "step2" in responses:
        return f"{state.get('name')} likes {_answer(responses, 'step2', 'color')}."
    if state.get("round") == 1 and "step1" in responses:
        return InputRequiredResult(
            input_requests={"step2": _ask("Step 2: What is your favorite color?", "color")},
            request_state=json.dumps({"round": 2, "name": _answer(responses, "step1", "name")}),
        )
    return InputRequiredResult(
        input_requests={"step1": _ask("Step 1: What is your name?", "name")},
        request_state=json.dumps({"round": 1}),
    )


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """Round 2 succeeds only with the sealed state of round 1 (the SDK rejects a tampered one)."""
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"confirm": _ask("Please confirm", "ok", "boolean")},
            request_state="round-1",
        )
    return f"state-ok: {ctx.request_state}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Asks only for what the client declared it can answer."""
    capabilities = ctx.client_capabilities
    requests: dict[str, InputRequest] = {}
    if capabilities is None or capabilities.sampling is not None:
        requests["sample"] = _sample("Say hello", 50)
    if capabilities is None or capabilities.elicitation is not None:
        requests["ask"] = _ask("What is your name?", "name")
    return InputRequiredResult(input_requests=requests, request_state="capability-gated")


def _json_schema_2020_12_tool() -> str:
    """Tool with JSON Schema 2020-12 features."""
    return "ok"


#: SEP-1613 / SEP-2106: the inputSchema the json-schema-2020-12 scenario expects back verbatim.
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
_schema_tool = Tool.from_function(_json_schema_2020_12_tool, name="json_schema_2020_12_tool")
server._tool_manager._tools[_schema_tool.name] = _schema_tool.model_copy(
    update={"parameters": JSON_SCHEMA_2020_12}
)


# ------------------------------------------------------------------ resources


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return base64.b64decode(PNG_1X1)


@server.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template: {id} is substituted."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


# ------------------------------------------------------------------ prompts


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [UserMessage(TextContent(type="text", text="This is a simple prompt for testing."))]


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
    return [UserMessage(TextContent(type="text", text=text))]


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that embeds the resource named by its argument."""
    return [
        UserMessage(_embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
        UserMessage(TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    return [
        UserMessage(ImageContent(type="image", data=PNG_1X1, mime_type="image/png")),
        UserMessage(TextContent(type="text", text="Please analyze the image above.")),
    ]


@server.prompt()
async def test_input_required_result_prompt(
    ctx: Context,
) -> list[UserMessage] | InputRequiredResult:
    """prompts/get that first asks the user for context (InputRequiredResult)."""
    context = _answer(ctx.input_responses, "user_context", "context")
    if context is not None:
        return [UserMessage(TextContent(type="text", text=f"Use this context: {context}"))]
    return InputRequiredResult(
        input_requests={"user_context": _ask("What context should the prompt use?", "context")}
    )


# ------------------------------------------- logging, subscriptions, completion


async def _set_level(ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


async def _subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def _unsubscribe(
    ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams
) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


_lowlevel = server._lowlevel_server
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)


async def _complete(
    ctx: ServerRequestContext[Any], params: CompleteRequestParams
) -> CompleteResult:
    """Suggestions that start with what was typed (the suite accepts any, even none)."""
    words = ["paris", "park", "party", "hello", "world"]
    values = [word for word in words if word.startswith(params.argument.value)]
    return CompleteResult(completion=Completion(values=values, total=len(values), has_more=False))


_lowlevel.add_request_handler("completion/complete", CompleteRequestParams, _complete)


# ------------------------------------------------------------------ transports


class MemoryEventStore(EventStore):
    """Every SSE event kept in memory, so a client can resume a closed stream (SEP-1699)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = len(self.events) + 1
        self.events.append((stream_id, event_id, message))
        return str(event_id)

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        after = int(last_event_id) if last_event_id.isdigit() else 0
        stream = next((s for s, event_id, _ in self.events if event_id == after), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events:
            if stream_id == stream and event_id > after and message is not None:
                await send_callback(EventMessage(message, str(event_id)))
        return stream


async def serve_http(port: int, port_file: Path | None) -> None:
    """Streamable HTTP on 127.0.0.1:PORT/mcp (DNS-rebinding protection on, as for localhost)."""
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=100)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    if port_file is not None:
        partial = port_file.with_name(port_file.name + ".partial")
        partial.write_text(f"{sock.getsockname()[1]}\n")
        partial.replace(port_file)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: any free one)")
    parser.add_argument("--port-file", type=Path, default=None, help="write the bound port here")
    args = parser.parse_args(argv)
    if args.http:
        asyncio.run(serve_http(args.port, args.port_file))
    else:
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
