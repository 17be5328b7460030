"""The benches too large for one file, one package each; bench/NAME.py runs NAME."""
