"""The sqlite worker registry (bridges and the tray write it), heartbeats,
client identities, and the environment/runtime diagnostics built on it.

Read in this order:

- ``identity``: client-name aliases and worker identities (stdlib only);
- ``records``: rows, outcomes, liveness and ownership verdicts (no sqlite);
- ``schema``: the file: schema, migrations, the checks before opening it;
- ``store``: ``WorkerRegistry``, every read and write;
- ``heartbeat``: the interval policy and the beat thread of one worker;
- ``envdiag``: the doctor (unknown ``MCP_TRAY_*`` keys, stale runtimes);
- ``workers_view``: rows and findings as the CLI, API and tray show them;
- ``session_claims``: whether each client session's row still holds it;
- ``registry_copy``: the tray's copy of every row and session verdict;
- ``worker_watch``: the tray's side: HTTP-session rows, keeping the copy, warnings;
- ``journal_rows``, ``journal``: the call journal's records and its file (a writer thread).

It imports only ``core.base`` and ``core.__version__`` from the rest of core.
"""
