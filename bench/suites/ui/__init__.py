"""The UI bench, run by bench/ui.py; cli.py holds its description and options."""
