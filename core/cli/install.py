"""Install mcp-tray's servers into an AI client's own config file.

``plan_install`` reads the client's file and works out what installing would
write: the new text, a unified diff, the servers added, updated, unchanged or
in conflict, and which client to restart. ``apply_install`` writes it. Both
``mcp-tray client-config CLIENT --install [--dry-run] [--overwrite]`` and the
tray's "Connect a client…" dialog are thin faces of these two functions; the
entries themselves come from ``core.cli.clients.client_snippet``.

The rules (tests/cli/test_install.py checks each):

- Merge by server name. Every other key and every other server of the file is
  kept byte for byte: the entries are spliced into the file's own text rather
  than the whole document re-serialised, so the user's layout survives and
  the diff shows only what mcp-tray adds.
- An entry of the same name that is not mcp-tray's is replaced only with
  ``overwrite``; otherwise the plan reports the conflict and nothing is
  written. An older mcp-tray entry (another launcher path, bridge → HTTP) is
  simply updated.
- Idempotent: when nothing would change, nothing is written and no backup made.
- A backup ``<name>.bak-mcp-tray-<YYYYmmdd-HHMMSS>`` beside the file, made only
  when the file existed and changes. Timestamped rather than one fixed
  ``.bak``: a later install that changes something (say bridge → HTTP) would
  otherwise overwrite the copy of the file as it was before mcp-tray first
  touched it, which is the one worth keeping.
- The file's own line ending: a CRLF file (written on Windows) is merged
  on its lines and written back CRLF, as bytes (core.platform.files).
- Atomic: a temporary file in the same folder, given the original's mode,
  then ``os.replace``. A symlinked config (a dotfiles repo) is written through
  the link, so the link survives.
- A file that is not JSON is refused (fix it or move it aside), and so is one
  with comments or trailing commas (VS Code's files allow them): rewriting it
  would silently drop them.
"""

import contextlib
import copy
import difflib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from core.base.envvars import CLIENT_NAME_ENV
from core.base.errors import CommandError, ConfigError, SnippetError
from core.base.exitcodes import EXIT_FAILED, EXIT_OK
from core.base.loopback import is_loopback_hostname
from core.cli.client_files import file_of, read
from core.cli.clients import client_snippet
from core.cli.integrations import (
    CLIENTS,
    Client,
    client_config_path,
    installable,
    installable_clients,
)
from core.cli.launcher import APP_ID
from core.platform.files import line_ending, private_dirs, set_mode, with_line_ending
from core.settings.profiles import client_entry_name, path_target

#: A new client file gets this mode: an HTTP entry carries the API token,
#: and the client reads the file as this same user.
NEW_FILE_MODE: Final = 0o600
BACKUP_INFIX: Final = ".bak-mcp-tray-"

Entries = Mapping[str, Mapping[str, Any]]


# ------------------------------------------------------------------ where


def client_file(client: str) -> Client:
    """The registry's entry of a client ``--install`` can write to."""
    if client not in CLIENTS:
        raise SnippetError(
            f"cannot install into {client!r}: choose one of {', '.join(installable_clients())}"
        )
    return installable(client)


# ---------------------------------------------------------------- entries


