"""Import cycles and wrong-way imports between the project's modules; exit status 1 on any.

    python tools/import_cycles.py [ROOT]

Reads the ``import`` statements (``ast``, nothing is imported) of every module under
``metrics/``, ``assets/`` and ``orchestration/``, those inside functions too: a deferred
import still makes two modules depend on each other. Imports under ``if TYPE_CHECKING:``
never run, so they make no cycle, but they must point the right way like any other.
``from package import name`` depends on ``package.name`` when that is a module, else on the
package itself; importing ``a.b.c`` is not counted as depending on ``a`` and ``a.b``.

Prints each cycle (``a -> b -> a``, each module with the line of its import of the next; for
modules that all reach each other, a shortest cycle and the list of them) and each import
that points the wrong way: the layers are ``orchestration -> assets -> metrics``, so
``metrics`` imports neither of the others and ``assets`` does not import ``orchestration``.
"""
from __future__ import annotations

import ast
import sys
from collections import deque
from pathlib import Path

#: The project's top-level packages, each allowed to import those after it.
LAYERS = ("orchestration", "assets", "metrics")
#: The import package the folders install as (pyproject.toml's package-dir): metrics/ is rag_eval.metrics.
PACKAGE = "rag_eval"


def module_name(root: Path, path: Path) -> str:
    """``metrics/judges/llm.py`` -> ``rag_eval.metrics.judges.llm``; a package's ``__init__.py`` is the package."""
    parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    """``rag_eval.metrics.judges.llm`` -> ``metrics``."""
    return module.split(".")[1]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(tree: ast.Module, name: str, is_package: bool, modules: set[str]) -> list[tuple[str, int, bool]]:
    """The project modules ``name`` imports: ``(module, line, at run time)``, in file order."""
    found: list[tuple[str, int, bool]] = []
    package = name if is_package else name.rpartition(".")[0]

    def visit(node: ast.AST, runs: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, runs) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    found.append((target if target in modules else base, child.lineno, runs))
            if isinstance(child, ast.If) and _type_checking(child):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), False)
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), runs)
            else:
                visit(child, runs)

    visit(tree, True)
    return [(target, line, runs) for target, line, runs in found if target in modules and target != name]


def graph(root: Path) -> dict[str, list[tuple[str, int, bool]]]:
    """Every module of :data:`LAYERS` under ``root`` with the project modules it imports."""
    paths = {module_name(root, p): p for layer in LAYERS for p in sorted((root / layer).rglob("*.py"))}
    modules = set(paths)
    return {name: imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), name,
                          path.name == "__init__.py", modules) for name, path in paths.items()}


def wrong_way(edges: dict[str, list[tuple[str, int, bool]]]) -> list[str]:
    """``module:line imports target`` for each import of a layer above the importer's."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return [f"{name}:{line} imports {target} ({layer(name)} must not import {layer(target)})"
            for name, targets in edges.items() for target, line, _ in targets
            if rank[layer(target)] < rank[layer(name)]]


def knots(edges: dict[str, list[tuple[str, int, bool]]]) -> list[list[str]]:
    """The strongly connected components of more than one module of the run-time imports
    (Tarjan's algorithm): each module of one reaches every other, so each holds a cycle."""
    after = {name: sorted({t for t, _, runs in targets if runs}) for name, targets in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in after[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(after):
        if name not in index:
            visit(name)
    return sorted(found)


def shortest_cycle(edges: dict[str, list[tuple[str, int, bool]]], knot: list[str]) -> list[tuple[str, int]]:
    """A shortest cycle through the first module of ``knot``, as ``[(module, line of its import of
    the next), ...]`` (breadth first over the knot's run-time imports)."""
    members, start = set(knot), knot[0]
    came: dict[str, tuple[str, int]] = {}
    queue = deque([start])
    while start not in came:
        node = queue.popleft()
        for target, line, runs in edges[node]:
            if runs and target in members and target not in came:
                came[target] = (node, line)
                queue.append(target)
    cycle = [came[start]]
    while cycle[-1][0] != start:
        cycle.append(came[cycle[-1][0]])
    return cycle[::-1]


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1])
    edges = graph(root)
    problems = 0
    for knot in knots(edges):
        problems += 1
        cycle = shortest_cycle(edges, knot)
        print("import cycle: " + " -> ".join(f"{m} (line {line})" for m, line in cycle) + f" -> {cycle[0][0]}"
              + (f"\n  within {len(knot)} modules importing each other: {', '.join(knot)}" if len(knot) > len(cycle)
                 else ""))
    for line in wrong_way(edges):
        problems += 1
        print(f"wrong-way import: {line}")
    print(f"{len(edges)} modules, {sum(len(t) for t in edges.values())} imports: "
          + (f"{problems} problem(s)" if problems else "no cycle, every import points orchestration -> assets -> metrics"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
