"""Profiles: the config key, and what a profile offers (names, filters, routes, cost).

Strategy: the config is parsed from real files (core.settings.config), and
views are built (core.serving.aggregate.profile_view) from catalogs filled the way a
child's listing fills them; no process is needed to decide names, filters
or routes. The endpoints themselves are tested in tests/serving/test_aggregate.py.
"""

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.base.errors import ConfigError
from core.serving.aggregate.profile_view import (
    BYTES_PER_TOKEN,
    CLIENT_TOOL_LIMITS,
    MAX_NAME_CHARS,
    build_view,
    exposed_name,
    member_of,
)
from core.settings.config import ServerConfig, load_config, valid_server_name
from core.settings.profiles import EVERYTHING, NAME_SEPARATOR, ProfileConfig, endpoint_path
from core.supervision.catalog import Catalog


def catalog(
    tools: list[str], resources: tuple[str, ...] = (), templates: tuple[str, ...] = ()
) -> Catalog:
    listed = Catalog()
    listed.known = True
    listed.lists = {
        "tools": [{"name": name, "inputSchema": {"type": "object"}} for name in tools],
        "resources": [{"uri": uri, "name": uri} for uri in resources],
        "resourceTemplates": [{"uriTemplate": t, "name": t} for t in templates],
        "prompts": [],
    }
    return listed


def servers(*names: str) -> dict[str, ServerConfig]:
    return {name: ServerConfig(name, "cmd") for name in names}


