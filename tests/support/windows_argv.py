"""How Windows splits a command line into argv, as a model the tests check commands against
(CommandLineToArgvW and the Microsoft C runtime: what node.exe and python.exe read)."""


def command_line_to_argv(line: str) -> list[str]:
    """``line`` split as CommandLineToArgvW and the Microsoft C runtime split it.

    argv[0] is the program name: up to the closing quote when it opens with
    one, else up to white space, backslashes literal. After it: white space
    separates arguments outside quotes; 2n backslashes before a quote give n
    and the quote toggles quoting; 2n+1 give n and a literal quote; other
    backslashes are literal; inside quotes, ``""`` is one literal quote.
    """

    n = len(line)
    if line.startswith('"'):
        end = line.find('"', 1)
        end = n if end < 0 else end
        argv, i = [line[1:end]], end + 1
    else:
        end = next((j for j, c in enumerate(line) if c in " \t"), n)
        argv, i = [line[:end]], end
    return argv + crt_arguments(line, i)


def crt_split(line: str) -> list[str]:
    """The Microsoft C runtime's argv rules for every word (no program name first)."""
    return crt_arguments(line, 0)


def crt_arguments(line: str, i: int) -> list[str]:
    """The arguments in ``line`` from ``i`` on, by the C runtime's rules."""
    argv: list[str] = []
    n = len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            return argv
        arg: list[str] = []
        quoted = False
        while i < n and (quoted or line[i] not in " \t"):
            char = line[i]
            if char == "\\":
                j = i
                while j < n and line[j] == "\\":
                    j += 1
                count = j - i
                if j < n and line[j] == '"':
                    arg.append("\\" * (count // 2))
                    if count % 2:
                        arg.append('"')
                        j += 1
                else:
                    arg.append("\\" * count)
                i = j
            elif char == '"':
                if quoted and i + 1 < n and line[i + 1] == '"':
                    arg.append('"')
                    i += 2
                else:
                    quoted = not quoted
                    i += 1
            else:
                arg.append(char)
                i += 1
        argv.append("".join(arg))
