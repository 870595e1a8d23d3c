"""The package's import graph: no cycles between modules or packages, packages import only
downwards (docs/architecture.md draws the same layers), and no imports hidden in functions
to dodge either.

A function-level import of a harness module is allowed only in the command-line entry
points, where it keeps `xfrbench --help` from loading pydantic, matplotlib and the servers.
"""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
LAZY_ALLOWED = {
    "harness.cli",
    "harness.report.cli",
    "harness.compare.cli",
    "harness.linktest.cli",
    "harness.capacity.cli",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(HARNESS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in HARNESS.rglob("*.py")}


def _imported(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The harness modules an import statement loads (a submodule, not its package, for
    `from harness.pkg import submodule`)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.level or not node.module or node.module not in MODULES:
        return set()
    subs = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
    return subs | ({node.module} if len(subs) < len(node.names) else set())


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(modules imported at the top level, modules imported inside functions)."""
    top: set[str] = set()
    lazy: set[str] = set()
    for statement in ast.parse(path.read_text()).body:
        if _is_type_checking(statement):
            continue
        deferred = isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        for node in ast.walk(statement):
            if isinstance(node, ast.Import | ast.ImportFrom):
                (lazy if deferred else top).update(_imported(node))
    return top, lazy


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = {name: imports(path)[0] for name, path in MODULES.items()}
    assert cycles(graph) == []


def test_harness_modules_are_imported_at_the_top_outside_the_entry_points() -> None:
    hidden = {
        name: sorted(lazy)
        for name, path in MODULES.items()
        if name not in LAZY_ALLOWED and (lazy := imports(path)[1])
    }
    assert hidden == {}


# Bottom to top: a package may import the packages of lower layers, never of its own or a
# higher one. The root package (its version) may be imported by any. The order is a design,
# each layer's reason beside it (docs/architecture.md says the same at more length): DNS
# below the servers, the servers below what a user asks of them, the plan of a case below
# the places that build it, the record below whoever makes or reads it.
LAYERS: list[set[str]] = [
    {"core"},  # words every stage shares; knows no DNS, no server, no scenario
    {"zonegen", "xfr"},  # DNS itself: zones; transfers and digests from a client's side
    {"servers"},  # each server, in DNS terms: it serves zones, knows no scenario or host
    {"spec"},  # what a user writes: it names servers, so it is checked against them
    {"link", "observe"},  # the physics around a server: link models, probes of processes
    {"place"},  # where a server runs, as the case engine asks of it: one interface, any host
    {"plan"},  # pure: a case as what to build and run, before anything is built
    {"testbed"},  # namespaces built from a plan's endpoints: the seam other hosts plug into
    {"compose", "lab", "inventory"},  # the other places servers run
    {"results"},  # the record: written and read here only; case.json comes from a plan
    {"measure", "metrics", "report", "compare"},  # records made; records read back
    {"remote"},  # real hosts as places, through an agent each (it runs measure's probes)
    {"run"},  # a run end to end: it chooses the backend, so it sits above them all
    {"commands", "linktest", "capacity"},  # the subcommands beside run
    {"cli"},  # the entry point
    {"__main__"},  # python -m harness
]
LAYER_OF = {package: index for index, layer in enumerate(LAYERS) for package in layer}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module imports folded into package imports (the root package left out)."""
    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        source = package_of(module)
        targets = {package_of(t) for t in imported} - {source, ""}
        out.setdefault(source, set()).update(targets)
    return out


def upward(packages: dict[str, set[str]]) -> list[str]:
    """Every import that does not go down a layer (or names an unknown package)."""
    wrong = []
    for source, targets in sorted(packages.items()):
        for target in sorted(targets):
            if source not in LAYER_OF or target not in LAYER_OF:
                wrong.append(f"{source} -> {target}: a package missing from LAYERS")
            elif LAYER_OF[target] >= LAYER_OF[source]:
                wrong.append(f"{source} -> {target}: not below it")
    return wrong


def test_the_package_checker_sees_a_planted_cycle_and_an_upward_import() -> None:
    planted = {
        "harness.results.store": {"harness.report.data", "harness.core.errors"},
        "harness.report.data": {"harness.results.store"},
    }
    packages = package_graph(planted)
    assert cycles(packages) == [["report", "results"]]
    assert upward(packages) == ["results -> report: not below it"]
    assert upward({"zonegen": {"core"}, "core": set()}) == []


def test_packages_import_only_downwards_and_form_no_cycle() -> None:
    every = {name: top | lazy for name, path in MODULES.items() for top, lazy in [imports(path)]}
    packages = package_graph(every)
    assert cycles(packages) == []
    assert upward(packages) == []
    assert set(packages) <= set(LAYER_OF) | {""}


# The run folder's own files (results/folder.py names them): only results/ spells their
# names, so a file of the run folder is opened for writing nowhere else. Server working
# folders under cases/ (configs, logs) are their dialect's and the process runner's.
RUN_FOLDER_FILES = {
    "run.json",
    "transfers.jsonl",
    "samples.jsonl",
    "summary.json",
    "summary.csv",
    "case.json",
    "metrics.om",
    "report.html",
}


def run_folder_names(path: Path) -> set[str]:
    """The run folder's file names a module spells as string constants (docstrings and
    f-strings' literal parts count too: a path built from a name is still that name)."""
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for name in RUN_FOLDER_FILES
        if node.value == name or node.value.endswith("/" + name)
    }


def test_the_checker_sees_a_run_folder_file_spelt_elsewhere(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Writes case.json."""\nOUT = "cases/x/case.json"\nA = "run.json"\n')
    assert run_folder_names(module) == {"run.json", "cases/x/case.json"}


def test_only_results_names_the_run_folder_files() -> None:
    spelt = {
        name: sorted(found)
        for name, path in MODULES.items()
        if package_of(name) != "results" and (found := run_folder_names(path))
    }
    assert spelt == {}


# docs/architecture.md: the runner, the flows, the plan and the report never name a server
# kind; they ask the dialect (harness/servers/). A kind spelt as a string there is a
# decision made outside its dialect.
KINDS = {"bind", "knot", "nsd", "pdns"}
KIND_BLIND = {"plan", "results", "measure", "report", "compare", "run", "metrics"}


def test_the_plan_the_flows_and_the_report_never_name_a_server_kind() -> None:
    named = {
        name: sorted(found)
        for name, path in MODULES.items()
        if package_of(name) in KIND_BLIND
        for found in [
            {
                node.value
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and node.value in KINDS
            }
        ]
        if found
    }
    assert named == {}


def test_the_case_engine_reaches_hosts_only_through_the_place_interface() -> None:
    """measure/ (LiveCase and its helpers) imports no host backend: a namespace, a
    container or an agent's host is a `place.Place` handed to it (docs/architecture.md)."""
    backends = {"testbed", "compose", "lab", "inventory", "remote"}
    reaching = {
        name: sorted(package_of(t) for t in top | lazy if package_of(t) in backends)
        for name, path in MODULES.items()
        if package_of(name) == "measure"
        for top, lazy in [imports(path)]
    }
    assert {name: found for name, found in reaching.items() if found} == {}
