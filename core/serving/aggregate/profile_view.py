"""What one profile offers a client through its single endpoint, and what that costs the client.

core.serving.aggregate.aggregate serves a profile (or ``all``) as one MCP server. A
``ProfileView`` is what that server offers, built from its members' catalogs
(what each child last listed, kept while it respawns or is parked), and
where each name and URI goes:

- **Names.** Tools and prompts are ``SERVER__NAME``. The config refuses a
  server name holding ``__`` or ending in ``_`` (core.settings.config_check),
  so a name's server is what comes before its first ``__``: no member's tool
  can take another member's name (a server ``fs`` listing ``remote__write``
  is ``fs__remote__write``, which parses to ``fs``; no server can be named
  ``fs__remote``). One that would pass 64 characters (what Claude Code, and
  the Anthropic and OpenAI APIs, take as a tool name) is shortened to 55
  characters, ``_`` and 8 hex digits of a SHA-256 of the server's and the
  tool's own names: the same at every start and in every profile, so a
  client's permissions survive restarts. A shortened name keeps
  ``SERVER__`` whole, so it too parses to its own server; a server name too
  long for that (over 53 characters) gives a shortened name with no ``__``
  at all, which no full name equals. Two names can then meet only within
  one server (its own long tool's shortened name equal to another of its
  tools); the second in its listing takes more of the hash.
- **Filters.** A tool is in when one of the profile's ``tools`` globs
  matches its prefixed name and none of its ``exclude`` globs does; a left
  out tool is remembered with why, for the refusal of a call to it.
  Prompts and resources of every member are in.
- **Resources** keep their URIs and are routed to the member that lists
  them; a URI two members list goes to the first in the profile's order,
  with a warning naming both. A URI no member lists is routed by the
  members' resource templates, first match in order.
- **Cost.** What a client's model reads of the profile is its tools/list:
  the estimate is the bytes of that JSON (compact, UTF-8) divided by 4, the
  usual rule of thumb for English text and JSON with current tokenizers; it
  is an estimate, good to compare profiles, not to bill. Clients that limit
  the tools they pass on are listed in ``CLIENT_TOOL_LIMITS`` with where the
  figure comes from.
"""

import fnmatch
import hashlib
import json
import math
import re
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from core.base.errors import shown
from core.protocol.jsonrpc import HANDSHAKE_PROTOCOL_VERSIONS
from core.settings.config import ServerConfig
from core.settings.profiles import ALL_PROFILE, NAME_SEPARATOR, ProfileConfig
from core.supervision.catalog import Catalog

#: The longest tool or prompt name a view gives out.
MAX_NAME_CHARS: Final = 64
#: Hex digits of the hash that ends a shortened name.
HASH_CHARS: Final = 8
#: The most a shortened name takes of its hash (128 bits: still room for a prefix).
MAX_HASH_CHARS: Final = 32
#: The token estimate: bytes of the tools/list JSON per token.
BYTES_PER_TOKEN: Final = 4
#: How the token figure is made, for whoever reads it.
ESTIMATE: Final = (
    f"bytes of the profile's tools/list JSON (compact, UTF-8) / {BYTES_PER_TOKEN}: a rule of "
    "thumb for JSON with current tokenizers, good to compare profiles, not to bill"
)
#: The lists a view offers; each changes (list_changed) on its own.
KINDS: Final = ("tools", "prompts", "resources")


class ClientLimit(NamedTuple):
    """A client that passes on at most ``tools`` tools, and where that figure comes from."""

    client: str
    tools: int
    source: str


CLIENT_TOOL_LIMITS: Final = (
    ClientLimit(
        "Cursor (until 2025)",
        40,
        "Cursor's MCP docs: 'Cursor will only send the first 40 tools to the Agent'",
    ),
    ClientLimit(
        "Cursor", 80, "Cursor warns when its MCP servers' tools pass 80 (the limit since 2025-09)"
    ),
    ClientLimit(
        "VS Code",
        128,
        "VS Code caps a Copilot chat request at 128 tools ('Tool limit exceeded (N/128)')",
    ),
)


class Route(NamedTuple):
    """Where an exposed name goes: the member, and the name the member knows."""

    server: str
    name: str


def full_name(server: str, name: str) -> str:
    return f"{server}{NAME_SEPARATOR}{name}"


def exposed_name(server: str, name: str, taken: Container[str] = ()) -> str:
    """``SERVER__NAME``, shortened when it is too long or already taken (see the module doc)."""
    full = full_name(server, name)
    if len(full) <= MAX_NAME_CHARS and full not in taken:
        return full
    digest = hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()
    size = HASH_CHARS
    while True:
        room = MAX_NAME_CHARS - size - 1
        if len(server) + len(NAME_SEPARATOR) <= room:
            head = full[:room]
        else:
            # No "__" in it (a server name holds none and does not end in "_"): no full
            # name of any server can equal it.
            head = server[:room].rstrip("_")
        short = f"{head}_{digest[:size]}"
        if short not in taken or size >= MAX_HASH_CHARS:
            return short
        size *= 2  # two tools sharing a prefix and 8 hex digits: take more of the hash


