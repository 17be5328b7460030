"""The benches: scripts that measure the tray and print the command that reproduces
each figure (docs/design.md §4).

``bench/NAME.py`` are the commands; ``harness/`` holds what they share (trays on
a private home, clients, processes, logs, statistics, records); ``suites/``
holds the benches too large for one file, one package each.
"""
