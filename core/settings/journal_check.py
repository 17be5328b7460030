"""The config's ``"journal"`` and ``"telemetry"`` sections, checked (docs/design.md §3.16).

``{"days": 14, "max_mb": 200, "arguments": true}``: how long and how much of
the call journal is kept, and whether it keeps arguments or names only. A
bad value is refused like any config error (file, key, fix), and the tray
keeps running on its last good config.

``{"otlp_endpoint": "http://127.0.0.1:4318"}``: where each call's span goes
(an OTLP/HTTP collector; docs/journal.md#traces).
"""

from typing import Final
from urllib.parse import urlsplit

from core.settings.config_model import JOURNAL_KEYS, TELEMETRY_KEYS, JournalSettings
from core.settings.profiles import Problems

#: The longest a journal may keep records: ten years.
MAX_DAYS: Final = 3650
#: The largest journal file: 100 GB.
MAX_MB: Final = 100_000


def check_journal(raw: object, problems: Problems) -> JournalSettings:
    default = JournalSettings()
    if not isinstance(raw, dict):
        raise problems.error(
            ["journal"],
            f"must be an object, got {problems.describe(raw)}",
            fix=f'write "journal": {{"days": {default.days:g}, "max_mb": {default.max_mb:g}}}',
        )
    for key in raw:
        if key not in JOURNAL_KEYS:
            raise problems.error(
                ["journal", key],
                f"unknown key{problems.hint(key, JOURNAL_KEYS)}",
                fix="the journal takes 'days', 'max_mb' and 'arguments'",
            )
    days = _number(raw, "days", default.days, 1, MAX_DAYS, problems, "days")
    max_mb = _number(raw, "max_mb", default.max_mb, 1, MAX_MB, problems, "megabytes")
    arguments = raw.get("arguments", default.arguments)
    if not isinstance(arguments, bool):
        raise problems.error(
            ["journal", "arguments"],
            f"must be true or false, got {problems.describe(arguments)}",
            fix="true keeps each call's arguments (secrets redacted); false keeps tool names only",
        )
    return JournalSettings(days=days, max_mb=max_mb, arguments=arguments)


def _number(
    raw: dict[str, object],
    key: str,
    default: float,
    low: float,
    high: float,
    problems: Problems,
    unit: str,
) -> float:
    value = raw.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise problems.error(
            ["journal", key],
            f"must be a number of {unit} from {low:g} to {high:g}, got {problems.describe(value)}",
            fix=f"leave it out for the default ({default:g})",
        )
    return float(value)


def check_telemetry(raw: object, problems: Problems) -> str | None:
    """The OTLP/HTTP endpoint spans go to (None: none named)."""
    example = 'write "telemetry": {"otlp_endpoint": "http://127.0.0.1:4318"}'
    if not isinstance(raw, dict):
        raise problems.error(
            ["telemetry"], f"must be an object, got {problems.describe(raw)}", fix=example
        )
    for key in raw:
        if key not in TELEMETRY_KEYS:
            raise problems.error(
                ["telemetry", key],
                f"unknown key{problems.hint(key, TELEMETRY_KEYS)}",
                fix="telemetry takes 'otlp_endpoint'",
            )
    endpoint = raw.get("otlp_endpoint")
    if endpoint is None:
        return None
    if not isinstance(endpoint, str) or not _is_http_url(endpoint):
        raise problems.error(
            ["telemetry", "otlp_endpoint"],
            f"must be an http:// or https:// URL, got {problems.describe(endpoint)}",
            fix="name the OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (leave it out for no spans)",
        )
    return endpoint


def _is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a bad IPv6 literal, a port out of range
        return False