def member_of(name: str) -> str:
    """The server an exposed ``SERVER__NAME`` belongs to (what comes before its first ``__``)."""
    return name.partition(NAME_SEPARATOR)[0]


_EXPRESSION: Final = re.compile(r"\{([^}]*)\}")


def template_pattern(template: str) -> "re.Pattern[str]":
    """A regular expression for the URIs an RFC 6570 template expands to (loosely:
    a simple ``{var}`` stays within one path segment, any other expression may span)."""
    parts: list[str] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        operator = match.group(1)[:1]
        parts.append("[^/?#]*" if operator.isalnum() or operator == "_" else ".*")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts), re.DOTALL)


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class ProfileView:
    """What one profile offers now, and where each of its names goes."""

    profile: ProfileConfig
    #: The enabled members, in the profile's order.
    members: tuple[str, ...] = ()
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_routes: dict[str, Route] = field(default_factory=dict)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    prompt_routes: dict[str, Route] = field(default_factory=dict)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    resource_owners: dict[str, str] = field(default_factory=dict)
    template_owners: list[tuple[str, "re.Pattern[str]", str]] = field(default_factory=list)
    #: Tools of members the filters leave out (exposed and full name) -> why.
    left_out: dict[str, str] = field(default_factory=dict)
    #: (exposed, full) for every name that had to be shortened.
    renamed: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Members whose lists are not known yet (never started, or parked before they listed).
    waiting: tuple[str, ...] = ()
    tools_bytes: int = 0
    #: A digest of each kind's list: a client is told when one changes.
    signature: dict[str, str] = field(default_factory=dict)
    #: What any member offers: resource subscriptions, logging, completions.
    subscribe: bool = False
    logging: bool = False
    completions: bool = False
    instructions: str | None = None
    #: The oldest handshake-era revision a member speaks (None: none of them is of that era).
    oldest_version: str | None = None

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def tokens(self) -> int:
        """Estimated tokens of the tools/list a client's model reads (see the module doc)."""
        return math.ceil(self.tools_bytes / BYTES_PER_TOKEN)

    def limits_passed(self) -> list[ClientLimit]:
        return [limit for limit in CLIENT_TOOL_LIMITS if len(self.tools) > limit.tools]

    def warnings(self) -> list[str]:
        """Everything a person choosing this profile for a client should know."""
        found = list(self.notes)
        found += [
            f"{len(self.tools)} tools pass {limit.client}'s limit of {limit.tools} ({limit.source})"
            for limit in self.limits_passed()
        ]
        found += [
            f"{full!r} is longer than {MAX_NAME_CHARS} characters: clients see it as {short!r}"
            for short, full in self.renamed
        ]
        found += [
            f"{member!r} has not listed what it offers yet: its tools are not counted"
            for member in self.waiting
        ]
        return found

    def includes(self, full: str) -> bool:
        """Whether the profile's globs let a tool named ``full`` (``SERVER__NAME``) in."""
        profile = self.profile
        return any(fnmatch.fnmatchcase(full, glob) for glob in profile.tools) and not any(
            fnmatch.fnmatchcase(full, glob) for glob in profile.exclude
        )

    def pending_route(self, name: str) -> Route | None:
        """A name of a member that has not listed yet (still starting, or parked before it
        ever listed): it goes to that member, which answers with its own state and reason."""
        member, separator, own = name.partition(NAME_SEPARATOR)
        if separator and own and member in self.waiting and self.includes(name):
            return Route(member, own)
        return None

    def resource_owner(self, uri: str) -> str | None:
        """The member a resource URI goes to: the one that lists it, else the first
        whose template matches it."""
        owner = self.resource_owners.get(uri)
        if owner is not None:
            return owner
        for template, pattern, server in self.template_owners:
            if template == uri or pattern.fullmatch(uri):
                return server
        return None

    def refusal(self, kind: str, name: str, everything: "ProfileView | None") -> str:
        """Why a tool or prompt name is not served here (the profile named)."""
        if name in self.left_out:
            return f"{kind} {shown(name)} is not in profile {self.name!r}: {self.left_out[name]}"
        routes: Mapping[str, Route] = {}
        if everything is not None:
            routes = everything.tool_routes if kind == "tool" else everything.prompt_routes
        server = routes[name].server if name in routes else None
        if server is None and everything is not None:
            # A server that has not listed yet (starting, parked) is still known by its prefix.
            member = member_of(name)
            server = member if member in everything.members and member != name else None
        if server is not None and server not in self.members and self.name != ALL_PROFILE:
            return (
                f"{kind} {shown(name)} is not in profile {self.name!r}: its server {server!r} is not "
                f"one of the profile's servers ({', '.join(self.members) or 'none'})"
            )
        where = "no server" if self.name == ALL_PROFILE else f"no server of profile {self.name!r}"
        return f"{where} offers a {kind} named {shown(name)} ({kind}s are named SERVER__NAME)"


