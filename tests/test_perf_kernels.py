"""scripts/perf_kernels.py: the names it gives numba's symbols, and the function table it reads from
a cached object (the perf map's source)."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("perf_kernels", ROOT / "scripts" / "perf_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_numba_symbols_are_shortened_to_module_and_function():
    t = _tool()
    mangled = "_ZN11cluster_sim6engine4_jit5_walkB2v1B38c8tJTIeFIjxB2IKSgI4CrvQClQZ6FczSBAA_3dE11EngineState"
    assert t.short_name(mangled) == "cluster_sim.engine._jit._walk"
    assert t.short_name("_ZN7cpython11cluster_sim6engine4_jit6replayB2v1E") == "cpython.cluster_sim.engine._jit.replay"
    assert t.short_name("cfunc._ZN5numba2np4sortE") == "cfunc.numba.np.sort"
    assert t.short_name("NRT_incref") == "NRT_incref"


def test_the_function_table_of_a_cached_kernel_object(tmp_path, monkeypatch):
    numba = pytest.importorskip("numba")
    src = tmp_path / "kmod.py"
    src.write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "nc"))
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "nc"))
    try:
        import kmod
        assert kmod.twice(21) == 42
    finally:
        sys.modules.pop("kmod", None)       # imported for this test only
    objs = [p.read_bytes() for p in (tmp_path / "nc").rglob("*.nbc")]
    assert objs, "numba wrote no cache file"
    data = objs[0]
    t = _tool()
    funcs = list(t._elf_functions(data[data.find(b"\x7fELF"):]))
    names = {t.short_name(n) for n, *_ in funcs}
    assert any(n.endswith("kmod.twice") for n in names), names
    assert all(size > 0 for _n, _s, _v, size, _b in funcs)
