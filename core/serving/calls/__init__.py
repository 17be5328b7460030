"""One client request's way to a child and back, whatever its era or door: the pipeline
and its stages (which child, roots, approvals, era translation), the request itself,
and the fan-out of what a shared child says unprompted.
"""
