"""What the tray records about what it serves: the call journal's watches, ``/metrics``,
recent activity per server, and the children's CPU and memory.
"""
