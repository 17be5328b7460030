"""``mcp-tray secret`` and ``mcp-tray token``: what mcp-tray keeps in the OS keyring."""

import argparse
import sys
from typing import Final

from core.base.errors import CommandError
from core.base.exitcodes import EXIT_NOT_RUNNING, EXIT_OK, EXIT_USAGE
from core.settings.paths import Paths

#: ``secret set`` reads at most this much: keyrings hold passwords and
#: tokens, and a bigger value is a file piped in by mistake.
MAX_SECRET_BYTES: Final = 64 * 1024


def cmd_token(args: argparse.Namespace, paths: Paths) -> int:
    from core.settings.secrets import read_token

    token = read_token(paths.token_file)
    if token is None:
        raise CommandError("no API token yet: start mcp-tray once to create it", EXIT_NOT_RUNNING)
    print(token)
    return EXIT_OK


def cmd_secret(args: argparse.Namespace, paths: Paths) -> int:
    from core.base.errors import SecretStoreError
    from core.settings.secrets import check_name, delete_secret, has_secret, set_secret

    try:
        check_name(args.name)
    except SecretStoreError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    try:
        if args.secret_command == "set":
            # Before the value is asked for: no one should type a secret
            # only to learn that it cannot be stored.
            replacing = has_secret(args.name)
            value = _secret_value(args)
            set_secret(args.name, value)
            verb = "replaced" if replacing else "stored"
            print(
                f'{verb} {args.name!r} in the keyring; use it as "${{keyring:{args.name}}}" in a server\'s env'
            )
            return EXIT_OK
        if not delete_secret(args.name):
            raise CommandError(f"no secret named {args.name!r} in the keyring")
        print(f"removed {args.name!r} from the keyring")
        return EXIT_OK
    except SecretStoreError as exc:
        raise CommandError(str(exc)) from None


def _secret_value(args: argparse.Namespace) -> str:
    """The value to store: asked for without echo on a terminal, else read from stdin."""
    stdin = sys.stdin
    piped = "pipe it in (printf '%s' VALUE | mcp-tray secret set NAME)"
    if stdin is None:
        raise CommandError(f"there is no stdin to read the value from: {piped}", EXIT_USAGE)
    if stdin.isatty() and not args.stdin:
        import getpass

        try:
            value = getpass.getpass(f"value for {args.name} (not echoed): ")
        except EOFError:
            value = ""
        source = "the prompt"
    elif stdin.isatty():
        value = stdin.readline().removesuffix("\n")
        source = "stdin"
    else:
        raw = stdin.buffer.read(MAX_SECRET_BYTES + 1)
        if len(raw) > MAX_SECRET_BYTES:
            raise CommandError(
                f"stdin holds more than {MAX_SECRET_BYTES} bytes, which is no password or "
                "token; pipe in only the secret",
                EXIT_USAGE,
            )
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError(
                "stdin is not UTF-8 text; pipe in the secret as text", EXIT_USAGE
            ) from None
        # `echo VALUE |` adds a newline that is not part of the secret.
        value = value.removesuffix("\n").removesuffix("\r")
        source = "stdin"
    if not value:
        raise CommandError(
            f"{source} gave an empty value, so nothing was stored: type the secret, or {piped}",
            EXIT_USAGE,
        )
    if "\x00" in value:
        raise CommandError(
            "the value holds a NUL character, which no environment variable can carry",
            EXIT_USAGE,
        )
    return value
