"""Model geometry and cost model: pinned against the shared reference tables.

Expected figures are copied from ``models-hardware.md`` §1.2 (bytes) and §1.3
(parameters, FLOPs, state shapes). The yaml files hold only published config
fields, so these tests check the derivations, not copied numbers.
"""
from __future__ import annotations

import copy
import pathlib

import numpy as np
import pytest
import yaml

from cluster_sim.errors import ConfigError
from cluster_sim.locations import conf_dir
from cluster_sim.model import (
    ModelSpec,
    known_models,
    load_model,
    model_from_config,
)

MiB = 2**20

REQUIRED = [
    "llama3_1_70b",
    "qwen3_32b",
    "qwen3_next_80b_a3b",
    "qwen3_5_27b",
    "kimi_linear_48b_a3b",
    "nemotron_h_8b",
    "nemotron_h_56b",
    "gemma3_27b",
    "jamba_1_5_mini",
]

# §1.2: layers full / linear / SWA, KV B/token (full, bf16), linear state MiB (bf16, engine)
TABLE_1_2 = {
    "kimi_linear_48b_a3b": ((7, 20, 0), 8064, 21.41, 41.41),
    "qwen3_next_80b_a3b": ((12, 36, 0), 24576, 37.69, 37.69),
    "qwen3_5_397b_a17b": ((15, 45, 0), 30720, 93.16, 183.16),
    "qwen3_5_35b_a3b": ((10, 30, 0), 20480, 31.41, 61.41),
    "qwen3_5_27b": ((16, 48, 0), 65536, 74.81, 146.81),
    "nemotron_h_8b": ((4, 24, 0), 16384, 49.41, 49.41),
    "nemotron_h_47b": ((5, 45, 0), 20480, 365.27, 365.27),
    "nemotron_h_56b": ((10, 54, 0), 40960, 438.33, 438.33),
    "gemma3_27b": ((10, 0, 52), 81920, 0.0, 0.0),
    "jamba_1_5_large": ((9, 63, 0), 36864, 37.41, 37.41),
    "jamba_1_5_mini": ((4, 28, 0), 16384, 8.31, 8.31),
    "minimax_m1": ((10, 70, 0), 40960, 140.00, 140.00),
    "minimax_m2": ((62, 0, 0), 253952, 0.0, 0.0),
    "llama3_1_70b": ((80, 0, 0), 327680, 0.0, 0.0),
    "qwen3_32b": ((64, 0, 0), 262144, 0.0, 0.0),
    "deepseek_v3": ((61, 0, 0), 70272, 0.0, 0.0),
}

# §1.3 state-shape table: bytes per linear layer (bf16)
PER_LAYER_BF16 = {
    "kimi_linear_48b_a3b": 1_122_304,
    "qwen3_next_80b_a3b": 1_097_728,
    "qwen3_5_397b_a17b": 2_170_880,
    "qwen3_5_35b_a3b": 1_097_728,
    "qwen3_5_27b": 1_634_304,
    "nemotron_h_8b": 2_158_592,
    "nemotron_h_47b": 8_511_488,
    "nemotron_h_56b": 8_511_488,
    "jamba_1_5_large": 622_592,
    "jamba_1_5_mini": 311_296,
    "minimax_m1": 2_097_152,
}

