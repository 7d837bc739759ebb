"""Model geometry and cost model.

Turns a model's *published* config fields (``conf/model/<name>.yaml``: layer
pattern, heads, head dims, MLA ranks, recurrent-state shapes, window, FFN and
MoE sizes) into the few numbers the simulator needs:

* payload sizes: full-attention KV bytes per token (the FA payload of a chunk)
  and the STATE payload (recurrent state of all linear / SSM layers, or the
  sliding-window KV of the last ``W`` tokens);
* prefill cost: FLOPs to compute tokens ``[start, end)`` of a prompt with
  ``[0, start)`` already cached.

Conventions follow ``models-hardware.md`` §1 (shared reference):

* KV is bf16 (2 B/element); MLA caches the compressed latent
  ``kv_lora_rank + qk_rope_head_dim`` per token and layer.
* Recurrent-state shapes follow vLLM's ``MambaStateShapeCalculator``:
  Gated DeltaNet ``(num_v_heads, head_v_dim, head_k_dim)`` + conv
  ``(K-1) x (2*nk*dk + nv*dv)``; KDA ``(heads, d, d)`` + conv over q, k, v;
  Mamba-2 ``(heads, head_dim, d_state)`` + conv
  ``(K-1) x (d_inner + 2*n_groups*d_state)``; Mamba-1 ``(d_inner, d_state)`` +
  conv ``(K-1) x d_inner``; lightning attention ``(heads, d, d)``, no conv.
* ``state_dtype: engine`` keeps the recurrent state in the dtype a serving
  engine uses by default (the yaml's ``engine_state_dtype``: fp32 for KDA and
  Qwen3.5, the model dtype otherwise); ``bf16`` forces 2 B. The conv state is
  always in the model dtype.
* ``flops_per_token`` = 2 x active non-embedding parameters (embeddings and
  lm_head excluded); the attention-score term is separate because it depends
  on position: ``2 * n_full * n_q_heads * (d_qk + d_v)`` FLOPs per (token,
  context token). Linear mixers add a constant per token (chunked form, chunk
  ``LINEAR_CHUNK``).

Adding a model = one yaml file with its published config fields. A new
*architecture* (layer schedule or mixer kind) = one entry in ``_FAMILIES``.

This module is pure Python + numpy: no Hydra, Ray or MLflow.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from cluster_sim.errors import ConfigError

__all__ = [
    "ModelSpec",
    "model_from_config",
    "conf_dir",
    "known_models",
    "load_model",
    "STATE_CHECKPOINT_MODES",
    "STATE_DTYPES",
    "LINEAR_CHUNK",
]

STATE_CHECKPOINT_MODES = ("last", "last_and_branch", "every_chunk")
STATE_DTYPES = ("engine", "bf16")

#: Chunk length assumed for the chunked (parallel) form of linear mixers when
#: estimating their per-token mixing FLOPs (reference §1.3: "chunk 64 assumed").
LINEAR_CHUNK = 64

#: Bytes per KV element. The reference sizes all KV (full, MLA latent, SWA) in bf16.
KV_ELEMENT_BYTES = 2

_DTYPE_BYTES = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
}

# FFN activations that are *not* gated (two matrices, up + down). Everything
# else (SwiGLU, GeGLU, ...) is gated: gate + up + down.
_NON_GATED_ACTS = {"relu2", "squared_relu"}


# --------------------------------------------------------------------------
# The spec the simulator consumes
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """Derived geometry and cost figures of one model. Sizes in bytes, costs in FLOPs.

    ``kv_bytes_per_token_full`` and ``swa_kv_bytes_per_token`` are summed over
    all layers of that kind; ``linear_state_bytes`` is per sequence (recurrent
    + conv state of all linear / SSM layers, in the chosen ``state_dtype``).
    Sizes are for the whole model, before any tensor-parallel sharding.
    """

    name: str
    kv_bytes_per_token_full: int
    linear_state_bytes: int
    swa_window: int
    swa_kv_bytes_per_token: int
    flops_per_token: float
    attn_flops_per_ctx_token: float
    swa_flops_per_ctx_token: float
    linear_mix_flops_per_token: float
    n_full_layers: int
    n_linear_layers: int
    n_swa_layers: int
    state_checkpoints: str = "last_and_branch"
    state_dtype: str = "engine"
    #: active / total non-embedding parameters (informational; flops_per_token = 2 * active_params)
    active_params: int = 0
    total_params: int = 0

    def __post_init__(self) -> None:
        if self.state_checkpoints not in STATE_CHECKPOINT_MODES:
            raise ConfigError(
                "model.state_checkpoints",
                f"must be one of {', '.join(STATE_CHECKPOINT_MODES)}, got {self.state_checkpoints!r}",
            )
        if self.state_dtype not in STATE_DTYPES:
            raise ConfigError(
                "model.state_dtype",
                f"must be one of {', '.join(STATE_DTYPES)}, got {self.state_dtype!r}",
            )
        for f in ("kv_bytes_per_token_full", "linear_state_bytes", "swa_window", "swa_kv_bytes_per_token"):
            if getattr(self, f) < 0:
                raise ConfigError(f"model.{f}", f"must be >= 0, got {getattr(self, f)}")
        if (self.swa_window > 0) != (self.swa_kv_bytes_per_token > 0):
            raise ConfigError(
                "model.swa_window",
                "a sliding window needs SWA KV bytes and vice versa "
                f"(window {self.swa_window}, bytes/token {self.swa_kv_bytes_per_token})",
            )

    # ---- payloads -------------------------------------------------------

    @property
    def has_state(self) -> bool:
        """True if resuming a sequence needs a STATE payload (recurrent state or SWA window)."""
        return self.linear_state_bytes > 0 or self.swa_window > 0

    def fa_bytes(self, chunk_tokens: int) -> int:
        """Bytes of the FA payload of one chunk of ``chunk_tokens`` tokens."""
        if chunk_tokens < 0:
            raise ValueError(f"chunk_tokens must be >= 0, got {chunk_tokens}")
        return int(chunk_tokens) * self.kv_bytes_per_token_full

    def state_bytes(self, end_pos: int) -> int:
        """Bytes of the STATE payload at token position ``end_pos`` (a chunk's end).

        ``linear_state_bytes + min(W, end_pos) * swa_kv_bytes_per_token``.
        """
        if end_pos < 0:
            raise ValueError(f"end_pos must be >= 0, got {end_pos}")
        return self.linear_state_bytes + min(self.swa_window, int(end_pos)) * self.swa_kv_bytes_per_token

    def state_bytes_array(self, end_pos: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`state_bytes` (int64)."""
        pos = np.asarray(end_pos, dtype=np.int64)
        if pos.size and pos.min() < 0:
            raise ValueError("end_pos must be >= 0")
        window = np.minimum(pos, np.int64(self.swa_window))
        return np.int64(self.linear_state_bytes) + window * np.int64(self.swa_kv_bytes_per_token)

    # ---- prefill cost ---------------------------------------------------

    def prefill_flops(self, start: int, end: int) -> float:
        """FLOPs to compute tokens ``[start, end)`` with ``[0, start)`` already cached.

        ``(end-start) * (flops_per_token + linear_mix)``
        ``+ attn_flops_per_ctx_token * sum_{t=start}^{end-1} t``
        ``+ swa_flops_per_ctx_token * sum_{t=start}^{end-1} min(t, W)``, in closed form.
        """
        start, end = int(start), int(end)
        if start < 0 or end < start:
            raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
        n = end - start
        # integer sums are exact in Python ints; one float multiply each
        ctx_sum = (start + end - 1) * n // 2
        swa_sum = _swa_prefix_sum(end, self.swa_window) - _swa_prefix_sum(start, self.swa_window)
        return (
            n * (self.flops_per_token + self.linear_mix_flops_per_token)
            + ctx_sum * self.attn_flops_per_ctx_token
            + swa_sum * self.swa_flops_per_ctx_token
        )

    def prefill_flops_array(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`prefill_flops` (float64; broadcasts ``start`` against ``end``)."""
        s = np.asarray(start, dtype=np.int64)
        e = np.asarray(end, dtype=np.int64)
        if (s.size and s.min() < 0) or np.any(e < s):
            raise ValueError("need 0 <= start <= end")
        n = (e - s).astype(np.float64)
        ctx_sum = (s + e - 1).astype(np.float64) * n / 2.0
        w = self.swa_window
        swa_sum = (_swa_prefix_sum_array(e, w) - _swa_prefix_sum_array(s, w)).astype(np.float64)
        return (
            n * (self.flops_per_token + self.linear_mix_flops_per_token)
            + ctx_sum * self.attn_flops_per_ctx_token
            + swa_sum * self.swa_flops_per_ctx_token
        )

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["has_state"] = self.has_state
        return d


def _swa_prefix_sum(n: int, window: int) -> int:
    """sum_{t=0}^{n-1} min(t, window), exact."""
    if n <= 0:
        return 0
    if n <= window + 1:
        return n * (n - 1) // 2
    return window * (window + 1) // 2 + (n - window - 1) * window


def _swa_prefix_sum_array(n: np.ndarray, window: int) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64)
    w = np.int64(window)
    small = n * (n - 1) // 2
    big = w * (w + 1) // 2 + (n - w - 1) * w
    return np.where(n <= w + 1, small, big)


# --------------------------------------------------------------------------
# Reading published config fields
# --------------------------------------------------------------------------


def _plain(obj: Any) -> Any:
    """Deep-convert Mapping / list-like containers (incl. OmegaConf's) to dict / list."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return [_plain(v) for v in obj]
    return obj


class _Fields:
    """Typed access to the model's config fields; every error names the dotted key."""

    def __init__(self, cfg: Mapping, prefix: str = "model"):
        self.cfg = cfg
        self.prefix = prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def has(self, name: str) -> bool:
        return self.cfg.get(name) is not None

    def sub(self, name: str) -> "_Fields":
        v = self.cfg.get(name)
        if not isinstance(v, Mapping):
            raise ConfigError(self.key(name), "missing required section" if v is None else f"must be a mapping, got {v!r}")
        return _Fields(v, self.key(name))

    def get_int(self, name: str, default: Any = ..., minimum: int = 1) -> int:
        v = self.cfg.get(name)
        if v is None:
            if default is ...:
                raise ConfigError(self.key(name), "missing required field")
            return default
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ConfigError(self.key(name), f"must be an integer, got {v!r}")
        if v < minimum:
            raise ConfigError(self.key(name), f"must be >= {minimum}, got {v}")
        return int(v)

    def first_int(self, names: Sequence[str], default: Any = ..., minimum: int = 1) -> int:
        for n in names:
            if self.has(n):
                return self.get_int(n, minimum=minimum)
        if default is ...:
            raise ConfigError(self.key(names[0]), "missing required field" + (
                f" (also looked for {', '.join(names[1:])})" if len(names) > 1 else ""))
        return default

    def get_str(self, name: str, default: Any = ...) -> str:
        v = self.cfg.get(name)
        if v is None:
            if default is ...:
                raise ConfigError(self.key(name), "missing required field")
            return default
        if not isinstance(v, str):
            raise ConfigError(self.key(name), f"must be a string, got {v!r}")
        return v

    def get_bool(self, name: str, default: bool = False) -> bool:
        v = self.cfg.get(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(self.key(name), f"must be true or false, got {v!r}")
        return v

    def get_int_list(self, name: str, default: Any = ..., minimum: int = 0) -> list[int]:
        v = self.cfg.get(name)
        if v is None:
            if default is ...:
                raise ConfigError(self.key(name), "missing required field")
            return default
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise ConfigError(self.key(name), f"must be a list of integers, got {v!r}")
        out = []
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < minimum:
                raise ConfigError(self.key(name), f"must be a list of integers >= {minimum}, got element {x!r}")
            out.append(int(x))
        return out

    def dtype_bytes(self, names: Sequence[str], default: str) -> int:
        for n in names:
            if self.has(n):
                v = self.get_str(n)
                if v not in _DTYPE_BYTES:
                    raise ConfigError(self.key(n), f"unknown dtype {v!r}; known: {', '.join(_DTYPE_BYTES)}")
                return _DTYPE_BYTES[v]
        return _DTYPE_BYTES[default]


# --------------------------------------------------------------------------
# Layer schedules: which mixer and which FFN each layer has
# --------------------------------------------------------------------------

FULL, SWA, LINEAR, NONE = "full", "swa", "linear", "none"
DENSE, MOE = "dense", "moe"


def _all_full(f: _Fields, n: int) -> list[str]:
    return [FULL] * n


def _layer_types_or(rule: Callable[[_Fields, int], list[str]]) -> Callable[[_Fields, int], list[str]]:
    """Use the published ``layer_types`` list when present, else ``rule``."""

    names = {
        "full_attention": FULL,
        "attention": FULL,
        "sliding_attention": SWA,
        "linear_attention": LINEAR,
        "mamba": LINEAR,
    }

    def schedule(f: _Fields, n: int) -> list[str]:
        lt = f.cfg.get("layer_types")
        if lt is None:
            return rule(f, n)
        if isinstance(lt, (str, bytes)) or not isinstance(lt, Sequence):
            raise ConfigError(f.key("layer_types"), f"must be a list, got {lt!r}")
        out = []
        for x in lt:
            if x not in names:
                raise ConfigError(f.key("layer_types"), f"unknown layer type {x!r}; known: {', '.join(names)}")
            out.append(names[x])
        return out

    return schedule


def _interval_rule(f: _Fields, n: int) -> list[str]:
    # Qwen3-Next / Qwen3.5: every `full_attention_interval`-th layer is full attention.
    k = f.get_int("full_attention_interval")
    return [FULL if (i + 1) % k == 0 else LINEAR for i in range(n)]


def _sliding_pattern_rule(f: _Fields, n: int) -> list[str]:
    # Gemma 3: (pattern-1) local layers then one global, repeated.
    k = f.get_int("sliding_window_pattern")
    return [FULL if (i + 1) % k == 0 else SWA for i in range(n)]


def _kimi_rule(f: _Fields, n: int) -> list[str]:
    lac = f.sub("linear_attn_config")
    full = lac.get_int_list("full_attn_layers", minimum=1)  # 1-based in the published config
    kda = lac.get_int_list("kda_layers", minimum=1)
    if set(full) & set(kda) or set(full) | set(kda) != set(range(1, n + 1)):
        raise ConfigError(
            lac.key("full_attn_layers"),
            f"full_attn_layers and kda_layers must partition layers 1..{n} (1-based)",
        )
    fs = set(full)
    return [FULL if (i + 1) in fs else LINEAR for i in range(n)]


def _jamba_rule(f: _Fields, n: int) -> list[str]:
    period = f.get_int("attn_layer_period")
    offset = f.get_int("attn_layer_offset", minimum=0)
    if offset >= period:
        raise ConfigError(f.key("attn_layer_offset"), f"must be < attn_layer_period ({period}), got {offset}")
    return [FULL if i % period == offset else LINEAR for i in range(n)]


def _attn_type_list_rule(f: _Fields, n: int) -> list[str]:
    # MiniMax-01 / M1: 1 = softmax attention, 0 = lightning (linear) attention.
    lst = f.get_int_list("attn_type_list")
    if any(x not in (0, 1) for x in lst):
        raise ConfigError(f.key("attn_type_list"), "entries must be 0 (linear) or 1 (softmax)")
    return [FULL if x == 1 else LINEAR for x in lst]


_NEMOTRON_CHARS = {"M": (LINEAR, NONE), "*": (FULL, NONE), "-": (NONE, DENSE), "E": (NONE, MOE)}


def _nemotron_pattern(f: _Fields) -> str:
    p = f.get_str("hybrid_override_pattern")
    bad = sorted(set(p) - set(_NEMOTRON_CHARS))
    if bad:
        raise ConfigError(f.key("hybrid_override_pattern"), f"unknown block characters {bad}; known: M, *, -, E")
    return p


def _nemotron_rule(f: _Fields, n: int) -> list[str]:
    return [_NEMOTRON_CHARS[c][0] for c in _nemotron_pattern(f)]


def _nemotron_ffn(f: _Fields, n: int, mixers: list[str]) -> list[str]:
    return [_NEMOTRON_CHARS[c][1] for c in _nemotron_pattern(f)]


def _generic_ffn(f: _Fields, n: int, mixers: list[str]) -> list[str]:
    """Dense FFN everywhere unless the config declares experts; then MoE except
    the first ``first_k_dense_replace`` layers, ``mlp_only_layers`` and, for Jamba,
    layers off the ``expert_layer_period`` / ``expert_layer_offset`` grid."""
    n_experts = f.first_int(("num_experts", "n_routed_experts", "num_local_experts"), default=0, minimum=0)
    if n_experts == 0:
        return [DENSE] * n
    first_dense = f.get_int("first_k_dense_replace", default=0, minimum=0)
    mlp_only = set(f.get_int_list("mlp_only_layers", default=[]))
    period = f.get_int("expert_layer_period", default=1)
    offset = f.get_int("expert_layer_offset", default=0, minimum=0)
    out = []
    for i in range(n):
        moe = i >= first_dense and i not in mlp_only and i % period == offset % period
        out.append(MOE if moe else DENSE)
    return out


# --------------------------------------------------------------------------
# Linear / SSM mixers
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _LinearMixer:
    """One linear / SSM layer: state shape (elements), conv state, params, mixing FLOPs."""

    kind: str
    recurrent_elems: int
    conv_elems: int
    params: int
    mix_flops_per_token: int


def _gdn(f: _Fields, h: int) -> _LinearMixer:
    # Gated DeltaNet (Qwen3-Next, Qwen3.5)
    nk = f.get_int("linear_num_key_heads")
    nv = f.get_int("linear_num_value_heads")
    dk = f.get_int("linear_key_head_dim")
    dv = f.get_int("linear_value_head_dim")
    kern = f.get_int("linear_conv_kernel_dim")
    conv_ch = 2 * nk * dk + nv * dv
    params = (
        h * (2 * nk * dk + 2 * nv * dv)  # in_proj_qkvz
        + h * 2 * nv                     # in_proj_ba
        + conv_ch * kern                 # depthwise conv
        + 2 * nv                         # A_log, dt_bias
        + dv                             # gated RMSNorm
        + nv * dv * h                    # out_proj
    )
    return _LinearMixer("gdn", nv * dv * dk, (kern - 1) * conv_ch, params, _chunked_linear_flops(nv, dk, dv))


def _kda(f: _Fields, h: int) -> _LinearMixer:
    # Kimi Delta Attention (Kimi Linear): per-channel gate, low-rank (rank = head_dim) gate projections
    lac = f.sub("linear_attn_config")
    heads = lac.get_int("num_heads")
    d = lac.get_int("head_dim")
    kern = lac.get_int("short_conv_kernel_size")
    hd = heads * d
    params = (
        3 * h * hd           # q, k, v projections
        + 3 * hd * kern      # short convs on q, k, v
        + (h * d + d * hd)   # f_a, f_b (decay gate, low rank)
        + (h * d + d * hd)   # g_a, g_b (output gate, low rank)
        + h * heads          # b_proj (beta)
        + heads + hd         # A_log, dt_bias
        + d                  # output norm
        + hd * h             # o_proj
    )
    return _LinearMixer("kda", heads * d * d, (kern - 1) * 3 * hd, params, _chunked_linear_flops(heads, d, d))


def _mamba2(f: _Fields, h: int) -> _LinearMixer:
    # Mamba-2 (Nemotron-H)
    heads = f.get_int("mamba_num_heads")
    hd = f.get_int("mamba_head_dim")
    ds = f.get_int("ssm_state_size")
    ng = f.get_int("n_groups")
    kern = f.get_int("conv_kernel")
    d_inner = heads * hd
    conv_ch = d_inner + 2 * ng * ds
    params = (
        h * (2 * d_inner + 2 * ng * ds + heads)  # in_proj: z, x, B, C, dt
        + conv_ch * (kern + 1)                   # conv weight + bias
        + 3 * heads                              # A_log, D, dt_bias
        + d_inner                                # gated norm
        + d_inner * h                            # out_proj
    )
    mix = heads * (2 * LINEAR_CHUNK * ds + 2 * LINEAR_CHUNK * hd + 4 * ds * hd)
    return _LinearMixer("mamba2", heads * hd * ds, (kern - 1) * conv_ch, params, mix)


def _mamba1(f: _Fields, h: int) -> _LinearMixer:
    # Mamba-1 (Jamba)
    expand = f.get_int("mamba_expand")
    ds = f.get_int("mamba_d_state")
    kern = f.get_int("mamba_d_conv")
    dt_rank = f.get_int("mamba_dt_rank")
    d_inner = expand * h
    params = (
        h * 2 * d_inner                    # in_proj (x, z)
        + d_inner * (kern + 1)             # conv weight + bias
        + d_inner * (dt_rank + 2 * ds)     # x_proj -> dt, B, C
        + dt_rank * d_inner + d_inner      # dt_proj (+ bias)
        + d_inner * ds + d_inner           # A_log, D
        + dt_rank + 2 * ds                 # Jamba's dt / B / C layernorms
        + d_inner * h                      # out_proj
    )
    # selective scan: discretise (dt*A, dt*B*x), update h, read out C.h ~ 6 FLOPs per (channel, state)
    mix = 6 * d_inner * ds
    return _LinearMixer("mamba1", d_inner * ds, (kern - 1) * d_inner, params, mix)


def _lightning(f: _Fields, h: int) -> _LinearMixer:
    # Lightning attention (MiniMax-01 / M1): linear attention, one (d x d) state per head, no conv
    heads = f.get_int("num_attention_heads")
    d = f.get_int("head_dim", default=h // heads)
    hd = heads * d
    params = h * 3 * hd + h * hd + hd * h + hd  # qkv, output gate, out_proj, norm
    return _LinearMixer("lightning", heads * d * d, 0, params, _chunked_linear_flops(heads, d, d))


def _chunked_linear_flops(heads: int, dk: int, dv: int) -> int:
    """Per-token FLOPs of a chunked linear-attention / delta-rule mixer (chunk C):
    intra-chunk scores (2*C*dk) and weighted values (2*C*dv), read-out of the
    carried state (2*dk*dv) and its update (2*dk*dv), per head."""
    c = LINEAR_CHUNK
    return heads * (2 * c * dk + 2 * c * dv + 4 * dk * dv)


# --------------------------------------------------------------------------
# Families (keyed by the published ``model_type``)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Family:
    schedule: Callable[[_Fields, int], list[str]]
    linear: Callable[[_Fields, int], _LinearMixer] | None = None
    ffn: Callable[[_Fields, int, list[str]], list[str]] = _generic_ffn


_FAMILIES: dict[str, _Family] = {
    "llama": _Family(_all_full),
    "qwen3": _Family(_all_full),
    "deepseek_v3": _Family(_all_full),
    "minimax_m2": _Family(_all_full),
    "gemma3_text": _Family(_layer_types_or(_sliding_pattern_rule)),
    "qwen3_next": _Family(_layer_types_or(_interval_rule), _gdn),
    "qwen3_5_text": _Family(_layer_types_or(_interval_rule), _gdn),
    "qwen3_5_moe_text": _Family(_layer_types_or(_interval_rule), _gdn),
    "kimi_linear": _Family(_kimi_rule, _kda),
    "nemotron_h": _Family(_nemotron_rule, _mamba2, _nemotron_ffn),
    "jamba": _Family(_jamba_rule, _mamba1),
    "minimax_m1": _Family(_attn_type_list_rule, _lightning),
}


# --------------------------------------------------------------------------
# Attention and FFN geometry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Attention:
    kv_bytes_per_layer_token: int
    params: int
    score_flops_per_ctx_token: int  # one layer: 2 * n_q * (d_qk + d_v)


def _attention(f: _Fields, h: int) -> _Attention:
    nq = f.get_int("num_attention_heads")
    if f.has("kv_lora_rank"):  # MLA (DeepSeek-V3, Kimi Linear)
        r_kv = f.get_int("kv_lora_rank")
        rope = f.get_int("qk_rope_head_dim")
        nope = f.get_int("qk_nope_head_dim")
        dv = f.get_int("v_head_dim")
        dqk = nope + rope
        if f.has("q_lora_rank"):
            r_q = f.get_int("q_lora_rank")
            q_params = h * r_q + r_q + r_q * nq * dqk
        else:
            q_params = h * nq * dqk
        params = (
            q_params
            + h * (r_kv + rope) + r_kv      # kv_a_proj_with_mqa + kv_a_layernorm
            + r_kv * nq * (nope + dv)       # kv_b_proj
            + nq * dv * h                   # o_proj
        )
        return _Attention((r_kv + rope) * KV_ELEMENT_BYTES, params, 2 * nq * (dqk + dv))
    nkv = f.get_int("num_key_value_heads", default=nq)
    if nq % nkv:
        raise ConfigError(f.key("num_key_value_heads"), f"must divide num_attention_heads ({nq}), got {nkv}")
    hd = f.first_int(("head_dim", "attention_head_dim"), default=None)
    if hd is None:
        if h % nq:
            raise ConfigError(f.key("head_dim"), "missing, and hidden_size is not a multiple of num_attention_heads")
        hd = h // nq
    q_out = nq * hd * (2 if f.get_bool("attn_output_gate") else 1)  # Qwen3-Next/3.5 gate doubles q_proj
    params = h * q_out + 2 * h * nkv * hd + nq * hd * h
    return _Attention(2 * nkv * hd * KV_ELEMENT_BYTES, params, 2 * nq * 2 * hd)


def _ffn_params(f: _Fields, h: int) -> tuple[int, int, int]:
    """(dense FFN params, active MoE params, total MoE params) per layer."""
    act = f.cfg.get("mlp_hidden_act") or f.cfg.get("hidden_act") or "silu"
    mats = 2 if act in _NON_GATED_ACTS else 3
    dense_i = f.get_int("intermediate_size", default=0, minimum=0)
    dense = mats * h * dense_i

    n_exp = f.first_int(("num_experts", "n_routed_experts", "num_local_experts"), default=0, minimum=0)
    if n_exp == 0:
        return dense, 0, 0
    top_k = f.first_int(("num_experts_per_tok", "num_experts_per_token"))
    if top_k > n_exp:
        raise ConfigError(f.key("num_experts_per_tok"), f"must be <= number of experts ({n_exp}), got {top_k}")
    exp_i = f.get_int("moe_intermediate_size", default=dense_i)
    if exp_i == 0:
        raise ConfigError(f.key("moe_intermediate_size"), "missing required field (no intermediate_size either)")
    expert = mats * h * exp_i
    if f.has("shared_expert_intermediate_size"):  # Qwen: one shared expert of this width + its sigmoid gate
        shared = mats * h * f.get_int("shared_expert_intermediate_size", minimum=0) + h
    else:  # DeepSeek / Kimi: n shared experts of the routed width
        shared = f.first_int(("n_shared_experts", "num_shared_experts"), default=0, minimum=0) * expert
    router = h * n_exp
    return dense, top_k * expert + shared + router, n_exp * expert + shared + router


# --------------------------------------------------------------------------
# Public constructors
# --------------------------------------------------------------------------


def model_from_config(cfg: Mapping) -> ModelSpec:
    """Derive a :class:`ModelSpec` from a model's published config fields.

    ``cfg`` is the ``model`` config group (a plain mapping or an OmegaConf
    DictConfig). Raises :class:`ConfigError` naming the ``model.<key>`` at fault.
    """
    if not isinstance(cfg, Mapping):
        raise ConfigError("model", f"must be a mapping of config fields, got {type(cfg).__name__}")
    f = _Fields(_plain(cfg))

    name = f.get_str("name")
    state_checkpoints = f.get_str("state_checkpoints", default="last_and_branch")
    if state_checkpoints not in STATE_CHECKPOINT_MODES:
        raise ConfigError(
            "model.state_checkpoints",
            f"must be one of {', '.join(STATE_CHECKPOINT_MODES)}, got {state_checkpoints!r}",
        )
    state_dtype = f.get_str("state_dtype", default="engine")
    if state_dtype not in STATE_DTYPES:
        raise ConfigError("model.state_dtype", f"must be one of {', '.join(STATE_DTYPES)}, got {state_dtype!r}")

    model_type = f.get_str("model_type")
    family = _FAMILIES.get(model_type)
    if family is None:
        raise ConfigError("model.model_type", f"unknown model_type {model_type!r}; known: {', '.join(sorted(_FAMILIES))}")

    h = f.get_int("hidden_size")
    n_layers = f.get_int("num_hidden_layers")
    mixers = family.schedule(f, n_layers)
    if len(mixers) != n_layers:
        raise ConfigError(
            "model.num_hidden_layers",
            f"is {n_layers} but the layer pattern describes {len(mixers)} layers",
        )
    ffns = family.ffn(f, n_layers, mixers)

    n_full = mixers.count(FULL)
    n_swa = mixers.count(SWA)
    n_linear = mixers.count(LINEAR)

    # attention (full and sliding-window layers share one geometry)
    attn = _attention(f, h) if (n_full or n_swa) else None
    kv_full = n_full * attn.kv_bytes_per_layer_token if attn else 0
    attn_flops = n_full * attn.score_flops_per_ctx_token if attn else 0
    swa_window = 0
    swa_kv = 0
    swa_flops = 0
    if n_swa:
        swa_window = f.get_int("sliding_window")
        swa_kv = n_swa * attn.kv_bytes_per_layer_token
        swa_flops = n_swa * attn.score_flops_per_ctx_token

    # linear / SSM layers
    linear_state = 0
    linear_mix = 0
    linear_params = 0
    if n_linear:
        if family.linear is None:
            raise ConfigError("model.model_type", f"{model_type!r} has no linear-attention / SSM mixer")
        mixer = family.linear(f, h)
        conv_bytes = f.dtype_bytes(("dtype", "torch_dtype"), "bfloat16")
        if state_dtype == "bf16":
            rec_bytes = _DTYPE_BYTES["bfloat16"]
        else:
            rec_bytes = f.dtype_bytes(("engine_state_dtype", "mamba_ssm_dtype", "dtype", "torch_dtype"), "bfloat16")
        per_layer = mixer.recurrent_elems * rec_bytes + mixer.conv_elems * conv_bytes
        linear_state = n_linear * per_layer
        linear_mix = n_linear * mixer.mix_flops_per_token
        linear_params = n_linear * mixer.params

    # parameters (non-embedding): mixers + FFNs + the two per-layer norms
    dense_p, moe_active_p, moe_total_p = _ffn_params(f, h)
    if DENSE in ffns and dense_p == 0:
        raise ConfigError("model.intermediate_size", "missing required field (some layers have a dense FFN)")
    if MOE in ffns and moe_active_p == 0:
        raise ConfigError("model.num_experts", "missing required field (some layers are MoE)")
    attn_params = (n_full + n_swa) * attn.params if attn else 0
    norms = 2 * h * n_layers + h  # pre-mixer + pre-FFN norms, final norm
    n_dense, n_moe = ffns.count(DENSE), ffns.count(MOE)
    active = attn_params + linear_params + n_dense * dense_p + n_moe * moe_active_p + norms
    total = attn_params + linear_params + n_dense * dense_p + n_moe * moe_total_p + norms

    return ModelSpec(
        name=name,
        kv_bytes_per_token_full=kv_full,
        linear_state_bytes=linear_state,
        swa_window=swa_window,
        swa_kv_bytes_per_token=swa_kv,
        flops_per_token=float(2 * active),
        attn_flops_per_ctx_token=float(attn_flops),
        swa_flops_per_ctx_token=float(swa_flops),
        linear_mix_flops_per_token=float(linear_mix),
        n_full_layers=n_full,
        n_linear_layers=n_linear,
        n_swa_layers=n_swa,
        state_checkpoints=state_checkpoints,
        state_dtype=state_dtype,
        active_params=active,
        total_params=total,
    )


def conf_dir() -> pathlib.Path:
    """The bundled ``conf/`` folder (the repository's, or the installed package's)."""
    from .resources import conf_dir as bundled
    return bundled()


def known_models() -> list[str]:
    """Names (file stems) of ``conf/model/*.yaml``, sorted."""
    return sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml"))


_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def load_model(name: str, **overrides: Any) -> ModelSpec:
    """Read ``conf/model/<name>.yaml``, apply top-level ``overrides``
    (e.g. ``state_dtype="bf16"``) and derive the :class:`ModelSpec`."""
    import yaml  # PyYAML (an OmegaConf dependency); imported here to keep module import light

    known = known_models()
    if not isinstance(name, str) or not _NAME_RE.match(name) or name not in known:
        raise ConfigError("model", f"unknown model {name!r}; known: {', '.join(known)}")
    path = conf_dir() / "model" / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError("model", f"{path}: not valid YAML ({e})") from None
    if not isinstance(data, Mapping):
        raise ConfigError("model", f"{path}: must hold a mapping of config fields")
    data = dict(data)
    data.update(overrides)
    return model_from_config(data)
