"""The gateway latency bench, run by bench/gateway.py; cli.py holds its description and options."""
