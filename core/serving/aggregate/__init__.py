"""One endpoint for many servers: ``/mcp`` and ``/mcp/@NAME`` (a profile), what each
profile offers (its view, cached off the call path) and the discovery profiles'
three tools.
"""
