"""The children: spawning, the stop contract, the upstream session, the run loop
and state machine, the call path, restart policy and breakers, the Supervisor.
"""