def config_error(tmp_path: Path, profiles: Any) -> ConfigError:
    path = tmp_path / "config.json"
    document = {"mcpServers": {"github": {"command": "gh"}, "fs": {"command": "fs"}}}
    path.write_text(json.dumps({**document, "profiles": profiles}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value


# ------------------------------------------------------------------ names


def test_a_name_of_64_characters_or_fewer_is_the_server_and_tool_joined() -> None:
    assert exposed_name("github", "create_issue") == "github__create_issue"
    fits = "s" * 30 + "__" + "t" * 32
    assert exposed_name("s" * 30, "t" * 32) == fits and len(fits) == MAX_NAME_CHARS


def test_a_longer_name_is_shortened_to_64_the_same_way_every_time_and_uniquely() -> None:
    server = "x" * 40
    first = exposed_name(server, "a_tool_whose_name_alone_is_long")
    again = exposed_name(server, "a_tool_whose_name_alone_is_long")
    other = exposed_name(server, "a_tool_whose_name_alone_is_long_too")
    assert first == again
    assert len(first) == len(other) == MAX_NAME_CHARS
    assert first != other  # the same 55-character start, told apart by the hash


def test_a_members_tool_named_like_another_members_parses_to_its_own_server() -> None:
    # The impostor of issue 27: "fs" lists "remote__write" beside a server that would be
    # "fs__remote" (a name the config now refuses); "fs-remote" is the closest allowed.
    view = build_view(
        EVERYTHING,
        servers("fs", "fs-remote"),
        {"fs": catalog(["remote__write"]), "fs-remote": catalog(["write"])},
    )
    names = [tool["name"] for tool in view.tools]
    assert names == ["fs__remote__write", "fs-remote__write"]
    assert view.tool_routes["fs__remote__write"] == ("fs", "remote__write")
    assert view.tool_routes["fs-remote__write"] == ("fs-remote", "write")
    assert view.renamed == []
    assert member_of("fs__remote__write") == "fs"


def test_a_name_too_long_for_its_server_prefix_holds_no_separator_so_no_full_name_equals_it() -> (
    None
):
    # A 60-character server: its shortened names cannot keep "SERVER__" whole.
    long = "x" * 53 + "_y" * 3 + "z"
    short = exposed_name(long, "tool")
    assert NAME_SEPARATOR not in short and len(short) <= MAX_NAME_CHARS
    # A 53-character one keeps it: the shortened name still parses to its server.
    kept = exposed_name("s" * 53, "a_tool_name_that_does_not_fit")
    assert member_of(kept) == "s" * 53 and len(kept) == MAX_NAME_CHARS


_SERVER_NAMES = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,63}", fullmatch=True).filter(valid_server_name)
_TOOL_NAMES = st.from_regex(r"[a-z_]{1,70}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_SERVER_NAMES, st.lists(_TOOL_NAMES, max_size=6), min_size=1, max_size=4))
def test_no_tool_of_one_member_is_ever_exposed_under_a_name_another_members_tool_has(
    listed: dict[str, list[str]],
) -> None:
    names = list(listed)
    view = build_view(EVERYTHING, servers(*names), {n: catalog(t) for n, t in listed.items()})
    exposed = [tool["name"] for tool in view.tools]
    assert len(exposed) == len(set(exposed))
    for name in exposed:
        server, _ = view.tool_routes[name]
        # Every exposed name is its server's: by its prefix, or by holding no "__" at all.
        assert member_of(name) == server or NAME_SEPARATOR not in name
        assert len(name) <= MAX_NAME_CHARS
    # Each member's plain names that fit are given out as they are, whatever the others list.
    for server, tools in listed.items():
        alone = build_view(EVERYTHING, servers(server), {server: catalog(tools)})
        for tool in alone.tools:
            assert tool["name"] in view.tool_routes
            assert view.tool_routes[tool["name"]].server == server


def test_a_shortened_name_does_not_depend_on_the_profile_it_is_seen_through() -> None:
    long = "y" * 60
    catalogs = {long: catalog(["tool_one", "tool_two"]), "fs": catalog(["read"])}
    everything = build_view(EVERYTHING, servers(long, "fs"), catalogs)
    alone = build_view(ProfileConfig("p", (long,)), servers(long, "fs"), catalogs)
    assert [t["name"] for t in everything.tools if t["name"] != "fs__read"] == [
        t["name"] for t in alone.tools
    ]


# ---------------------------------------------------------------- filters


def test_globs_let_tools_in_and_exclude_keeps_some_out_with_the_reason() -> None:
    profile = ProfileConfig(
        "coding",
        ("github", "fs"),
        tools=("github__create_*", "fs__*"),
        exclude=("*__delete_*",),
    )
    catalogs = {
        "github": catalog(["create_issue", "create_pr", "list_issues"]),
        "fs": catalog(["read", "delete_file"]),
        "calendar": catalog(["today"]),
    }
    view = build_view(profile, servers("github", "fs", "calendar"), catalogs)
    assert [t["name"] for t in view.tools] == [
        "github__create_issue",
        "github__create_pr",
        "fs__read",
    ]
    assert view.members == ("github", "fs")
    assert "'*__delete_*' matches it" in view.left_out["fs__delete_file"]
    assert 'none of its "tools" globs' in view.left_out["github__list_issues"]
    refusal = view.refusal("tool", "fs__delete_file", None)
    assert "not in profile 'coding'" in refusal


def test_a_glob_that_matches_nothing_is_a_warning() -> None:
    profile = ProfileConfig("p", ("fs",), tools=("fs__*", "fss__*"))
    view = build_view(profile, servers("fs"), {"fs": catalog(["read"])})
    assert any("'fss__*' matches no tool" in w for w in view.warnings())


def test_a_member_that_has_not_listed_yet_gets_its_names_routed_to_it() -> None:
    view = build_view(
        EVERYTHING, servers("fs", "ghost"), {"fs": catalog(["read"]), "ghost": Catalog()}
    )
    assert view.waiting == ("ghost",)
    assert view.pending_route("ghost__anything") == ("ghost", "anything")
    assert view.pending_route("fs__write") is None
    assert any("'ghost' has not listed" in w for w in view.warnings())


def test_a_tool_of_a_server_outside_the_profile_is_refused_naming_it_even_before_it_listed() -> (
    None
):
    # "a" is still starting (or parked): its tools are unknown, its prefix is not.
    everything = build_view(EVERYTHING, servers("a", "b"), {"a": Catalog(), "b": catalog(["echo"])})
    coding = build_view(
        ProfileConfig("coding", ("b",), tools=("b__*",)),
        servers("a", "b"),
        {"b": catalog(["echo"])},
    )
    refusal = coding.refusal("tool", "a__echo", everything)
    assert refusal.startswith("tool 'a__echo' is not in profile 'coding'")
    assert "its server 'a' is not one of the profile's servers (b)" in refusal
    unknown = coding.refusal("tool", "zz__echo", everything)
    assert unknown.startswith("no server of profile 'coding' offers a tool named 'zz__echo'")


# -------------------------------------------------------------- resources


def test_a_uri_two_members_offer_goes_to_the_first_in_order_with_a_warning_naming_both() -> None:
    catalogs = {"a": catalog([], ("note://x",)), "b": catalog([], ("note://x", "note://y"))}
    view = build_view(ProfileConfig("p", ("b", "a")), servers("a", "b"), catalogs)
    assert view.resource_owner("note://x") == "b"
    assert view.resource_owner("note://y") == "b"
    assert [r["uri"] for r in view.resources] == ["note://x", "note://y"]
    assert any("offered by both 'b' and 'a'" in w for w in view.warnings())


def test_a_uri_no_member_lists_goes_to_the_member_whose_template_matches() -> None:
    catalogs = {
        "a": catalog([], templates=("file:///{path}",)),
        "b": catalog([], templates=("db://{table}/rows",)),
    }
    view = build_view(EVERYTHING, servers("a", "b"), catalogs)
    assert view.resource_owner("db://users/rows") == "b"
    assert view.resource_owner("file:///notes") == "a"
    assert view.resource_owner("ftp://elsewhere") is None


# ------------------------------------------------------------------- cost


def test_the_token_estimate_is_the_tools_list_bytes_over_four_and_limits_are_named() -> None:
    tools = [f"tool_{i}" for i in range(130)]
    view = build_view(EVERYTHING, servers("big"), {"big": catalog(tools)})
    listed = json.dumps({"tools": view.tools}, separators=(",", ":")).encode()
    assert view.tools_bytes == len(listed)
    assert view.tokens == -(-len(listed) // BYTES_PER_TOKEN)
    passed = {limit.client for limit in view.limits_passed()}
    assert passed == {limit.client for limit in CLIENT_TOOL_LIMITS}  # 130 > 128, 80, 40
    assert any("130 tools pass VS Code's limit of 128" in w for w in view.warnings())


# ----------------------------------------------------------------- config


def test_a_profile_is_reached_at_its_own_path_and_all_at_plain_mcp() -> None:
    assert endpoint_path("@all") == "/mcp"
    assert endpoint_path("@coding") == "/mcp/@coding"
    assert endpoint_path("github") == "/mcp/github"


def test_a_profile_in_the_config_loads_with_its_servers_and_globs(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"github": {"command": "gh"}, "fs": {"command": "fs"}},
                "profiles": {
                    "coding": {
                        "servers": ["github", "fs"],
                        "tools": ["github__create_*", "fs__*"],
                        "exclude": ["*__delete_*"],
                    },
                    "chat": {},
                },
            }
        )
    )
    config = load_config(path)
    assert config.profiles["coding"] == ProfileConfig(
        "coding", ("github", "fs"), ("github__create_*", "fs__*"), ("*__delete_*",)
    )
    assert config.profiles["chat"] == ProfileConfig("chat")


@pytest.mark.parametrize(
    ("profiles", "key", "problem"),
    [
        ({"coding": {"servers": ["gihub"]}}, "profiles.coding.servers[0]", "did you mean 'github'"),
        ({"coding": {"tool": ["x"]}}, "profiles.coding.tool", "did you mean 'tools'"),
        ({"coding": {"tools": "github__*"}}, "profiles.coding.tools", "list of non-empty strings"),
        ({"all": {}}, "profiles.all", "needs no entry"),
        ({"a/b": {}}, "profiles.a/b", "URL path"),
        ({"coding": {"servers": ["fs", "fs"]}}, "profiles.coding.servers", "twice"),
        (["coding"], "profiles", "must be an object"),
    ],
)
def test_a_bad_profile_is_refused_naming_its_key_and_the_fix(
    tmp_path: Path, profiles: Any, key: str, problem: str
) -> None:
    error = config_error(tmp_path, profiles)
    assert error.key == key
    assert problem in error.problem
    assert error.fix
