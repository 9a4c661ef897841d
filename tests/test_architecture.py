"""The tree keeps its floors (``docs/architecture.md``): imports run one way, no circle, no
``fcn`` import hidden in a function, and the ground floor stands on no other ``fcn`` module.

Read from the source (``ast``), not by importing, so the rules hold for every module whether or
not a test imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fcn"

FLOORS: dict[str, int] = {
    # 0: ground floor, facts
    "fcn.classes": 0, "fcn.device": 0, "fcn.preprocessing": 0, "fcn.initialize": 0,
    "fcn.presets": 0, "fcn.layout": 0, "fcn.options": 0, "fcn.data.errors": 0,
    "fcn.inference.budget": 0, "fcn._compat": 0, "fcn.cpu": 0,
    # 1: model and data
    "fcn.vgg16": 1, "fcn.conv_gradients": 1, "fcn.layers": 1, "fcn.model": 1, "fcn.caffe": 1,
    "fcn.metrics": 1, "fcn.plots": 1, "fcn.results": 1, "fcn.data": 1,
    # 2: the inference wing; 3: the training wing (it validates with inference's evaluator)
    "fcn.inference": 2, "fcn.training": 3,
    # 4: the front door
    "fcn.cli": 4, "fcn.demo": 4, "fcn.__main__": 4, "fcn": 4,
    # test, benchmark and notebook support: on top, and imported by no module (below)
    "fcn.testing": 4,
}  # fmt: skip
"""The floor of each module (the longest matching prefix): a module imports only from its own
floor or below."""

LAZY_FOR_SPEED = {"fcn.cli"}
"""Modules allowed ``fcn`` imports inside functions: the command line imports a command's
TensorFlow-heavy modules only when that command runs, so ``--help`` and ``--version`` answer
without TensorFlow. Not to dodge a circle: the floors above forbid one either way."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def floor(name: str) -> int:
    prefixes = [p for p in FLOORS if name == p or name.startswith(p + ".")]
    assert prefixes, f"{name} has no floor in FLOORS: add it"
    return FLOORS[max(prefixes, key=len)]


def fcn_imports(tree: ast.AST, package: str) -> list[tuple[ast.AST, str]]:
    """(node, imported fcn module) of every import in ``tree``, ``from fcn import x`` resolved
    to the submodule ``fcn.x`` where there is one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "fcn":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Import):
            found += [(node, a.name) for a in node.names if a.name.split(".")[0] == "fcn"]
    return found


def test_every_module_has_a_floor_and_imports_only_downwards():
    wrong = []
    for name, path in MODULES.items():
        for _, imported in fcn_imports(ast.parse(path.read_text()), name):
            if imported != name and floor(imported) > floor(name):
                wrong.append(f"{name} (floor {floor(name)}) imports {imported} "
                             f"(floor {floor(imported)})")  # fmt: skip
    assert not wrong, wrong


PLAIN_FACTS = {"fcn.classes", "fcn.layout", "fcn.options", "fcn.presets", "fcn.cpu"}
"""Ground-floor modules of plain values that import neither another ``fcn`` module nor
TensorFlow: the command line's parser stands on them."""


COMPAT = "fcn._compat"
"""The hooks into private TensorFlow, Keras and albumentations internals: on the ground floor,
importing no other ``fcn`` module, so that every module that needs one imports it from there."""


def test_the_ground_floor_stands_on_plain_facts_only():
    ground = [name for name in MODULES if floor(name) == 0]
    assert PLAIN_FACTS | {"fcn.device", COMPAT} <= set(ground)
    for name in ground:
        imported = {m for _, m in fcn_imports(ast.parse(MODULES[name].read_text()), name)}
        allowed = (
            {name} if name in PLAIN_FACTS | {COMPAT} else {name, COMPAT} | PLAIN_FACTS
        )
        assert imported <= allowed, (name, imported - allowed)
        if name in PLAIN_FACTS:
            top = {
                alias.name.split(".")[0]
                for node in ast.walk(ast.parse(MODULES[name].read_text()))
                if isinstance(node, ast.Import) for alias in node.names
            } | {
                node.module.split(".")[0]
                for node in ast.walk(ast.parse(MODULES[name].read_text()))
                if isinstance(node, ast.ImportFrom) and node.module
            }  # fmt: skip
            assert not top & {"tensorflow", "keras"}, name


def test_the_lazy_public_names_are_the_type_checking_imports():
    """``fcn.__init__`` names each public name twice, for static tools (its TYPE_CHECKING
    imports) and for loading on first use (``_PUBLIC``): the two agree, and every name loads."""
    import fcn

    tree = ast.parse(MODULES["fcn"].read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If))
    imported = {
        alias.name: node.module if node.module != "fcn" else f"fcn.{alias.name}"
        for node in block.body for alias in node.names
    }  # fmt: skip
    assert imported == fcn._PUBLIC
    assert set(fcn.__all__) == {"__version__", *imported}
    for name in fcn.__all__:
        assert getattr(fcn, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        fcn.trian  # noqa: B018


def test_no_import_circle():
    graph = {
        name: {m for _, m in fcn_imports(ast.parse(path.read_text()), name)} & set(MODULES)
        for name, path in MODULES.items()
    }
    graph["fcn"] = set()  # the package's own __init__ re-exports; it is the top, not a node

    def path_back(start: str) -> list[str] | None:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    return [*trail, start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
        return None

    circles = [c for name in graph if name != "fcn" and (c := path_back(name))]
    assert not circles, circles[0]


@pytest.mark.parametrize("name", sorted(set(MODULES) - LAZY_FOR_SPEED))
def test_no_fcn_import_inside_a_function(name):
    tree = ast.parse(MODULES[name].read_text())
    hidden = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node, _ in fcn_imports(function, name)
    ]
    assert not hidden, hidden


def test_no_module_imports_the_test_support():
    """``fcn.testing`` serves the tests, benchmarks and notebooks; the library never needs it."""
    importers = [
        name for name, path in MODULES.items()
        if "fcn.testing" in {m for _, m in fcn_imports(ast.parse(path.read_text()), name)}
    ]  # fmt: skip
    assert not importers, importers


def test_the_training_wing_re_exports_nothing():
    """``fcn.training.train`` stays the module; ``fcn.train`` is the function."""
    tree = ast.parse(MODULES["fcn.training"].read_text())
    assert not [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


MAX_FUNCTION_LINES = 80
"""The most lines a function or method of ``fcn`` may span from its first statement after the
docstring to its last line: the signature and the docstring document it and are not counted,
nested functions count in the function that holds them (and on their own). A longer one is
split into named steps."""


def body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after ``function``'s docstring to its last line."""
    body = function.body
    if ast.get_docstring(function, clean=False) is not None and len(body) > 1:
        body = body[1:]
    return function.end_lineno - body[0].lineno + 1


def test_body_lines_counts_the_body_without_signature_and_docstring():
    function = ast.parse('def f(\n    a,\n):\n    """Doc.\n\n    More."""\n    x = a\n\n'
                         '    return x\n').body[0]  # fmt: skip
    assert body_lines(function) == 3


def test_no_function_is_over_80_lines():
    """Issue 43: a function a newcomer can change fits on a screen or two."""
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({body_lines(node)} lines)"
        for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and body_lines(node) > MAX_FUNCTION_LINES
    ]  # fmt: skip
    assert not long, f"over {MAX_FUNCTION_LINES} lines, split into named steps: {long}"
