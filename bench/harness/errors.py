"""How a bench gives up: the one exception each family of benches raises and catches at its top."""


class BenchAborted(Exception):
    pass


class BenchError(Exception):
    pass
