"""The engine's kernels are compiled once per argument type, not once per constant (decision 133).

numba types a constant argument (a module constant such as ``SSD``, a number, ``True``) as a
literal and compiles a separate copy of a non-inlined kernel for each literal value it is
called with, and of every kernel that copy calls with it. Calls pass such values as runtime
values (``np.int64(SSD)``, ``np.bool_(True)``). This test reads the source, so it costs no
compilation: no argument of a non-inlined kernel may arrive both as a constant and as something
else, directly or through inlined helpers that pass their arguments on."""
from __future__ import annotations

import ast
from pathlib import Path

import cluster_sim.engine._jit as J

SRC = "".join((Path(J.__file__).parent / f"{m}.py").read_text() for m in ("layout", "queue", "residency", "walk", "cascade", "step"))
#: each policy's kernel module, with the core's hook calls (``H.select(...)``) read as calls of the
#: module's own function of that name: what numba compiles for that policy
_POLICIES = Path(J.__file__).resolve().parent.parent / "policies"
KERNEL_FILES = sorted(_POLICIES.glob("*/kernels.py")) + [_POLICIES / "gandalf" / "strict.py"]


def _with_policy(path: Path) -> str:
    return SRC.replace("H.", "") + "\n" + path.read_text()


def _kernels(tree):
    """name -> (inlined?, parameter names, the function's node) for the module's njit functions."""
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        jit = [d for d in node.decorator_list if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "njit"]
        if jit:
            inlined = any(k.arg == "inline" and getattr(k.value, "value", None) == "always" for k in jit[0].keywords)
            out[node.name] = (inlined, [a.arg for a in node.args.args], node)
    return out


def _module_constants(tree) -> set[str]:
    """Names bound at module level to numbers (``SSD``, ``HBM, DRAM, SSD = 0, 1, 2``, ...)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.Tuple, ast.BinOp)):
            for t in node.targets:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _kind(arg, consts, params, arriving):
    """What numba types an argument as: a literal (the constant's text), a runtime value ("var"),
    or, for a parameter of an inlined helper, whatever its callers pass (``arriving``)."""
    if isinstance(arg, ast.Constant) or (isinstance(arg, ast.UnaryOp) and isinstance(arg.operand, ast.Constant)):
        return {ast.unparse(arg)}
    if isinstance(arg, ast.Name) and arg.id in consts:
        return {arg.id}
    if isinstance(arg, ast.Name) and arg.id in params:
        return arriving.get(params[arg.id], {"var"})
    return {"var"}


def _literal_calls(src: str) -> list[str]:
    """The (kernel, argument) pairs that reach a non-inlined kernel both as a literal and as
    something else (another literal, or a runtime value): each is one more compiled copy."""
    tree = ast.parse(src)
    k = _kernels(tree)
    consts = _module_constants(tree)
    kinds: dict[tuple[str, int], set] = {}      # (function, argument position) -> kinds arriving
    grew = True
    while grew:
        grew = False
        for caller, (inl, params, node) in k.items():
            # an inlined helper's parameters are its callers' arguments; a kernel's are its own
            pmap = {name: (caller, i) for i, name in enumerate(params)} if inl else {}
            arriving = {key: v for key, v in kinds.items() if key[0] == caller}
            for c in ast.walk(node):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in k:
                    for i, a in enumerate(c.args):
                        got = _kind(a, consts, pmap, arriving)
                        have = kinds.setdefault((c.func.id, i), set())
                        if not got <= have:
                            have |= got
                            grew = True
    bad = []
    for (name, i), v in sorted(kinds.items()):
        literals = v - {"var"}
        if not k[name][0] and literals and len(v) > 1:
            bad.append(f"{name} argument {i} ({k[name][1][i]}): {sorted(v)}")
    return bad


def test_no_kernel_argument_arrives_both_as_a_constant_and_as_anything_else():
    assert len(KERNEL_FILES) >= 10
    for path in KERNEL_FILES:
        assert _literal_calls(_with_policy(path)) == [], path


def test_the_check_finds_a_constant_passed_to_a_kernel_directly_or_through_an_inlined_helper():
    direct = SRC.replace("_walk(S, np.int64(HBM), need, act, vict, acts)", "_walk(S, HBM, need, act, vict, acts)", 1)
    assert direct != SRC and _literal_calls(direct) == ["_walk argument 1 (t): ['HBM', 'var']"]
    through = SRC.replace("_drop_all(S, np.int64(SSD), vict)", "_drop_all(S, SSD, vict)", 1)
    assert through != SRC and "_remove_many argument 1 (t): ['SSD', 'var']" in _literal_calls(through)
