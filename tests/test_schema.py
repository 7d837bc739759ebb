"""One schema for settings (issue 18, item 2; decisions 47-50).

* every YAML under conf/ is checked against the settings dataclasses: unknown keys fail, values
  parse, and a group option file never repeats a schema default (defaults live in the schema only);
* the policy registry fails loudly (a duplicate name, an entry that cannot be loaded) and every
  registered policy has its YAML, a golden and contract variants;
* policy parameters are validated without building a policy, and one policy is built per node.
"""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

import cluster_sim
from cluster_sim import settings
from cluster_sim.config import (SECTIONS, CacheSettings, FleetConfig, HardwareConfig, MetricsSettings,
                                OutputSettings, ReportSettings, SimConfig, SweepSettings, TrackingSettings,
                                RaySettings, WorkloadConfig)
from cluster_sim.errors import ConfigError
from cluster_sim.policies import base as registry
from cluster_sim.policies.base import known_policies, make_policy, parse_params, policy_class, policy_keys

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
GROUP_SCHEMA = {"hardware": HardwareConfig, "workload": WorkloadConfig, "fleet": FleetConfig}
TOP = {"cache": CacheSettings, "output": OutputSettings, "metrics": MetricsSettings, "tracking": TrackingSettings,
       "sweep": SweepSettings, "ray": RaySettings, "report": ReportSettings}


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def _body(path: Path) -> dict:
    return {k: v for k, v in _yaml(path).items() if k != "defaults"}


def _option_files(group: str) -> list[Path]:
    return sorted((CONF / group).glob("*.yaml"))


def _repeats(cls, body: dict, prefix: str) -> list[str]:
    """Keys of ``body`` whose value equals the schema default of ``cls`` (after parsing both)."""
    out = []
    by_name = {f.name: f for f in fields(cls)}
    dflt = settings.defaults(cls)
    for k, v in body.items():
        f = by_name.get(k)
        if f is None:
            continue
        s = settings.spec_of(f)
        if s.kind == "section":
            out += _repeats(s.section, v or {}, f"{prefix}.{k}")
            continue
        key = f"{prefix}.{k}"
        if settings.same_value(settings.check_value(key, s, v), settings.check_value(key, s, dflt[k])):
            out.append(key)
    return out


# ---- every YAML against the schema ------------------------------------------------------------
@pytest.mark.parametrize("group", sorted(GROUP_SCHEMA))
def test_group_files_extend_the_schema_and_write_only_what_differs(group):
    cls = GROUP_SCHEMA[group]
    files = _option_files(group)
    assert files
    for f in files:
        assert f"/schema/{group}@_here_" in _yaml(f).get("defaults", []), f"{f.name} does not extend the schema"
        body = _body(f)
        if group == "workload":       # format options are the reader's (trace.load.check_workload_options)
            core = {x.name for x in fields(cls)} - {"options"}
            body = {k: v for k, v in body.items() if k in core}
        else:
            for k in body:
                assert k in {x.name for x in fields(cls)}, f"{f.name}: unknown key {k}"
        assert _repeats(cls, body, group) == [], f"{f.name} repeats schema defaults"


def test_policy_files_extend_their_policy_schema_and_write_only_what_differs():
    for f in _option_files("policy"):
        body = _body(f)
        name = body["name"]
        assert name in known_policies(), f"{f.name}: policy {name!r} is not registered"
        assert f"/schema/policy/{name}@_here_" in _yaml(f)["defaults"], f.name
        params = {k: v for k, v in body.items() if k != "name"}
        parse_params(name, params)          # unknown keys, types and limits
        assert _repeats(registry.policy_params(name), params, "policy") == [], f"{f.name} repeats defaults"


def test_every_option_of_every_group_composes_and_validates():
    for group in ("hardware", "workload", "fleet", "policy", "model", "experiment", "debug"):
        for f in _option_files(group):
            m = cluster_sim.compose([f"{group}={f.stem}"])
            wl = m["workload"]
            if wl.get("path") and not (Path(wl["path"]).exists() or (ROOT / wl["path"]).exists()):
                wl["path"] = str(ROOT / "traces" / "default.parquet")      # real traces may be absent
                wl["format"] = "parquet"
                for k in [k for k in wl if k not in {x.name for x in fields(WorkloadConfig)}]:
                    wl.pop(k)
            SimConfig.from_mapping(m)


def test_config_yaml_sections_are_known_and_match_the_schema():
    top = _body(CONF / "config.yaml")
    for k in top:
        assert k == "hydra" or k in SECTIONS, f"config.yaml: unknown top-level key {k}"
    for k, cls in TOP.items():
        assert k in top
        body = top[k]
        for key, v in body.items():
            f = {x.name: x for x in fields(cls)}[key]        # unknown key: KeyError
            got = settings.check_value(f"{k}.{key}", settings.spec_of(f), v)
            assert settings.same_value(got, settings.defaults(cls)[key]), f"config.yaml {k}.{key}: {v!r} is not " \
                                                                           f"the schema's {settings.defaults(cls)[key]!r}"
        assert set(body) == {x.name for x in fields(cls)}, f"config.yaml {k}: keys differ from the schema"


