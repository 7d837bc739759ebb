#!/usr/bin/env python
"""Regenerate the bundled default trace ``traces/default.parquet``.

    python scripts/make_default_trace.py [--out PATH] [--seed N]

Writes the synthetic workload of ``cluster_sim.trace.synthetic.default_spec()``
with seed 0 and prints its statistics. ``tests/test_synthetic.py`` checks that
the committed file equals a fresh generation, so rerun this script whenever a
change to the generator or the default spec is deliberate.
"""
from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from cluster_sim.trace.parquet import read_parquet, write_parquet
from cluster_sim.trace.schema import trace_stats
from cluster_sim.trace.synthetic import default_spec, generate

DEFAULT_OUT = ROOT / "traces" / "default.parquet"
DEFAULT_SEED = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output Parquet file")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed (the bundled trace uses 0)")
    args = parser.parse_args(argv)

    table = generate(default_spec(), args.seed)
    write_parquet(table, args.out)
    back = read_parquet(args.out)  # the file must read back as the table we wrote
    assert back.equals(table), "round trip through Parquet changed the table"

    s = trace_stats(table)
    categories = table.column("category").combine_chunks().dictionary_decode().value_counts().to_pylist()
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes), seed {args.seed}")
    print(f"  requests          {s['requests']:,}")
    by_cat = ", ".join(f"{c['values']} {c['counts']:,}" for c in categories)
    print(f"  sessions          {s['sessions']:,}  (requests by category: {by_cat})")
    print(f"  span              {s['span_s']:,.1f} s ({s['span_s'] / 60:.1f} min)")
    print(f"  block tokens      {s['block_tokens']}")
    print(f"  block references  {s['block_references']:,}")
    print(f"  unique blocks     {s['unique_blocks']:,}")
    print(f"  reuse fraction    {s['reuse_fraction']:.3f}")
    print(f"  input tokens      p50 {s['input_tokens_p50']:,.0f}, mean {s['input_tokens_mean']:,.0f}")
    print(f"  output tokens     mean {s['output_tokens_mean']:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