# §1.3: total params calc (B, incl. embeddings), flops_per_token (GFLOP), attn / SWA FLOPs per ctx token
# (MFLOP), avg prefill FLOPs/token @8K / 32K / 128K (GFLOP)
TABLE_1_3 = {
    "kimi_linear_48b_a3b": (49.12, 5.46, 0.143, 0.000, (6.1, 7.9, 14.9)),
    "qwen3_next_80b_a3b": (79.67, 6.50, 0.197, 0.000, (7.4, 9.8, 19.5)),
    "qwen3_5_397b_a17b": (396.35, 30.63, 0.492, 0.000, (32.9, 39.0, 63.1)),
    "qwen3_5_35b_a3b": (34.66, 4.88, 0.164, 0.000, (5.6, 7.7, 15.7)),
    "qwen3_5_27b": (26.90, 48.71, 0.393, 0.000, (50.5, 55.4, 74.7)),
    "nemotron_h_8b": (8.10, 14.05, 0.066, 0.000, (14.5, 15.3, 18.5)),
    "nemotron_h_47b": (46.79, 89.28, 0.164, 0.000, (91.2, 93.2, 101.2)),
    "nemotron_h_56b": (56.32, 108.35, 0.328, 0.000, (111.2, 115.2, 131.3)),
    "gemma3_27b": (27.01, 51.20, 0.164, 0.852, (52.7, 54.7, 62.8)),
    "jamba_1_5_large": (398.55, 186.14, 0.295, 0.000, (187.4, 191.1, 205.6)),
    "jamba_1_5_mini": (51.57, 23.14, 0.066, 0.000, (23.4, 24.2, 27.5)),
    "minimax_m1": (456.09, 91.89, 0.328, 0.000, (93.7, 97.7, 113.8)),
    "minimax_m2": (228.69, 19.60, 1.524, 0.000, (25.8, 44.6, 119.5)),
    "llama3_1_70b": (70.55, 136.90, 2.621, 0.000, (147.6, 179.9, 308.7)),
    "qwen3_32b": (32.76, 62.41, 2.097, 0.000, (71.0, 96.8, 199.9)),
    "deepseek_v3": (671.03, 71.40, 4.997, 0.000, (91.9, 153.3, 398.9)),
}

PRESENT = [m for m in TABLE_1_2 if m in known_models()]


def _yaml(name: str) -> dict:
    return yaml.safe_load((conf_dir() / "model" / f"{name}.yaml").read_text())


# ---------------------------------------------------------------- configs


def test_required_models_present():
    missing = sorted(set(REQUIRED) - set(known_models()))
    assert not missing, f"missing conf/model files: {missing}"


def test_every_table_model_is_pinned():
    # each model we ship that appears in the reference is checked below
    assert set(known_models()) <= set(TABLE_1_2)


@pytest.mark.parametrize("name", known_models())
def test_every_yaml_loads_and_has_contract_keys(name):
    path = conf_dir() / "model" / f"{name}.yaml"
    text = path.read_text()
    data = yaml.safe_load(text)
    assert data["name"] == name == path.stem
    assert data["state_checkpoints"] == "last_and_branch"
    assert data["state_dtype"] == "engine"
    assert text.lstrip().startswith("#") and "ource" in text.split("\nname:")[0], "needs a source comment"
    spec = load_model(name)
    assert isinstance(spec, ModelSpec)
    assert spec.name == name
    assert spec.n_full_layers + spec.n_linear_layers + spec.n_swa_layers > 0


@pytest.mark.parametrize("name", known_models())
def test_omegaconf_dictconfig_input(name):
    # Hydra hands the model group over as a DictConfig
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(conf_dir() / "model" / f"{name}.yaml")
    assert model_from_config(cfg) == load_model(name)


def test_conf_dir_is_repo_conf():
    assert conf_dir() == pathlib.Path(__file__).resolve().parent.parent / "conf"
    assert known_models() == sorted(known_models())


# ---------------------------------------------------------------- §1.2 bytes


@pytest.mark.parametrize("name", PRESENT)
def test_layer_counts(name):
    spec = load_model(name)
    assert (spec.n_full_layers, spec.n_linear_layers, spec.n_swa_layers) == TABLE_1_2[name][0]


@pytest.mark.parametrize("name", PRESENT)
def test_kv_bytes_per_token_full_exact(name):
    assert load_model(name).kv_bytes_per_token_full == TABLE_1_2[name][1]


@pytest.mark.parametrize("name", PRESENT)
def test_linear_state_bytes_bf16_and_engine(name):
    _, _, bf16_mib, engine_mib = TABLE_1_2[name]
    bf16 = load_model(name, state_dtype="bf16")
    engine = load_model(name, state_dtype="engine")
    assert abs(bf16.linear_state_bytes / MiB - bf16_mib) <= 0.01
    assert abs(engine.linear_state_bytes / MiB - engine_mib) <= 0.01
    assert engine.state_dtype == "engine" and bf16.state_dtype == "bf16"


@pytest.mark.parametrize("name", sorted(set(PER_LAYER_BF16) & set(known_models())))
def test_per_linear_layer_bytes_bf16_exact(name):
    spec = load_model(name, state_dtype="bf16")
    assert spec.linear_state_bytes == PER_LAYER_BF16[name] * spec.n_linear_layers


