"""The conformance bench, run by bench/conformance.py; cli.py holds its description and options."""
