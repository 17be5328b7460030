"""One exception tree: every public exception of core/ lives in core.base.errors.

Strategy: import every core module, collect the exception classes each one
defines, and check them against the tree's ``__all__`` and its root.
"""

import importlib
import inspect

from core.base import errors
from tests.support import paths

CORE = paths.REPO / "core"


def _core_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(CORE.parent).with_suffix("").parts)
        for path in CORE.rglob("*.py")
        if path.stem != "__init__"
    )


def test_every_public_exception_of_core_is_defined_in_the_tree() -> None:
    strays = []
    for name in _core_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attr.startswith("_")
                and name != errors.__name__
            ):
                strays.append(f"{name}.{attr}")
    assert strays == [], f"define these in core/base/errors.py: {strays}"


def test_all_lists_every_exception_of_the_tree_and_each_derives_from_the_root() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }
    assert set(errors.__all__) == defined
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.McpTrayError), name


def test_the_docstring_draws_every_exception_of_the_tree() -> None:
    doc = errors.__doc__ or ""
    missing = [name for name in errors.__all__ if f" {name} " not in doc.replace("\n", " ")]
    assert missing == []
