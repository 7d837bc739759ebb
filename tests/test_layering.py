"""The package's internal layering (docs/design.md "Layers"), function-local imports included.

Every module of ``cluster_sim`` sits in one layer; it may import only modules of its own layer
or below, and the import graph has no cycle. The simulation core (cache, model, trace, metrics,
node, policies) never reaches the settings, the runners or the edges (config, api, cli, sweep,
tracking, report, distributed, fleet, router), and no policy imports the node. The test parses
the sources (``ast``), so an import inside a function counts as much as one at the top.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "cluster_sim"

ENGINE_CORE = tuple(f"cluster_sim.engine.{m}" for m in
                    ("hooks", "layout", "adapter", "queue", "residency", "walk", "cascade", "step", "_jit"))

# lowest first; a module's layer is that of its longest matching prefix
LAYERS: list[tuple[str, ...]] = [
    ("cluster_sim.errors", "cluster_sim.units", "cluster_sim._version", "cluster_sim._ftl_ops", "cluster_sim.locations", "cluster_sim.jit_timing",
     "cluster_sim.libm",
     "cluster_sim._nrt"),
    ("cluster_sim.model", "cluster_sim.settings", "cluster_sim.cost", "cluster_sim.ftl", "cluster_sim._ftl_jit", "cluster_sim.cache", "cluster_sim.trace"),
    ("cluster_sim.metrics",),
    # the compiled engine's core (the kernels and the hooks a policy's kernels implement): below the
    # policies, which build on it; the engine's Python side (the package) is above them
    ENGINE_CORE,
    ("cluster_sim.policies",),
    ("cluster_sim.node", "cluster_sim.engine"),
    ("cluster_sim.router", "cluster_sim.fleet", "cluster_sim.config", "cluster_sim.schema_store", "cluster_sim.capacity",
     "cluster_sim.outputs", "cluster_sim.signals"),
    ("cluster_sim.distributed", "cluster_sim.tracking", "cluster_sim.api", "cluster_sim.trace_cli"),
    ("cluster_sim.report", "cluster_sim.sweep", "cluster_sim.cli", "cluster_sim.study", "cluster_sim"),
]
CORE = ("cluster_sim.cache", "cluster_sim.model", "cluster_sim.settings", "cluster_sim.cost", "cluster_sim._version",
        "cluster_sim._ftl_ops", "cluster_sim._nrt", "cluster_sim.libm", "cluster_sim.trace", "cluster_sim.metrics", "cluster_sim.node", "cluster_sim.engine",
        "cluster_sim.policies", "cluster_sim.ftl", "cluster_sim._ftl_jit", "cluster_sim.units", "cluster_sim.errors")
EDGES = ("cluster_sim.config", "cluster_sim.api", "cluster_sim.cli", "cluster_sim.sweep", "cluster_sim.tracking",
         "cluster_sim.report", "cluster_sim.distributed", "cluster_sim.fleet", "cluster_sim.router")


def _under(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def layer_of(mod: str) -> int:
    best, where = -1, None
    for i, names in enumerate(LAYERS):
        for p in names:
            # the package itself is a layer of one module: its submodules must be placed
            if (mod == p or (p != "cluster_sim" and _under(mod, p))) and len(p) > best:
                best, where = len(p), i
    if where is None:
        raise AssertionError(f"{mod} is in no layer of tests/test_layering.py: place it")
    return where


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> set[str]:
    """The cluster_sim modules ``path`` imports anywhere in its body (``from pkg import sub``
    counts as importing ``pkg.sub`` when that is a module, else ``pkg``)."""
    mod = module_name(path, root)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if _under(a.name, "cluster_sim"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not _under(target, "cluster_sim"):
                continue
            for a in node.names:
                sub = target + "." + a.name
                rel = Path(*sub.split("."))
                if (root.parent / rel).with_suffix(".py").exists() or (root.parent / rel / "__init__.py").exists():
                    out.add(sub)
                else:
                    out.add(target)
    out.discard(mod)
    return out


def import_graph(root: Path = PKG) -> dict[str, set[str]]:
    return {module_name(f, root): imports_of(f, root) for f in sorted(root.rglob("*.py"))}


def violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        for d in sorted(deps):
            if layer_of(d) > layer_of(mod):
                bad.append(f"upward: {mod} (layer {layer_of(mod)}) imports {d} (layer {layer_of(d)})")
            if any(_under(mod, c) for c in CORE) and any(_under(d, e) for e in EDGES):
                bad.append(f"core -> edge: {mod} imports {d}")
            if _under(mod, "cluster_sim.policies") and _under(d, "cluster_sim.node"):
                bad.append(f"policy -> node: {mod} imports {d}")
    return bad


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_upward_import_and_no_cycle():
    graph = import_graph()
    assert len(graph) > 40
    assert violations(graph) == []
    assert cycles(graph) == []


def test_the_package_never_imports_the_hydra_plugin():
    """The plugin (hydra_plugins/cluster_sim_ray_launcher) sits above the package: it may import
    cluster_sim, never the other way round (that was a cycle through cli.py)."""
    for f in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.startswith("hydra_plugins.") for n in names), f"{f.relative_to(PKG)} imports {names}"


def test_every_module_has_a_layer():
    for mod in import_graph():
        layer_of(mod)
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("cluster_sim.newly_added")


def _plant(tmp_path: Path, rel: str, line: str) -> Path:
    """A copy of the package with ``line`` appended inside a function of ``rel``."""
    import shutil

    root = tmp_path / "cluster_sim"
    shutil.copytree(PKG, root, ignore=shutil.ignore_patterns("__pycache__"))
    f = root / rel
    f.write_text(f.read_text() + f"\n\ndef _planted():\n    {line}\n")
    return root


@pytest.mark.parametrize("rel, line, expect", [
    ("policies/lru/__init__.py", "from ...node import NodeSim", "policy -> node"),
    ("trace/chunks.py", "from cluster_sim.config import SimConfig", "core -> edge"),
    ("cache/state.py", "import cluster_sim.metrics", "upward"),
    ("node.py", "from .fleet import run_fleet", "core -> edge"),
])
def test_a_planted_upward_import_is_caught_even_inside_a_function(tmp_path, rel, line, expect):
    bad = violations(import_graph(_plant(tmp_path, rel, line)))
    assert any(b.startswith(expect) for b in bad), bad


def test_a_planted_cycle_is_caught(tmp_path):
    # trace.files is imported by trace.load; importing load back closes a cycle within one layer
    root = _plant(tmp_path, "trace/files.py", "from .load import load_workload")
    assert ["cluster_sim.trace.files", "cluster_sim.trace.load"] in [
        [m for m in c if m in ("cluster_sim.trace.files", "cluster_sim.trace.load")] for c in cycles(import_graph(root))]


# ---------------------------------------------------------------- policies decide, the node moves
MUTATORS = {"touch", "touch_one", "compact_log", "add_copy", "remove_copy", "remove_copies", "add_copies",
            "add_path_fa", "add_state", "take_events", "check_invariants"}


def _rooted_at_state(node) -> bool:
    """``st.x``, ``self.st.x``, ``ctx.state.x`` (and subscripts of them)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        inner = node.value
        if isinstance(node, ast.Attribute):
            if isinstance(inner, ast.Name) and inner.id == "st":
                return True
            if isinstance(inner, ast.Attribute) and inner.attr in ("st", "state"):
                return True
        node = inner
    return False


def state_writes(root: Path = PKG) -> list[str]:
    """Every place a policy stores into the node's CacheState or calls one of its mutators."""
    out = []
    for f in sorted((root / "policies").rglob("*.py")):      # a policy is a folder (decision 156)
        for n in ast.walk(ast.parse(f.read_text())):
            targets = n.targets if isinstance(n, ast.Assign) else \
                [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, (ast.Attribute, ast.Subscript)) and _rooted_at_state(el):
                        out.append(f"{f.relative_to(root)}:{n.lineno}: {ast.unparse(el)} = ...")
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATORS \
                    and _rooted_at_state(ast.Attribute(value=n.func.value, attr="_", ctx=ast.Load())):
                out.append(f"{f.relative_to(root)}:{n.lineno}: {ast.unparse(n)}")
    return out


def test_no_policy_writes_the_cache_state():
    assert state_writes() == []


@pytest.mark.parametrize("line", ["self.st.pin[3] = 0", "st = self.st; st.shortfall = 5", "self.st.touch_one(4)",
                                  "self.ctx.state.used[1] += 9"])
def test_a_planted_state_write_is_caught(tmp_path, line):
    root = _plant(tmp_path, "policies/lru/__init__.py", line)
    assert len(state_writes(root)) == 1