def test_experiment_and_debug_files_name_only_known_keys():
    for group in ("experiment", "debug"):
        for f in _option_files(group):
            body = _body(f)
            for sec, v in body.items():
                if sec == "hydra":
                    continue
                assert sec in SECTIONS, f"{f.name}: unknown section {sec}"
                cls = GROUP_SCHEMA.get(sec) or TOP.get(sec)
                if cls is None or not isinstance(v, dict):
                    continue
                if sec == "workload":
                    v = {k: x for k, x in v.items() if k in {y.name for y in fields(cls)}}
                settings.parse(cls, v, sec)           # unknown keys and bad values fail


def test_the_composed_default_holds_every_schema_key():
    m = cluster_sim.compose([])
    assert set(m["hardware"]) == {f.name for f in fields(HardwareConfig)}
    assert set(m["hardware"]["ssd"]) == set(settings.defaults(HardwareConfig)["ssd"])
    assert set(m["fleet"]) == {f.name for f in fields(FleetConfig)}
    assert set(m["policy"]) == {"name", *policy_keys("lru")}
    g = cluster_sim.compose(["policy=gandalf", "policy.tau_s=60"])["policy"]   # no '+' needed
    assert set(g) == {"name", *policy_keys("gandalf")} and g["tau_s"] == 60


def test_ssd_bandwidth_defaults_are_the_drives_figures():
    # 8 PCIe 5.0 TLC drives x 13.0 / 6.6 GB/s (models-hardware.md §2.3, PM1743): once 50 / 25 in code
    hw = HardwareConfig.from_mapping({})
    assert hw.ssd_read_bytes_per_s == 104e9 and hw.ssd_write_bytes_per_s == 52.8e9
    assert HardwareConfig().ssd_read_bytes_per_s == 104e9
    m = cluster_sim.compose(["hardware=h100_8x"])["hardware"]
    assert SimConfig.from_mapping(cluster_sim.compose(["hardware=h100_8x"])).hardware.ssd_read_bytes_per_s == 104e9
    assert m["ssd_read_bytes_per_s"] == "104GB/s"


def test_a_repeated_default_is_caught():
    # the check the group-file test relies on: a value equal to the default after parsing is a repeat
    assert _repeats(HardwareConfig, {"ssd_read_bytes_per_s": "104GB/s", "mfu": 0.5,
                                     "ssd": {"dwpd": 1, "waf": 1.1}}, "hardware") == \
        ["hardware.ssd_read_bytes_per_s", "hardware.ssd.dwpd"]


@pytest.mark.parametrize("mapping,key", [
    ({"nope": 1}, "hardware.nope"),
    ({"ssd": {"nope": 1}}, "hardware.ssd.nope"),
    ({"ssd_read_bytes_per_s": "fast"}, "hardware.ssd_read_bytes_per_s"),
    ({"mfu": 0}, "hardware.mfu"),
    ({"ssd": {"overprovision": 1}}, "hardware.ssd.overprovision"),
    ({"ssd": {"erase_block_bytes": 0}}, "hardware.ssd.erase_block_bytes"),
    ({"ssd": {"ftl": "greedy", "waf": 2}}, "hardware.ssd.waf"),
])
def test_hardware_errors_name_the_key(mapping, key):
    with pytest.raises(ConfigError) as e:
        HardwareConfig.from_mapping(mapping)
    assert e.value.key == key
    assert "\n" not in str(e.value)


def test_unknown_top_level_and_section_keys_fail():
    m = cluster_sim.compose([])
    for bad, key in (({**m, "sweeep": {}}, "sweeep"), ({**m, "cache": {"chunk_token": 5}}, "cache.chunk_token"),
                     ({**m, "sweep": {**m["sweep"], "progress": "sometimes"}}, "sweep.progress"),
                     ({**m, "report": {"figures": "maybe"}}, "report.figures")):
        with pytest.raises(ConfigError) as e:
            SimConfig.from_mapping(bad)
        assert e.value.key == key


# ---- policy parameters ------------------------------------------------------------------------
def test_params_are_validated_once_without_building_a_policy(monkeypatch):
    built = []
    orig = registry.Policy.__init__

    def counting(self, *a, **kw):
        built.append(type(self).__name__)
        orig(self, *a, **kw)

    monkeypatch.setattr(registry.Policy, "__init__", counting)
    cfg = SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf_paper", "policy.alpha=.inf"]))
    assert built == []
    p = cfg.policy.settings
    assert type(p).__name__ == "GandalfParams" and p.alpha == float("inf") and p.reuse == "rate"
    assert p.objective == "dollars" and p.tau_s == 600.0
    with pytest.raises(ConfigError) as e:
        SimConfig.from_mapping(cluster_sim.compose(["policy=gandalf", "policy.tau_s=0"]))
    assert e.value.key == "policy.tau_s" and built == []


