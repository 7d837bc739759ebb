"""Profile the compiled kernels with Linux ``perf``, by function.

numba's cached kernels are loaded as object code into anonymous memory, so ``perf`` sees their
samples as bare addresses. This script runs one setting once (to load every kernel), writes
``/tmp/perf-<pid>.map`` (the file ``perf report`` reads for JIT code) from the symbol tables of
the cached objects, then records its own process with ``perf record`` over ``--repeat`` more runs
and prints the share of samples per function (numba's mangled names shortened to
``module.function``). ``NRT_incref`` / ``NRT_decref`` (numba's reference counting, compiled at
start-up, not cached) are named from their addresses too.

    python scripts/perf_kernels.py --repeat 5 -- workload=mooncake policy=gandalf \
        model=qwen3_next_80b_a3b cache.chunk_tokens=512 hardware.dram_bytes=26GB hardware.ssd_bytes=263GB

Needs ``perf`` on PATH and the compiled engine built (``cache.engine=numba`` is added). Samples
of functions inlined into others count in their callers. A developer's tool: no test runs it.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig

PACKAGE = Path(cluster_sim.__file__).resolve().parent


def _elf_functions(obj: bytes):
    """(name, section, offset, size, binding) of each sized function symbol of an ELF64 object."""
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    for _name, kind, _flags, _addr, off, size, link, _info, _align, entsize in sections:
        if kind != 2:                       # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for k in range(size // entsize):
            name, info, _other, shndx, value, sym_size = struct.unpack_from("<IBBHQQ", obj, off + k * entsize)
            if info & 0xF == 2 and sym_size:        # STT_FUNC
                end = obj.index(b"\0", strtab + name)
                yield obj[strtab + name:end].decode(), shndx, value, sym_size, info >> 4


def short_name(mangled: str) -> str:
    """``module.function`` of a numba symbol (Itanium-style nested name, without its signature);
    a C-callable (``cfunc.``) or Python (``cpython``) wrapper keeps that as a prefix."""
    prefix = ""
    if mangled.startswith("cfunc."):
        prefix, mangled = "cfunc.", mangled[len("cfunc."):]
    elif mangled.startswith("_ZN7cpython"):
        prefix, mangled = "cpython.", "_ZN" + mangled[len("_ZN7cpython"):]
    if not mangled.startswith("_ZN"):
        return prefix + mangled[:80]
    i, parts = 3, []
    while i < len(mangled) and mangled[i].isdigit():
        j = i
        while mangled[j].isdigit():
            j += 1
        n = int(mangled[i:j])
        parts.append(mangled[j:j + n])
        i = j + n
    return prefix + ".".join(parts)


def write_perf_map() -> int:
    """Write /tmp/perf-<pid>.map for the kernels this process loaded from numba's caches under the
    package (or ``$NUMBA_CACHE_DIR``); returns the number of symbols."""
    from numba.core.registry import cpu_target

    engine = cpu_target.target_context.codegen()._engine
    roots = [Path(os.environ["NUMBA_CACHE_DIR"])] if os.environ.get("NUMBA_CACHE_DIR") else [PACKAGE]
    rows = []
    for root in roots:
        for path in root.rglob("*.nbc"):
            data = path.read_bytes()
            start = data.find(b"\x7fELF")
            if start < 0:
                continue
            funcs = list(_elf_functions(data[start:]))
            # where the object's text was loaded: from its Python entry points (unique to it)
            bases = collections.Counter()
            for name, sec, value, _size, binding in funcs:
                if binding == 1 and name.startswith("_ZN7cpython"):
                    addr = engine.get_function_address(name)
                    if addr:
                        bases[(sec, addr - value)] += 1
            base = {}
            for (sec, b), _n in bases.most_common():
                base.setdefault(sec, b)
            rows += [(base[sec] + value, size, short_name(name)) for name, sec, value, size, _b in funcs if sec in base]
    for name in ("NRT_incref", "NRT_decref"):
        addr = engine.get_function_address(name)
        if addr:
            rows.append((addr, 16, name))
    rows.sort()
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as fh:
        fh.writelines(f"{a:x} {s:x} {n}\n" for a, s, n in rows)
    return len(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="runs recorded (after one unrecorded run)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", default="/tmp/cluster_sim_perf.data")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        raise SystemExit("perf_kernels: perf is not on PATH")
    cfg = cluster_sim.compose(list(args.overrides) + ["cache.engine=numba", "tracking.enabled=false"])
    trace, _, _ = prepare(SimConfig.from_mapping(cfg))
    cluster_sim.run(cfg, trace=trace, write=False)           # loads (or builds) every kernel
    print(f"perf map: {write_perf_map()} symbols", file=sys.stderr)
    rec = subprocess.Popen(["perf", "record", "-F", "2000", "-p", str(os.getpid()), "-o", args.out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    walls = []
    for _ in range(args.repeat):
        s = cluster_sim.run(cfg, trace=trace, write=False)
        walls.append(s.fleet["sim_wall_s"])
    rec.send_signal(signal.SIGINT)
    rec.wait()
    print(f"sim_wall_s per run: {', '.join(f'{w:.3f}' for w in walls)}")
    report = subprocess.run(["perf", "report", "-i", args.out, "--stdio", "--sort", "sym"],
                            capture_output=True, text=True).stdout
    share = collections.Counter()
    for line in report.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+\[.\]\s+(\S+)", line)
        if m:
            share[m.group(2)] += float(m.group(1))
    for name, pct in share.most_common(args.top):
        print(f"{pct:6.2f}%  {name}")


if __name__ == "__main__":
    main()
