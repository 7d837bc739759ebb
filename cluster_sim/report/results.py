"""A study's results: ``results.md`` (its generated sections rewritten, the prose around them kept),
``results.json`` and the figures, from the study folder (``study_report``)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .study import GB, analyse, load_study
from .study_figures import fig_alpha, fig_capacity, fig_fleet, fig_frontier, fig_latency_cost, fig_models, fig_where
from .tables import md_capacity, md_e2e, md_fleet, md_investigate, md_models, md_points, md_side_by_side, md_where


# --------------------------------------------------------------------------- docs

SKELETON = """# The paper's study on real traces

<!-- BEGIN GENERATED: provenance -->
<!-- END GENERATED: provenance -->

## Side by side with the paper

<!-- BEGIN GENERATED: side_by_side -->
<!-- END GENERATED: side_by_side -->

## 1. End-to-end (§5.2)

<!-- BEGIN GENERATED: e2e -->
<!-- END GENERATED: e2e -->

## 2. Capacity ratio (§5.3)

<!-- BEGIN GENERATED: capacity -->
<!-- END GENERATED: capacity -->

## 3. α sensitivity (§5.4)

<!-- BEGIN GENERATED: alpha -->
<!-- END GENERATED: alpha -->

## 4. Model sensitivity (§5.5)

<!-- BEGIN GENERATED: models -->
<!-- END GENERATED: models -->

## 5. Where the improvement comes from (§5.6)

<!-- BEGIN GENERATED: where -->
<!-- END GENERATED: where -->

## 6. Latency and cost (§5.8)

<!-- BEGIN GENERATED: latency_cost -->
<!-- END GENERATED: latency_cost -->

## Where the reconstruction falls short: one knob at a time

<!-- BEGIN GENERATED: investigate -->
<!-- END GENERATED: investigate -->

## 7. Fleet (beyond the paper)

<!-- BEGIN GENERATED: fleet -->
<!-- END GENERATED: fleet -->

## Points and timings

<!-- BEGIN GENERATED: points -->
<!-- END GENERATED: points -->
"""


def write_sections(md_path: Path, sections: dict[str, str]) -> None:
    text = md_path.read_text() if md_path.exists() else SKELETON
    for name, body in sections.items():
        pat = re.compile(rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: {name} -->)", re.S)
        if pat.search(text):
            text = pat.sub(lambda m: m.group(1) + body.strip() + "\n" + m.group(2), text)
        else:
            text += f"\n<!-- BEGIN GENERATED: {name} -->\n{body.strip()}\n<!-- END GENERATED: {name} -->\n"
    md_path.write_text(text)


def study_report(path: str | Path, docs: str | Path | None = None) -> dict:
    """Tables and figures of a study folder: ``results.md`` (its generated sections rewritten,
    the prose around them kept), ``results.json`` and ``figures/*.png`` in the folder, or, with
    ``docs`` (a results.md to rewrite), the figures in ``figures/`` beside that file."""
    from ..model import load_model

    root = Path(path)
    st = load_study(root)
    m = st.manifest
    traces_info = st.traces
    ws = dict(m.get("working_sets_bytes") or {})
    A = analyse(st, traces_info, ws)
    spec = load_model(st.main_model)
    derived = {"kv_bytes_per_token_full": spec.kv_bytes_per_token_full, "linear_state_bytes": spec.linear_state_bytes}
    md = Path(docs) if docs else root / "results.md"
    fig_dir = md.parent / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    figs = {}
    for t in traces_info:
        figs[f"frontier_{t}"] = fig_frontier(st, t, traces_info[t]["title"], fig_dir / f"frontier_{t}.png")
        if st.a10 and st.a40:
            figs[f"frontier_abs_{t}"] = fig_frontier(st, t, traces_info[t]["title"] + ", paper's absolute sizes",
                                                     fig_dir / f"frontier_abs_{t}.png", (st.a10, st.a40))
    figs["alpha"] = fig_alpha(st, traces_info, fig_dir / "alpha.png")
    figs["capacity"] = fig_capacity(st, traces_info, fig_dir / "capacity.png")
    figs["models"] = fig_models(st, traces_info, fig_dir / "models.png")
    figs["where"] = fig_where(st, traces_info, derived, fig_dir / "where.png")
    figs["latency_cost"] = fig_latency_cost(st, traces_info, fig_dir / "latency_cost.png")
    figs["fleet"] = fig_fleet(st, traces_info, fig_dir / "fleet.png")
    figs = {k: v for k, v in figs.items() if v}

    def img(k, alt):
        if k not in figs:
            return ""
        return f"\n![{alt}]({os.path.relpath(figs[k], md.parent)})\n"

    wss = ", ".join(f"{k.replace('|', ' / ')} {v / GB:,.0f} GB" for k, v in sorted(ws.items()))
    dirty = m.get("dirty") or []
    dnote = (f" The working tree had uncommitted changes to {', '.join(dirty)} when it ran (the numbers are "
             "those of that tree)." if dirty else "")
    point_s = sum(p.result["wall_s"] for p in st)
    sec = {
        "provenance": f"{m.get('mode_note', '')} Git sha `{str(m.get('git_sha', 'unknown'))[:10]}`{dnote} "
                      f"{len(st)} points, {float(m.get('wall_s', 0.0)) / 60:.1f} min wall for the last invocation "
                      f"({point_s / 60:.1f} min of simulation time; points reused with `--resume` count their "
                      f"original time).\n\nWorking sets W: {wss}.",
        "side_by_side": md_side_by_side(A, st, derived),
        "e2e": "\n".join(img(f"frontier_{t}", f"frontier {t}") for t in traces_info) +
               "\n".join(img(f"frontier_abs_{t}", f"frontier abs {t}") for t in traces_info) +
               "\n".join(md_e2e(st, A, t) for t in traces_info),
        "capacity": img("capacity", "capacity") + "\n" + md_capacity(st, A),
        "alpha": img("alpha", "alpha"),
        "models": img("models", "models") + "\n" + md_models(st, A),
        "where": img("where", "where") + "\n" + md_where(st, A, derived),
        "latency_cost": img("latency_cost", "latency and cost"),
        "fleet": img("fleet", "fleet") + "\n" + md_fleet(st, A),
        "points": md_points(st, A),
        "investigate": md_investigate(st, A),
    }
    write_sections(md, sec)
    results = {"mode": m.get("mode"), "analysis": A, "figures": {k: str(v) for k, v in figs.items()},
               "points": [{"key": p.key, "exps": sorted(p.exps), "overrides": p.overrides, "wall_s": p.result["wall_s"],
                           "fleet": p.result["fleet"]} for p in st]}
    (root / "results.json").write_text(json.dumps(results, indent=1, default=float))
    results["markdown"] = str(md)
    results["sections"] = sec
    return results
