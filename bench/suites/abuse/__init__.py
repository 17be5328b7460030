"""The hostile-input bench, run by bench/abuse.py; cli.py holds its description and options."""
