"""The figures of a study (docs/results.md): frontiers, α, capacity split, models, where the SSD
writes went, latency and cost, fleet."""
from __future__ import annotations

from .study import MODEL_POLS, select, where_rows


# --------------------------------------------------------------------------- figures

def _plt_study():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 7.5})
    return plt


FAM_STYLE = {"LRU": ("C0", "s"), "LRU-K": ("C1", "^"), "HotPrefix": ("C2", "v"), "Marconi": ("C4", "D"),
             "Workload-aware": ("C5", "P"), "DynamicRandom": ("C7", "X"), "KVBM filter": ("C8", "p"),
             "oracle": ("k", "*"),
             "gandalf": ("C3", "o"), "gandalf (population)": ("C6", "o"), "gandalf (variant)": ("C9", "h")}


def _style(fam: str) -> tuple[str, str]:
    """(colour, marker) of a policy family; a family the table does not know gets grey circles."""
    return FAM_STYLE.get(fam, ("C8", "o"))


def _life_axis(ax, values):
    v = [x for x in values if x and x > 0]
    if v and max(v) / min(v) >= 10:
        ax.set_yscale("log")
    ax.set_ylabel("SSD lifetime (years, log)" if ax.get_yscale() == "log" else "SSD lifetime (years)")


def _save(fig, path):
    """PNG at 90 dpi, quantised to a 96-colour palette (keeps every figure well under 150 kB)."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image
    buf = io.BytesIO()
    fig.savefig(buf, dpi=90, format="png")
    plt.close(fig)
    buf.seek(0)
    Image.open(buf).convert("RGB").quantize(colors=96, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def fig_frontier(st, t, title, path, sizings=None):
    sizings = sizings or (st.r10, st.r40)
    plt = _plt_study()
    sizings = [sz for sz in sizings if select(st, trace=t, sizing=sz, warmup_s=0.0, model=st.main_model, nodes=1)]
    if not sizings:
        return None
    fig, axes = plt.subplots(1, len(sizings), figsize=(6.2 * len(sizings), 4.6), squeeze=False)
    for ax, sz in zip(axes[0], sizings):
        pts = select(st, trace=t, sizing=sz, warmup_s=0.0, model=st.main_model, nodes=1)
        by: dict = {}
        for p in pts:
            by.setdefault(st.family(p.pol), []).append(p)
        lifes = []
        for fam, ps in by.items():
            c, m = _style(fam)
            ps.sort(key=lambda p: p.result["fleet"]["chunk_miss_ratio"])
            x = [p.result["fleet"]["chunk_miss_ratio"] for p in ps]
            y = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
            lifes += y
            ls = "-" if fam in ("gandalf", "gandalf (population)") else "none"
            ax.plot(x, y, marker=m, ls=ls, color=c, ms=9 if fam == "oracle" else 6, label=fam, lw=1, alpha=0.9)
            for p, xi, yi in zip(ps, x, y):
                lab = st.short.get(p.pol, st.param_label(p.pol))
                if lab:
                    ax.annotate(lab, (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=6.5, color=c)
        _life_axis(ax, lifes)
        ax.set_xlabel("chunk miss ratio (fraction of requested full chunks)")
        ax.set_title(f"{st.sizing_name(sz)}", fontsize=9.5)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", ncol=2)
    fig.suptitle(f"SSD lifetime vs miss ratio — {title} (up and left is better)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def fig_alpha(st, tinfo, path):
    plt = _plt_study()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lifes, any_ = [], False
    for i, t in enumerate(tinfo):
        for sz, ls in ((st.r10, "-"), (st.r40, "--")):
            for fam in ("gandalf", "gandalf (population)"):
                ps = [p for p in select(st, trace=t, sizing=sz, warmup_s=0.0, model=st.main_model, nodes=1)
                      if st.family(p.pol) == fam and st.alpha_of(p.pol) is not None]
                if len(ps) < 2:
                    continue
                any_ = True
                ps.sort(key=lambda p: st.alpha_of(p.pol))
                x = [max(st.alpha_of(p.pol), 0.25) for p in ps]   # α=0 drawn at 0.25 on the log axis
                life = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
                miss = [p.result["fleet"]["chunk_miss_ratio"] for p in ps]
                lifes += life
                lab = f"{t}, {'1:10' if sz == st.r10 else '1:40'}, {'rate' if fam == 'gandalf' else 'population'}"
                mk = "o" if fam == "gandalf" else "s"
                a1.plot(x, life, ls=ls, marker=mk, color=f"C{i}", label=lab, alpha=0.9 if fam == "gandalf" else 0.6)
                a2.plot(x, miss, ls=ls, marker=mk, color=f"C{i}", label=lab, alpha=0.9 if fam == "gandalf" else 0.6)
    if not any_:
        plt.close(fig)
        return None
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks([0.25, 1, 4, 16, 64])
        ax.set_xticklabels(["0", "1", "4", "16", "64"])
        ax.set_xlabel("α (write-fee multiplier, log; α=0 drawn at 0.25)")
        ax.grid(True, which="both", alpha=0.3)
    _life_axis(a1, lifes)
    a2.set_ylabel("chunk miss ratio")
    a1.set_title("lifetime vs α")
    a2.set_title("miss ratio vs α")
    a2.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def fig_capacity(st, tinfo, path):
    plt = _plt_study()
    ts = [t for t in tinfo if select(st, trace=t, exp="capacity")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(11, 3.7 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, exp="capacity")
        by: dict = {}
        for p in pts:
            by.setdefault(p.pol, []).append(p)
        lifes = []
        for pol, ps in by.items():
            ps.sort(key=lambda p: p.sizing[1])
            x = [p.sizing[1] / st.cap_total * 100 for p in ps]
            c, m = _style(st.family(pol))
            if pol.startswith("gp"):
                c = _style("gandalf (population)")[0]
            life = [p.result["fleet"]["ssd_lifetime_years"] for p in ps]
            lifes += life
            row[0].plot(x, [p.result["fleet"]["chunk_miss_ratio"] for p in ps], marker=m, color=c, label=st.label(pol))
            row[1].plot(x, life, marker=m, color=c, label=st.label(pol))
        ticks = sorted({p.sizing[1] / st.cap_total * 100 for p in pts})
        for ax in row:
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{v:.2g}" for v in ticks])
            ax.set_xlabel("DRAM share of DRAM+SSD (%, log; DRAM+SSD fixed at 41% W)")
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_ylabel("chunk miss ratio")
        _life_axis(row[1], lifes)
        row[0].set_title(f"{t}: miss ratio vs DRAM/SSD split")
        row[1].set_title(f"{t}: lifetime vs DRAM/SSD split")
        row[0].legend(loc="best")
    fig.tight_layout()
    return _save(fig, path)


def fig_models(st, tinfo, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if select(st, trace=t, exp="models")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(11, 3.8 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, exp="models")
        models = [m for m in st.models if any(p.model == m for p in pts)]
        pols = [q for q in MODEL_POLS if any(p.pol == q for p in pts)]
        wbar = 0.8 / max(len(pols), 1)
        lifes = []
        for j, pol in enumerate(pols):
            c, _ = _style(st.family(pol))
            life, miss = [], []
            for m in models:
                q = [p for p in pts if p.model == m and p.pol == pol]
                life.append(q[0].result["fleet"]["ssd_lifetime_years"] if q else np.nan)
                miss.append(q[0].result["fleet"]["chunk_miss_ratio"] if q else np.nan)
            lifes += life
            x = np.arange(len(models)) + (j - (len(pols) - 1) / 2) * wbar
            row[0].bar(x, life, wbar, color=c, label=st.label(pol), alpha=0.6 if pol == "gp1" else 0.9,
                       hatch="//" if pol == "gp1" else None)
            row[1].bar(x, miss, wbar, color=c, label=st.label(pol), alpha=0.6 if pol == "gp1" else 0.9,
                       hatch="//" if pol == "gp1" else None)
        for ax in row:
            ax.set_xticks(range(len(models)))
            ax.set_xticklabels(models, fontsize=7.5)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        _life_axis(row[0], [x for x in lifes if x == x])
        row[1].set_ylabel("chunk miss ratio")
        row[0].set_title(f"{t}: lifetime by model (DRAM 1% W : SSD 10% W of each model)")
        row[1].set_title(f"{t}: miss ratio by model")
        row[1].legend(loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


def fig_where(st, tinfo, derived, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if where_rows(st, t, derived)]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 3, figsize=(14, 3.9 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        rows = where_rows(st, t, derived)
        names = [st.label(r["pol"]).replace("gandalf (population)", "gandalf pop.") for r in rows]
        x = np.arange(len(rows))
        for ax, key, hk, ttl in ((row[0], "states_written", "state_hit_frac", "linear states written to SSD"),
                                 (row[1], "fa_written", "fa_hit_frac", "FA chunks written to SSD")):
            vals = [r[key] for r in rows]
            ax.bar(x, vals, color=[_style(st.family(r["pol"]))[0] for r in rows])
            for xi, v, r in zip(x, vals, rows):
                ax.annotate(f"{r[hk] * 100:.0f}% hit", (xi, v), ha="center", va="bottom", fontsize=7)
            if max(vals) > 0 and min(v for v in vals if v > 0) * 30 < max(vals) if any(v > 0 for v in vals) else False:
                ax.set_yscale("log")
            ax.set_ylabel("count (payloads)")
            ax.set_title(f"{t}: {ttl} (label: share later hit on SSD)", fontsize=8.5)
            ax.set_xticks(x)
            ax.set_xticklabels(names, rotation=25, ha="right", fontsize=7)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        ax = row[2]
        bottom = np.zeros(len(rows))
        for k, c, lab in (("hits_dram_fa", "#2166ac", "FA from DRAM"), ("hits_ssd_fa", "#b2182b", "FA from SSD"),
                          ("hits_dram_state", "#92c5de", "STATE from DRAM"),
                          ("hits_ssd_state", "#f4a582", "STATE from SSD")):
            v = np.array([r["hits"][k] for r in rows], dtype=float)
            ax.bar(x, v, bottom=bottom, color=c, label=lab)
            bottom += v
        ax.set_ylabel("hits (payloads reused)")
        ax.set_title(f"{t}: hits by tier and payload kind", fontsize=8.5)
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=7)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def fig_latency_cost(st, tinfo, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if select(st, trace=t, sizing=st.r10, warmup_s=0.0, model=st.main_model, nodes=1)]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 2, figsize=(12, 4.0 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, sizing=st.r10, warmup_s=0.0, model=st.main_model, nodes=1)
        lifes = []
        seen = set()
        for p in sorted(pts, key=lambda p: p.pol):
            f = p.result["fleet"]
            c, m = _style(st.family(p.pol))
            fam = st.family(p.pol)
            row[0].plot(f["load_latency_mean_s"] * 1e3, f["ssd_lifetime_years"], marker=m, color=c, ls="none",
                        label=None if fam in seen else fam)
            seen.add(fam)
            lifes.append(f["ssd_lifetime_years"])
            if st.param_label(p.pol):
                row[0].annotate(st.short.get(p.pol, st.param_label(p.pol)), (f["load_latency_mean_s"] * 1e3, f["ssd_lifetime_years"]),
                                textcoords="offset points", xytext=(3, 3), fontsize=6, color=c)
        _life_axis(row[0], lifes)
        row[0].set_xlabel("mean cache load latency per request (ms: DRAM/SSD load + recompute of misses)")
        row[0].set_title(f"{t}: lifetime vs cache load latency")
        row[0].grid(True, which="both", alpha=0.3)
        row[0].legend(fontsize=7, ncol=2)
        ps = sorted(pts, key=lambda p: p.result["fleet"]["cost_per_1k_requests_usd"])
        x = np.arange(len(ps))
        rec = [p.result["fleet"]["cost_per_1k_requests_recompute_usd"] for p in ps]
        wear = [p.result["fleet"]["cost_per_1k_requests_wear_usd"] for p in ps]
        row[1].bar(x, rec, color="#4575b4", label="recompute (GPU time of misses)")
        row[1].bar(x, wear, bottom=rec, color="#d73027", label="SSD wear")
        row[1].set_xticks(x)
        row[1].set_xticklabels([st.label(p.pol).replace("gandalf (population)", "gandalf pop.") for p in ps],
                               rotation=60, ha="right", fontsize=6.5)
        row[1].set_ylabel("cost per 1k requests (USD)")
        row[1].set_title(f"{t}: cost per 1k requests (sorted)")
        row[1].legend(fontsize=7)
        row[1].grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def fig_fleet(st, tinfo, path):
    plt = _plt_study()
    import numpy as np
    ts = [t for t in tinfo if select(st, trace=t, exp="fleet")]
    if not ts:
        return None
    fig, axes = plt.subplots(len(ts), 3, figsize=(14, 3.6 * len(ts)), squeeze=False)
    for row, t in zip(axes, ts):
        pts = select(st, trace=t, exp="fleet")
        routers = [r for r in st.routers if any(p.router == r for p in pts)]
        pols = list(dict.fromkeys(p.pol for p in sorted(pts, key=lambda p: not st.is_gandalf(p.pol))))
        w = 0.8 / len(pols)
        for j, pol in enumerate(pols):
            c, _ = _style(st.family(pol))
            get = {p.router: p.result["fleet"] for p in pts if p.pol == pol}
            x = np.arange(len(routers)) + (j - (len(pols) - 1) / 2) * w
            for ax, k in zip(row, ("fleet_ssd_replacement_usd_per_year", "wear_imbalance", "chunk_miss_ratio")):
                ax.bar(x, [get.get(r, {}).get(k, np.nan) for r in routers], w, color=c, label=st.label(pol))
        for ax, yl in zip(row, ("fleet SSD replacement (USD / year)", "wear imbalance (max / mean node bytes)",
                                "chunk miss ratio")):
            ax.set_xticks(range(len(routers)))
            ax.set_xticklabels(routers, rotation=20, fontsize=7.5)
            ax.set_ylabel(yl)
            ax.grid(True, axis="y", which="both", alpha=0.3)
        vals = [p.result["fleet"]["fleet_ssd_replacement_usd_per_year"] for p in pts]
        if vals and min(vals) > 0 and max(vals) / min(vals) >= 10:
            row[0].set_yscale("log")
        row[0].set_title(f"{t}: 8 nodes, SSD replacement $/year")
        row[1].set_title(f"{t}: wear imbalance")
        row[2].set_title(f"{t}: miss ratio")
        row[0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)