def entries_of(snippet: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The servers of a ``client_snippet`` result, without its top-level key."""
    (servers,) = snippet.values()
    return {name: dict(entry) for name, entry in servers.items()}


def snippet_entries(
    client: str,
    names: Sequence[str],
    *,
    http_url: str | None = None,
    token: str | None = None,
    tray_home: str | None = None,
    config: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """``client``'s entries for ``names``, built by ``client_snippet`` (bridge, or HTTP at
    ``http_url``; a bridge's with ``--config`` for a tray on a file other than the per-user one)."""
    snippet = client_snippet(
        client, list(names), http_url=http_url, token=token, home=tray_home, config=config
    )
    return entries_of(snippet)


def is_mcp_tray_entry(name: str, entry: object) -> bool:
    """Whether ``entry`` (named ``name`` in a client's file) reaches mcp-tray.

    Ours: a bridge (``… connect SERVER`` by the mcp-tray launcher, or any
    entry carrying the bridge's client-name variable) or an HTTP entry for
    this server on the loopback gateway. Such an entry is updated freely; any
    other one of the same name is the user's own.
    """
    if not isinstance(entry, dict):
        return False
    env = entry.get("env")
    if isinstance(env, dict) and CLIENT_NAME_ENV in env:
        return True
    command, args = entry.get("command"), entry.get("args")
    # The launcher is the mcp-tray script, or `python -m app.entry` without one;
    # a bridge under another name (an alias the user made) is still mcp-tray's.
    if (
        isinstance(command, str)
        and isinstance(args, list)
        and len(args) >= 2
        # `connect SERVER`, or `connect SERVER --config FILE`.
        and "connect" in args[-4:-1]
        and (Path(command).name == APP_ID or "app.entry" in args)
    ):
        return True
    url = next((entry[key] for key in ("url", "httpUrl") if isinstance(entry.get(key), str)), None)
    if url is not None:
        parts = urlsplit(url)
        # A profile's entry is named for it (core.settings.profiles.client_entry_name).
        profile = path_target(parts.path)
        ours = parts.path in (f"/mcp/{name}", f"/{name}/mcp") or (
            profile is not None and client_entry_name(profile) == name
        )
        return is_loopback_hostname(parts.hostname) and ours
    return False


# ------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Conflict:
    """A same-name entry in the client's file that mcp-tray did not write."""

    name: str
    existing: Any

    def __str__(self) -> str:
        return f"{self.name!r} is already there and is not mcp-tray's ({_describe(self.existing)})"


@dataclass(frozen=True)
class InstallPlan:
    """What installing would do. ``text == original`` when nothing changes."""

    client: str
    label: str
    #: The client's file, as the user knows it.
    path: Path
    #: The file actually written: ``path`` with any symlink followed.
    target: Path
    #: The file's text before; None when there is no file yet.
    original: str | None
    text: str
    document: dict[str, Any]
    diff: str
    restart: str
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    #: Same-name entries that are not mcp-tray's: apply refuses while there are any.
    conflicts: tuple[Conflict, ...] = ()
    #: What the entries carry that no screen should show (the API token).
    secrets: tuple[str, ...] = ()

    @property
    def shown_diff(self) -> str:
        """The diff with every secret masked: a diff is read on screens and pasted
        into bug reports (``--dry-run``, the Connect dialog's preview)."""
        shown = self.diff
        for secret in self.secrets:
            shown = mask(shown, secret)
        return shown

    @property
    def changes(self) -> bool:
        return self.text != self.original

    def conflict_text(
        self, fix: str = "pass --overwrite to replace it, or leave that server out"
    ) -> str:
        listed = "; ".join(map(str, self.conflicts))
        return f"{self.path}: {listed}. Nothing was written: {fix}"

    def summary(self) -> str:
        """One line on what an install would do."""
        if self.conflicts:
            return self.conflict_text()
        if not self.changes:
            names = ", ".join(self.unchanged)
            return f"nothing to change: {self.path} already points {self.label} at {names}"
        parts = []
        if self.added:
            parts.append(f"adds {', '.join(self.added)}")
        if self.updated:
            parts.append(f"updates {', '.join(self.updated)}")
        verb = "creates" if self.original is None else "changes"
        return f"{verb} {self.path}: {'; '.join(parts)}"


def plan_install(
    client: str,
    entries: Entries,
    *,
    home: Path | None = None,
    xdg_config_home: Path | None = None,
    path: Path | None = None,
    overwrite: bool = False,
) -> InstallPlan:
    """What installing ``entries`` into ``client``'s file would write (nothing is written).

    ``home`` and ``xdg_config_home`` place the file (tests give tmp_path);
    ``path`` names it outright. Raises ``ConfigError`` when the file cannot be
    read or is not plain JSON, ``SnippetError`` when there is nothing to install.
    """
    spec = client_file(client)
    if not entries:
        raise SnippetError(
            "no servers to install: pass --server NAME (repeatable), or configure servers first"
        )
    where = (
        path
        if path is not None
        else client_config_path(client, home=home, xdg_config_home=xdg_config_home)
    )
    target = Path(os.path.realpath(where))
    original = _read(target, where)
    shape = file_of(spec)
    current = shape.load(original, where, client) if original is not None else {}
    servers = current.get(spec.key, {})
    if not isinstance(servers, dict):
        raise ConfigError(
            where,
            "is not a JSON object",
            key=spec.key,
            fix="fix it (the servers go in an object keyed by name) or move the file aside",
        )
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    conflicts: list[Conflict] = []
    changed: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        wanted = json.loads(json.dumps(entry))  # a plain, JSON-shaped copy
        if name not in servers:
            added.append(name)
        elif servers[name] == wanted:
            unchanged.append(name)
            continue
        elif is_mcp_tray_entry(name, servers[name]) or overwrite:
            updated.append(name)
        else:
            conflicts.append(Conflict(name, servers[name]))
            continue
        changed[name] = wanted
    document = copy.deepcopy(current)
    # Merged on "\n" lines, written back with the file's own ending.
    ending = line_ending(original)
    plain = None if original is None else original.replace("\r\n", "\n")
    if changed:
        document.setdefault(spec.key, {}).update(changed)
        merged = shape.merged(plain, spec.key, changed, document)
        text = with_line_ending(merged, ending)
    else:
        merged = text = original if original is not None else ""
    return InstallPlan(
        client=client,
        label=spec.label,
        path=where,
        target=target,
        original=original,
        text=text,
        document=document,
        diff=_diff(plain, merged, where),
        restart=spec.restart,
        added=tuple(added),
        updated=tuple(updated),
        unchanged=tuple(unchanged),
        conflicts=tuple(conflicts),
        secrets=_secrets_of(entries),
    )


def _secrets_of(entries: Entries) -> tuple[str, ...]:
    """The bearer tokens in the entries' headers (``headers``, Codex's ``http_headers``)."""
    found: set[str] = set()
    for entry in entries.values():
        for value in entry.values():
            if not isinstance(value, Mapping):
                continue
            auth = next((v for k, v in value.items() if str(k).lower() == "authorization"), None)
            if isinstance(auth, str) and auth.partition(" ")[2]:
                found.add(auth.partition(" ")[2])
    return tuple(sorted(found))


def _describe(entry: object) -> str:
    if isinstance(entry, dict):
        if isinstance(entry.get("command"), str):
            args = entry.get("args")
            words = [entry["command"], *(args if isinstance(args, list) else [])]
            return "runs " + " ".join(map(str, words))
        url = entry.get("url", entry.get("httpUrl"))
        if isinstance(url, str):
            return f"url {url}"
    return f"{json.dumps(entry)[:60]}"


def _read(target: Path, shown: Path) -> str | None:
    """The client's file (``target``, the link followed) as text; None when there is none."""
    try:
        return read(target)
    except ConfigError as exc:
        # Named as the user knows it, not by where a link led.
        raise ConfigError(shown, exc.problem, fix=exc.fix, line=exc.line) from None


def _diff(original: str | None, text: str, shown: Path) -> str:
    before = (original or "").splitlines(keepends=True)
    after = text.splitlines(keepends=True)
    lines = difflib.unified_diff(
        before, after, fromfile="/dev/null" if original is None else str(shown), tofile=str(shown)
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# ------------------------------------------------------------------ apply


@dataclass(frozen=True)
class InstallResult:
    """What ``apply_install`` did; ``str()`` is the user's text, one fact a line."""

    plan: InstallPlan
    written: bool
    backup: Path | None = None
    #: The written file's mode (None when nothing was written).
    mode: int | None = None

    def lines(self) -> list[str]:
        plan = self.plan
        if not self.written:
            return [plan.summary()]
        done = []
        if plan.added:
            done.append(f"added {', '.join(plan.added)}")
        if plan.updated:
            done.append(f"updated {', '.join(plan.updated)}")
        out = [f"wrote {plan.path}: {'; '.join(done)}"]
        if self.backup is not None:
            out.append(f"backup of the previous file: {self.backup}")
        else:
            out.append("no backup: the file is new")
        if self.mode is not None and self.mode & 0o077 and _holds_token(plan):
            out.append(
                f"note: {plan.path} holds the API token and other users can read it; "
                f"chmod 600 {plan.path}"
            )
        out.append(plan.restart)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


#: What a masked secret shows instead of itself.
MASK: Final = "********"


def mask(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` shown as ``MASK``."""
    return text.replace(secret, MASK) if secret else text


def _holds_token(plan: InstallPlan) -> bool:
    servers = plan.document.get(CLIENTS[plan.client].key, {})
    return any(
        isinstance(servers.get(name), dict) and "headers" in servers[name]
        for name in (*plan.added, *plan.updated)
    )


def apply_install(
    plan: InstallPlan, *, now: Callable[[], datetime] = datetime.now
) -> InstallResult:
    """Write ``plan``: backup first (when the file existed), then the new text, atomically.

    Refuses a plan with conflicts, and one made from a file that changed
    since (the user approved a diff that no longer holds).
    """
    if plan.conflicts:
        raise CommandError(plan.conflict_text(), EXIT_FAILED)
    if not plan.changes:
        return InstallResult(plan, written=False)
    if _read(plan.target, plan.path) != plan.original:
        raise CommandError(
            f"{plan.path} changed since this install was planned (is {plan.label} running "
            "and writing it?); nothing was written: look at the new diff and install again"
        )
    try:
        private_dirs(plan.target.parent)
        backup = None
        mode = NEW_FILE_MODE
        if plan.original is not None:
            mode = stat.S_IMODE(plan.target.stat().st_mode)
            backup = _backup_path(plan.target, now())
            shutil.copy2(plan.target, backup)
        _write_atomically(plan.target, plan.text, mode)
    except OSError as exc:
        raise CommandError(
            f"cannot write {plan.path} ({exc.strerror or exc}); it was left as it was: "
            "check that you may write its folder"
        ) from None
    return InstallResult(plan, written=True, backup=backup, mode=mode)


def _backup_path(target: Path, when: datetime) -> Path:
    base = f"{target.name}{BACKUP_INFIX}{when:%Y%m%d-%H%M%S}"
    candidate = target.with_name(base)
    serial = 2
    # Two installs in one second must not overwrite the first backup.
    while candidate.exists():
        candidate = target.with_name(f"{base}-{serial}")
        serial += 1
    return candidate


def _write_atomically(target: Path, text: str, mode: int) -> None:
    fd, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".mcp-tray-tmp"
    )
    try:
        # Bytes: text mode would turn each \n into \r\n on Windows (\r\r\n in a CRLF file).
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        set_mode(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


# -------------------------------------------------------------------- CLI


def run_install(
    client: str,
    entries: Entries,
    *,
    dry_run: bool,
    overwrite: bool,
    home: Path | None = None,
) -> int:
    """``client-config CLIENT --install [--dry-run] [--overwrite]``: its exit code.

    0: installed, nothing to change, or a dry run without conflicts; 1: a
    conflict; errors in the client's file raise ``ConfigError`` (2). A dry
    run's diff shows the API token masked (``InstallPlan.shown_diff``).
    """
    plan = plan_install(client, entries, home=home, overwrite=overwrite)
    if dry_run:
        if plan.diff:
            sys.stdout.write(plan.shown_diff)
        print(f"mcp-tray: dry run, nothing written: {plan.summary()}", file=sys.stderr)
        if plan.changes and not plan.conflicts:
            print(f"mcp-tray: after installing, {plan.restart}", file=sys.stderr)
        return EXIT_FAILED if plan.conflicts else EXIT_OK
    print(apply_install(plan))
    return EXIT_OK
