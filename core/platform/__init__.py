"""The one package that makes OS-specific calls (tests/test_platform_boundary.py keeps it so).

Everything above it (supervision, settings, serving, the CLI, the app) asks
``backends()`` for the current set, or calls the OS-neutral functions of
``files``, ``signals`` and ``procs``; none of it names a POSIX or Windows
call. The layer sits below settings and supervision, above base.

- ``backends``: which set runs (this OS's native one, or ``portable`` by
  ``MCP_TRAY_PLATFORM``), and ``describe`` for ``mcp-tray doctor``;
- ``exits``, ``kqueue_watch``: seeing a child exit (pidfd, kqueue, a wait thread);
- ``pipes``: a child's stdio as asyncio transports (the loop, or threads);
- ``trees``, ``jobs``: a child's process tree (group, psutil, job object);
- ``reaper``: the Linux subreaper that catches escapees;
- ``procs``: psutil lookups (environment, tags, descendants, same user);
- ``files``: private folders and files, the instance lock, the file limit;
- ``signals``: the signals that stop a foreground run;
- ``commands``: a Windows batch file's cmd.exe command line, quoted for cmd.exe;
- ``sockets``: the gateway socket's address-reuse option (SO_EXCLUSIVEADDRUSE on Windows).
"""