@pytest.mark.parametrize("name", known_policies())
def test_one_policy_per_node(name, monkeypatch, tmp_path):
    from cluster_sim import engine as engines
    if engines.policy_unsupported(name) is None:      # (the compiled engine's warm-up binds policies of its own: not nodes)
        engines.ensure_compiled(settings=[(name, None)])
    built = []
    orig = registry.Policy.__init__

    def counting(self, *a, **kw):
        built.append(self)
        orig(self, *a, **kw)

    monkeypatch.setattr(registry.Policy, "__init__", counting)
    from cluster_sim.cli import main
    rc = main(["tracking.enabled=false", "report.figures=false", "workload.limit_requests=200", "fleet=four",
               "fleet.router=round_robin", f"policy={name}", f"output.dir={tmp_path}", f"hydra.run.dir={tmp_path}"])
    assert rc == 0
    extra = 0
    if name == "oracle_admission":          # fresh policies replay the stream before the counted pass
        extra = sum(int(p.c.get("passes", 1)) - 1 for p in built if hasattr(p, "c") and "passes" in p.c)
    assert len(built) == 4 + extra, (name, len(built))


def test_params_keyword_and_instance_forms_agree():
    from cluster_sim.policies.lru_k import LRUKPolicy
    a = LRUKPolicy(k=3, crp="1.5")
    b = make_policy("lru_k", {"k": 3, "crp": 1.5})
    c = make_policy("lru_k", parse_params("lru_k", {"k": "3", "crp": 1.5}))
    assert a.params == b.params == c.params and a.K == 3 and a.crp == 1.5
    with pytest.raises(TypeError):
        LRUKPolicy(parse_params("lru_k", {}), k=2)
    with pytest.raises(ConfigError) as e:
        make_policy("lru_k", {"crp": "sometimes"})
    assert e.value.key == "policy.crp" and "'request'" in str(e.value)


# ---- the registry -----------------------------------------------------------------------------
def test_register_refuses_a_duplicate_name(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    with pytest.raises(registry.RegistryError, match="already registered"):
        registry.register("lru", "somewhere.else:LRU")
    assert registry._REGISTRY["lru"] == "cluster_sim.policies.lru:LRUPolicy"


def test_a_registered_module_that_cannot_be_imported_fails_loudly(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register("ghost", "cluster_sim.policies.no_such_module:Ghost")
    assert "ghost" in known_policies()                  # listed, not silently dropped
    with pytest.raises(registry.RegistryError, match="no_such_module"):
        make_policy("ghost")
    registry._REGISTRY["ghost2"] = "cluster_sim.policies.lru:NoSuchClass"
    with pytest.raises(registry.RegistryError, match="NoSuchClass"):
        policy_class("ghost2")
    with pytest.raises(registry.RegistryError, match="module:Class"):
        registry.register("ghost3", "no_colon")


def test_an_unknown_policy_is_a_user_error():
    with pytest.raises(ConfigError) as e:
        make_policy("lfu")
    assert e.value.key == "policy" and "lru" in str(e.value)


@pytest.mark.parametrize("name", known_policies())
def test_every_registered_policy_has_yaml_golden_and_contract_variants(name):
    from test_policy_contract import VARIANTS

    klass = policy_class(name)
    assert klass.name == name
    f = CONF / "policy" / f"{name}.yaml"
    assert f.exists(), f"no {f.relative_to(ROOT)}"
    assert _body(f)["name"] == name
    golden = ROOT / "tests" / "golden" / f"default_{name}.json"
    assert golden.exists(), f"no {golden.relative_to(ROOT)} (scripts/update_golden.py {golden.stem})"
    assert json.loads(golden.read_text())["overrides"] == ([] if name == "lru" else [f"policy={name}"])
    if fields(klass.Params):
        assert VARIANTS.get(name), f"{name} has parameters but no contract variants in test_policy_contract.py"
    for v in VARIANTS.get(name, []):
        parse_params(name, v)
    assert set(VARIANTS) <= set(known_policies())


def test_update_golden_lists_every_registered_policy():
    import runpy
    cases = runpy.run_path(str(ROOT / "scripts" / "update_golden.py"), run_name="not_main")["CASES"]
    assert {f"default_{n}" for n in known_policies()} <= set(cases)
    assert sorted(cases) == sorted(p.stem for p in (ROOT / "tests" / "golden").glob("*.json"))


def test_sweeper_asks_the_registry_for_keys():
    from cluster_sim.sweep import _policy_keys
    assert _policy_keys("gandalf") == {"name", *policy_keys("gandalf")}
    assert _policy_keys("gandalf_paper") == _policy_keys("gandalf")      # a YAML variant of gandalf
    assert _policy_keys("lru") == {"name"}
    assert _policy_keys("no_such_policy") == set()
