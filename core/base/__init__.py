"""The bottom layer: errors, clocks, environment names, states and snapshots.

Standard library only; every other layer may import it, it imports none.
"""
