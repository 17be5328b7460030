"""The scale bench, run by bench/scale.py; cli.py holds its description and options."""