def test_engine_vs_bf16_state_dtype():
    kimi_b = load_model("kimi_linear_48b_a3b", state_dtype="bf16")
    kimi_e = load_model("kimi_linear_48b_a3b")
    # KDA recurrent state 32 x 128 x 128 per layer goes fp32 (conv stays bf16): +2 B x 524,288 x 20 layers
    assert kimi_e.linear_state_bytes - kimi_b.linear_state_bytes == 20 * 32 * 128 * 128 * 2
    assert round(kimi_b.linear_state_bytes / MiB, 2) == 21.41
    assert round(kimi_e.linear_state_bytes / MiB, 2) == 41.41

    q_b = load_model("qwen3_5_27b", state_dtype="bf16")
    q_e = load_model("qwen3_5_27b")
    assert q_e.linear_state_bytes - q_b.linear_state_bytes == 48 * 48 * 128 * 128 * 2
    assert round(q_b.linear_state_bytes / MiB, 2) == 74.81
    assert round(q_e.linear_state_bytes / MiB, 2) == 146.81

    # engines keep these in the model dtype: the two modes agree
    for name in ("qwen3_next_80b_a3b", "nemotron_h_8b", "jamba_1_5_mini"):
        assert load_model(name).linear_state_bytes == load_model(name, state_dtype="bf16").linear_state_bytes


def test_gemma3_sliding_window_state():
    g = load_model("gemma3_27b")
    assert g.has_state
    assert g.linear_state_bytes == 0
    assert g.swa_window == 1024
    assert g.swa_kv_bytes_per_token == 52 * 8192  # 8 KiB/token/layer x 52 SWA layers
    assert g.state_bytes(1024) == 416 * MiB
    assert g.state_bytes(10**6) == 416 * MiB
    assert g.state_bytes(0) == 0
    assert g.state_bytes(256) == 256 * 52 * 8192
    assert g.state_bytes(1023) == 1023 * 52 * 8192
    pos = np.array([0, 1, 256, 1023, 1024, 1025, 4096, 10**7])
    arr = g.state_bytes_array(pos)
    assert arr.dtype == np.int64
    assert arr.tolist() == [g.state_bytes(int(p)) for p in pos]
    # the SWA state equals the global-layer KV of 5,325 tokens (§1.2)
    assert round(g.state_bytes(1024) / g.kv_bytes_per_token_full) == 5325


@pytest.mark.parametrize("name", PRESENT)
def test_state_and_fa_payloads(name):
    spec = load_model(name)
    assert spec.fa_bytes(256) == 256 * spec.kv_bytes_per_token_full
    assert spec.fa_bytes(0) == 0
    pos = np.array([0, 256, 512, 4096, 131072])
    assert spec.state_bytes_array(pos).tolist() == [spec.state_bytes(int(p)) for p in pos]
    if spec.swa_window == 0:
        assert spec.state_bytes(12345) == spec.linear_state_bytes
    pure_attention = TABLE_1_2[name][0][1:] == (0, 0)
    assert spec.has_state is not pure_attention


# ---------------------------------------------------------------- §1.3 FLOPs


@pytest.mark.parametrize("name", PRESENT)
def test_flops_per_token_within_3pct(name):
    want = TABLE_1_3[name][1] * 1e9
    assert load_model(name).flops_per_token == pytest.approx(want, rel=0.03)


@pytest.mark.parametrize("name", PRESENT)
def test_attention_flops_per_ctx_token_within_1pct(name):
    _, _, attn_m, swa_m, _ = TABLE_1_3[name]
    spec = load_model(name)
    assert spec.attn_flops_per_ctx_token == pytest.approx(attn_m * 1e6, rel=0.01)
    if swa_m:
        assert spec.swa_flops_per_ctx_token == pytest.approx(swa_m * 1e6, rel=0.01)
    else:
        assert spec.swa_flops_per_ctx_token == 0


