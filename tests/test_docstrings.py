"""Every public function and class of ``fcn`` has a runnable ``Examples`` section, and every example
runs.

Part of the suite, so a docstring whose example stops matching the code fails here. Each
module's doctests run in a copy of that module's namespace (as ``python -m doctest`` would), with
``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``; examples must stay fast (they train at most a
width-1/16 FCN for one step) and print nothing that depends on the CPU kernels.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import doctest  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import pkgutil  # noqa: E402

import pytest  # noqa: E402

import fcn  # noqa: E402

SKIPPED_MODULES = {"fcn.__main__"}
"""Modules not imported here: ``fcn.__main__`` runs the command line on import."""

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_names() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(fcn.__path__, "fcn.")]
    return ["fcn"] + sorted(name for name in names if name not in SKIPPED_MODULES)


MODULES = _module_names()


def _public_definitions(module) -> dict[str, object]:
    """The public functions and classes defined in ``module`` (not imported into it)."""
    return {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module.__name__
    }


def test_every_public_function_and_class_has_an_example():
    missing = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attr, obj in _public_definitions(module).items():
            # obj.__doc__, not inspect.getdoc: a class must not pass on its base class's example
            if ">>>" not in (obj.__doc__ or ""):
                missing.append(f"{name}.{attr}")
    assert not missing, (
        f"{len(missing)} public functions and classes without a '>>>' example:\n"
        + "\n".join(missing)
    )


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module, name, globs=vars(module).copy())
    examples = sum(len(test.examples) for test in tests)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    failed = attempted = 0
    for test in sorted(tests, key=lambda test: test.name):
        results = runner.run(test, out=report.append)
        failed, attempted = failed + results.failed, attempted + results.attempted
    assert failed == 0, "".join(report)
    assert attempted == examples, f"{name}: {examples} examples found, {attempted} run"