def build_view(
    profile: ProfileConfig,
    servers: Mapping[str, ServerConfig],
    catalogs: Mapping[str, Catalog],
) -> ProfileView:
    """What ``profile`` offers, from its members' last listings."""
    view = ProfileView(profile)
    members: list[str] = []
    for name in profile.servers if profile.servers is not None else list(servers):
        config = servers.get(name)
        if config is None:
            view.notes.append(f"server {name!r} is not in the config")
        elif config.disabled:
            if profile.servers is not None:
                view.notes.append(f"server {name!r} is disabled: nothing of it is offered")
        else:
            members.append(name)
    view.members = tuple(members)
    known = [(name, catalogs[name]) for name in members if catalogs[name].known]
    view.waiting = tuple(name for name in members if not catalogs[name].known)
    _add_tools(view, known)
    _add_prompts(view, known)
    _add_resources(view, known)
    _add_offer(view, known)
    return view


def _add_tools(view: ProfileView, known: list[tuple[str, Catalog]]) -> None:
    profile = view.profile
    used_globs: set[str] = set()
    for server, catalog in known:
        for tool in catalog.lists.get("tools", []):
            name = tool.get("name")
            if not isinstance(name, str):
                continue
            full = full_name(server, name)
            included = [glob for glob in profile.tools if fnmatch.fnmatchcase(full, glob)]
            excluded = [glob for glob in profile.exclude if fnmatch.fnmatchcase(full, glob)]
            used_globs.update(included[:1] + excluded[:1])
            exposed = exposed_name(server, name, view.tool_routes)
            if not included or excluded:
                why = (
                    f'its "exclude" glob {excluded[0]!r} matches it'
                    if excluded
                    else f'none of its "tools" globs ({", ".join(map(repr, profile.tools))}) '
                    "matches it"
                )
                view.left_out[exposed] = view.left_out[full] = why
                continue
            if exposed != full:
                view.renamed.append((exposed, full))
            view.tool_routes[exposed] = Route(server, name)
            view.tools.append({**tool, "name": exposed})
    if not view.waiting:
        for glob in (*profile.tools, *profile.exclude):
            if glob not in used_globs:
                view.notes.append(f"the glob {glob!r} matches no tool of profile {view.name!r}")
    listed = _compact({"tools": view.tools})
    view.tools_bytes = len(listed)
    view.signature["tools"] = hashlib.sha256(listed).hexdigest()


def _add_prompts(view: ProfileView, known: list[tuple[str, Catalog]]) -> None:
    for server, catalog in known:
        for prompt in catalog.lists.get("prompts", []):
            name = prompt.get("name")
            if not isinstance(name, str):
                continue
            exposed = exposed_name(server, name, view.prompt_routes)
            if exposed != full_name(server, name):
                view.renamed.append((exposed, full_name(server, name)))
            view.prompt_routes[exposed] = Route(server, name)
            view.prompts.append({**prompt, "name": exposed})
    view.signature["prompts"] = hashlib.sha256(_compact(view.prompts)).hexdigest()


def _add_resources(view: ProfileView, known: list[tuple[str, Catalog]]) -> None:
    templates: dict[str, str] = {}
    for server, catalog in known:
        for resource in catalog.lists.get("resources", []):
            uri = resource.get("uri")
            if not isinstance(uri, str):
                continue
            first = view.resource_owners.get(uri)
            if first is not None:
                view.notes.append(
                    f"resource {uri!r} is offered by both {first!r} and {server!r}: "
                    f"{first!r}'s is served (it comes first in the profile's order)"
                )
                continue
            view.resource_owners[uri] = server
            view.resources.append(resource)
        for template in catalog.lists.get("resourceTemplates", []):
            shape = template.get("uriTemplate")
            if not isinstance(shape, str) or shape in templates:
                continue
            templates[shape] = server
            view.templates.append(template)
            view.template_owners.append((shape, template_pattern(shape), server))
    listed = _compact([view.resources, view.templates])
    view.signature["resources"] = hashlib.sha256(listed).hexdigest()


def _add_offer(view: ProfileView, known: list[tuple[str, Catalog]]) -> None:
    texts = []
    versions = []
    for server, catalog in known:
        capabilities = catalog.capabilities
        resources = capabilities.get("resources")
        view.subscribe |= isinstance(resources, dict) and bool(resources.get("subscribe"))
        view.logging |= "logging" in capabilities
        view.completions |= "completions" in capabilities
        if catalog.instructions:
            texts.append(f"{server}: {catalog.instructions}")
        if not catalog.modern and catalog.version in HANDSHAKE_PROTOCOL_VERSIONS:
            versions.append(catalog.version)
    view.instructions = "\n\n".join(texts) or None
    view.oldest_version = min(versions) if versions else None