@pytest.mark.parametrize("name", PRESENT)
def test_total_params_within_3pct(name):
    # non-embedding total + embeddings (and an untied lm_head) vs the reference's calculated total
    cfg = _yaml(name)
    embed = cfg["vocab_size"] * cfg["hidden_size"] * (1 if cfg.get("tie_word_embeddings") else 2)
    spec = load_model(name)
    assert spec.total_params + embed == pytest.approx(TABLE_1_3[name][0] * 1e9, rel=0.03)
    assert spec.flops_per_token == 2 * spec.active_params
    assert spec.active_params <= spec.total_params


@pytest.mark.parametrize("name", PRESENT)
def test_average_prefill_flops_columns(name):
    # avg prefill FLOPs/token over a prompt of L tokens, cache empty (§1.3 last three columns)
    spec = load_model(name)
    for L, want in zip((8192, 32768, 131072), TABLE_1_3[name][4]):
        assert spec.prefill_flops(0, L) / L == pytest.approx(want * 1e9, rel=0.01)


def test_linear_mixers_add_flops_only_where_present():
    assert load_model("llama3_1_70b").linear_mix_flops_per_token == 0
    assert load_model("gemma3_27b").linear_mix_flops_per_token == 0
    for name in ("kimi_linear_48b_a3b", "qwen3_next_80b_a3b", "nemotron_h_8b", "jamba_1_5_mini"):
        spec = load_model(name)
        assert 0 < spec.linear_mix_flops_per_token < 0.05 * spec.flops_per_token


# ---------------------------------------------------------------- prefill_flops


def _brute_force(spec: ModelSpec, start: int, end: int) -> float:
    total = 0.0
    for t in range(start, end):
        total += spec.flops_per_token + spec.linear_mix_flops_per_token
        total += t * spec.attn_flops_per_ctx_token
        total += min(t, spec.swa_window) * spec.swa_flops_per_ctx_token
    return total


RANGES = [(0, 0), (0, 1), (0, 2), (5, 6), (0, 100), (37, 300), (1000, 1030), (1020, 1030), (1024, 1025), (0, 2100), (900, 2500)]


@pytest.mark.parametrize("name", ["gemma3_27b", "kimi_linear_48b_a3b", "llama3_1_70b", "jamba_1_5_mini"])
@pytest.mark.parametrize("start,end", RANGES)
def test_prefill_closed_form_matches_loop(name, start, end):
    spec = load_model(name)
    assert spec.prefill_flops(start, end) == pytest.approx(_brute_force(spec, start, end), rel=1e-12, abs=1e-6)


def test_prefill_closed_form_small_window():
    # a toy model with a tiny window exercises every branch of the SWA sum
    spec = ModelSpec(
        name="toy", kv_bytes_per_token_full=10, linear_state_bytes=7, swa_window=3, swa_kv_bytes_per_token=5,
        flops_per_token=100.0, attn_flops_per_ctx_token=2.0, swa_flops_per_ctx_token=3.0,
        linear_mix_flops_per_token=1.0, n_full_layers=1, n_linear_layers=1, n_swa_layers=1,
    )
    for start in range(0, 9):
        for end in range(start, 12):
            assert spec.prefill_flops(start, end) == _brute_force(spec, start, end)
    assert spec.state_bytes(2) == 7 + 2 * 5 and spec.state_bytes(9) == 7 + 3 * 5


@pytest.mark.parametrize("name", PRESENT)
def test_prefill_additive(name):
    spec = load_model(name)
    for a, b in [(0, 0), (256, 256), (256, 4096), (1000, 1024), (1024, 131072), (3, 700_001)]:
        assert spec.prefill_flops(0, a) + spec.prefill_flops(a, b) == pytest.approx(spec.prefill_flops(0, b), rel=1e-12)
    assert spec.prefill_flops(7, 7) == 0


@pytest.mark.parametrize("name", ["gemma3_27b", "deepseek_v3", "qwen3_5_27b", "nemotron_h_56b"])
def test_prefill_flops_array_matches_scalar(name):
    spec = load_model(name)
    rng = np.random.default_rng(0)
    start = rng.integers(0, 200_000, size=200)
    end = start + rng.integers(0, 50_000, size=200)
    start[:3] = [0, 1000, 1024]
    end[:3] = [0, 1030, 1024]
    arr = spec.prefill_flops_array(start, end)
    assert arr.dtype == np.float64 and arr.shape == (200,)
    np.testing.assert_allclose(arr, [spec.prefill_flops(int(s), int(e)) for s, e in zip(start, end)], rtol=1e-12)


