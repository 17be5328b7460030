"""TODO bench.harness.errors"""


class BenchAborted(Exception):
    pass


class BenchError(Exception):
    pass