def test_prefill_rejects_bad_ranges():
    spec = load_model("llama3_1_70b")
    with pytest.raises(ValueError):
        spec.prefill_flops(10, 5)
    with pytest.raises(ValueError):
        spec.prefill_flops(-1, 5)
    with pytest.raises(ValueError):
        spec.prefill_flops_array(np.array([10]), np.array([5]))
    with pytest.raises(ValueError):
        spec.state_bytes(-1)


def test_to_dict_round_trip():
    spec = load_model("kimi_linear_48b_a3b")
    d = spec.to_dict()
    assert d["has_state"] is True and d["name"] == "kimi_linear_48b_a3b"
    d.pop("has_state")
    assert ModelSpec(**d) == spec


# ---------------------------------------------------------------- errors


def test_unknown_model_names_key_and_lists_known():
    with pytest.raises(ConfigError) as e:
        load_model("gpt5")
    assert e.value.key == "model"
    assert "gpt5" in str(e.value) and "llama3_1_70b" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_model("../model/llama3_1_70b")
    assert e.value.key == "model"


def test_bad_state_dtype():
    with pytest.raises(ConfigError) as e:
        load_model("kimi_linear_48b_a3b", state_dtype="fp8")
    assert e.value.key == "model.state_dtype"
    assert "engine, bf16" in str(e.value) and "'fp8'" in str(e.value)


def test_bad_state_checkpoints():
    with pytest.raises(ConfigError) as e:
        load_model("qwen3_5_27b", state_checkpoints="sometimes")
    assert e.value.key == "model.state_checkpoints"
    for mode in ("last", "last_and_branch", "every_chunk"):
        assert load_model("qwen3_5_27b", state_checkpoints=mode).state_checkpoints == mode


def _broken(model: str, changes: dict) -> dict:
    cfg = copy.deepcopy(_yaml(model))
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return cfg


@pytest.mark.parametrize(
    "name,changes,key",
    [
        ("llama3_1_70b", {"hidden_size": None}, "model.hidden_size"),
        ("llama3_1_70b", {"num_key_value_heads": 7}, "model.num_key_value_heads"),
        ("llama3_1_70b", {"hidden_size": -1}, "model.hidden_size"),
        ("llama3_1_70b", {"num_hidden_layers": "80"}, "model.num_hidden_layers"),
        ("llama3_1_70b", {"model_type": "gpt9"}, "model.model_type"),
        ("llama3_1_70b", {"name": None}, "model.name"),
        ("qwen3_next_80b_a3b", {"linear_num_value_heads": None}, "model.linear_num_value_heads"),
        ("nemotron_h_8b", {"num_hidden_layers": 50}, "model.num_hidden_layers"),
        ("nemotron_h_8b", {"hybrid_override_pattern": "M-X*"}, "model.hybrid_override_pattern"),
        ("gemma3_27b", {"sliding_window": None}, "model.sliding_window"),
        ("kimi_linear_48b_a3b", {"linear_attn_config": None}, "model.linear_attn_config"),
        ("jamba_1_5_mini", {"num_experts_per_tok": 17}, "model.num_experts_per_tok"),
        ("qwen3_5_27b", {"engine_state_dtype": "float13"}, "model.engine_state_dtype"),
    ],
)
def test_bad_fields_name_the_key(name, changes, key):
    with pytest.raises(ConfigError) as e:
        model_from_config(_broken(name, changes))
    assert e.value.key == key


def test_kimi_layer_lists_must_partition():
    cfg = _yaml("kimi_linear_48b_a3b")
    cfg["linear_attn_config"]["kda_layers"] = cfg["linear_attn_config"]["kda_layers"][:-1]
    with pytest.raises(ConfigError) as e:
        model_from_config(cfg)
    assert e.value.key == "model.linear_attn_config.full_attn_layers"


def test_not_a_mapping():
    with pytest.raises(ConfigError) as e:
        model_from_config(["llama"])
    assert e.value.key == "model"


def test_model_module_imports_no_framework():
    # the simulation core stays plain Python + numpy (architecture rule)
    import ast

    import cluster_sim.model as m

    tree = ast.parse(pathlib.Path(m.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"hydra", "ray", "mlflow", "omegaconf"}
