"""Seeded synthetic workload: multi-turn conversations and agent-like sessions.

The model
---------
Sessions start as a Poisson process (``session_rate_per_s``); the first one
starts at t = 0. A session is a *conversation* (category ``text``) or, with
probability ``agent_fraction``, an *agent* session (category ``agent``: more
turns, short pauses, larger new inputs such as tool results, short outputs).
A session has a geometric number of turns (mean ``turns_mean`` or
``agent_turns_mean``, support 1, 2, …).

Each session draws one system prompt from a population of
``system_prompts`` prompts with Zipf popularity (``P(rank r) ∝ r^-s``, ``s =
system_prompt_zipf``); a prompt's length is lognormal around
``system_prompt_tokens``. Turn ``k``'s prompt is

    prompt_k = prompt_{k-1} + output_{k-1} + message_k,   prompt_1 = system + message_1

so every prompt of a session is a prefix of the session's final prompt.
Message and output lengths are lognormal (median, sigma). The gap between
turns is the previous response's generation time (``decode_s_per_token`` ×
its output tokens) plus an exponential think time. A session ends at its last
drawn turn or just before a prompt would exceed ``max_input_tokens`` (the
first turn's message is shortened to fit). With ``think_time_sigma > 0`` the
think time is lognormal with the same mean instead (a heavier tail).

Context rewrites
----------------
With probability ``rewrite_prob`` a later turn rewrites its session's
history (an agent clearing old tool results, a reminder early in the
conversation changing): everything after the system prompt is new content in
that turn, so it shares only the system prompt with the earlier turns, and
the later turns extend the rewritten prompt. Prompt lengths do not change.
(In the WEKA Claude Code traces about 3 % of turns re-send most of their
history as new blocks, and those turns hold most of the traces' misses.)

Sub-agents
----------
Each turn of an agent session spawns a Poisson number of sub-agents (mean
``subagents_per_agent_turn``, default 0). A sub-agent is a conversation
branch of its own (category ``subagent``, the parent's ``session_id``, turns
numbered 1, 2, … within the branch): it starts when the spawning turn's
response has been generated, runs a geometric number of turns (mean
``subagent_turns_mean``) with short pauses, overlapping the parent's later
turns in time, and its prompt grows like any session's, from a task message
(``subagent_first_message_tokens``) and tool results
(``subagent_message_tokens``). Its prompt starts with the session's system
prompt, so parent and sub-agents share that prefix and nothing else (or,
with ``subagent_system_prompt_tokens > 0``, with a sub-agent system prompt
shared by the siblings and not by the parent, as in the WEKA Claude Code
traces).

Request-level signals
---------------------
Each request carries what a server knows when its response is done
(simulation-model §1): ``think_time_s`` (the think time drawn before the turn, 0
for a first turn), ``api_time_s`` (its output's generation time, ``out ×
decode_s_per_token``), ``agent`` (0 for a session's own turns, k for its k-th
sub-agent) and ``stop_reason``: a turn of an agent session or a sub-agent that
is followed by another turn of the same conversation ends in ``tool_use``; every
other turn (conversations, and the last turn of each agent conversation) ends in
``end_turn``. These are derived from the draws above, so they change no table
that the generator gave before they existed, except for the new columns.

Block hashes
------------
Every token of a session's stream belongs to one *segment* (the system
prompt, a user message, a model output) with a 64-bit key: system-prompt keys
depend only on the prompt's index in the population, message and output keys
on (session, turn). A block ``[a, b)`` of the stream has a content id derived
from the pieces of segments it covers, each described by (segment key, first
and last offset inside the segment). So a block's content id is a function of
its tokens alone, and a final partial block (``b - a < block_tokens``) has a
different id from the full block that later covers the same start.

Hashes are chained as in vLLM: ``h_k = mix(h_{k-1}, content_k)`` from a fixed
root, with ``mix(a, b) = splitmix64(splitmix64(a) ^ b)`` in numpy uint64
arithmetic. Hence equal prefix ⇒ equal hash; the full-block hashes of turn
``k+1`` extend those of turn ``k``; turn ``k``'s final partial block gets a new
hash once a later turn fills it; sessions sharing a system prompt share the
hashes of its full blocks. A sub-agent, and the part of a session after a
rewrite, is one more stream: its message and output keys use a stream id
after the sessions' ids, and its prompt starts from the system prompt.

Requests are sorted by arrival (ties: stream, then turn) and numbered
``0 … N-1`` in that order. Same spec and seed ⇒ the identical table.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

import numpy as np
import pyarrow as pa

from cluster_sim import libm
from cluster_sim.errors import ConfigError
from cluster_sim.trace.schema import build_table

__all__ = ["Plan", "SyntheticSpec", "default_spec", "generate", "plan", "spec_from_dict", "spec_json", "splitmix64", "mix64"]

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_C1 = _U64(0xBF58476D1CE4E5B9)
_C2 = _U64(0x94D049BB133111EB)

# domain tags keep the key spaces of different segment kinds apart
_TAG_ROOT = 0x524F4F54  # "ROOT"
_TAG_SYSTEM = 0x53595354  # "SYST"
_TAG_MESSAGE = 0x4D534747  # "MSGG"
_TAG_OUTPUT = 0x4F555450  # "OUTP"
_TAG_SUBAGENT_SYSTEM = 0x53554253  # "SUBS"

#: Knobs added after ``traces/default.parquet`` was generated; see :func:`spec_json`.
_LATER_KNOBS = (
    "think_time_sigma", "subagents_per_agent_turn", "subagent_turns_mean", "subagent_first_message_tokens",
    "subagent_message_tokens", "subagent_output_tokens", "subagent_think_time_s", "subagent_system_prompt_tokens",
    "rewrite_prob",
)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on a uint64 array (wraps mod 2^64)."""
    z = np.asarray(x, dtype=_U64) + _GOLDEN
    z = (z ^ (z >> _U64(30))) * _C1
    z = (z ^ (z >> _U64(27))) * _C2
    return z ^ (z >> _U64(31))


def mix64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Combine two uint64 arrays into one 64-bit hash (order matters)."""
    return splitmix64(splitmix64(a) ^ np.asarray(b, dtype=_U64))


@dataclass(frozen=True)
class SyntheticSpec:
    """Knobs of the synthetic workload. Token counts are tokens, times seconds."""

    num_sessions: int = 300
    session_rate_per_s: float = 0.5
    """Poisson rate of session starts."""

    turns_mean: float = 5.0
    """Mean of the geometric number of turns of a conversation (>= 1)."""
    think_time_s: float = 20.0
    """Mean of the exponential user think time between a response and the next message."""
    decode_s_per_token: float = 0.02
    """Generation time per output token, added to the gap before the next turn."""

    system_prompts: int = 16
    """Size of the system-prompt population."""
    system_prompt_zipf: float = 1.0
    """Zipf exponent of system-prompt popularity (0 = uniform)."""
    system_prompt_tokens: int = 1500
    """Median system-prompt length (lognormal over the population)."""
    system_prompt_sigma: float = 0.5

    first_message_tokens: int = 600
    """Median length of a session's first user message (lognormal)."""
    first_message_sigma: float = 1.0
    message_tokens: int = 150
    """Median length of each later user message: the per-turn input growth besides the previous output."""
    message_sigma: float = 1.0
    output_tokens: int = 250
    """Median output length (lognormal)."""
    output_sigma: float = 0.7
    max_output_tokens: int = 4096

    agent_fraction: float = 0.0
    """Share of sessions that are agent-like (category 'agent')."""
    agent_turns_mean: float = 15.0
    agent_think_time_s: float = 2.0
    agent_message_tokens: int = 400
    """Median new input per agent turn (tool results)."""
    agent_output_tokens: int = 120

    block_tokens: int = 64
    max_input_tokens: int = 32768
    """Prompt cap: a session ends before a turn whose prompt would exceed it."""

    # ---- knobs added later (listed in a table's metadata only when not at their defaults)
    think_time_sigma: float = 0.0
    """0: exponential think times (mean ``think_time_s`` / ``agent_think_time_s``); > 0: lognormal
    think times with the same mean and this sigma (heavier tail). Sub-agents keep exponential
    pauses (machine-driven tool loops)."""
    subagents_per_agent_turn: float = 0.0
    """Mean (Poisson) number of sub-agents each agent turn spawns; 0 = none."""
    subagent_turns_mean: float = 10.0
    """Mean of the geometric number of requests of one sub-agent."""
    subagent_first_message_tokens: int = 400
    """Median length of the task a sub-agent receives (its first message)."""
    subagent_message_tokens: int = 1500
    """Median new input per later sub-agent turn (tool results)."""
    subagent_output_tokens: int = 150
    subagent_think_time_s: float = 1.0
    rewrite_prob: float = 0.0
    """Probability that a later turn of a session rewrites its history: everything after the system
    prompt becomes new content (as when an agent clears old tool results or a reminder early in
    the conversation changes), so the turn shares only the system prompt with the turns before it
    and later turns extend the rewritten prompt. Prompt lengths are unchanged."""
    subagent_system_prompt_tokens: int = 0
    """0: a sub-agent's prompt starts with its session's system prompt (a shared prefix with the
    parent); > 0: with a sub-agent system prompt of about this many tokens instead, one per entry
    of the system-prompt population (siblings share it, the parent does not)."""

    def validate(self, prefix: str = "workload.synthetic") -> "SyntheticSpec":
        """Raise ConfigError (key ``prefix.<knob>``) for an out-of-range knob; return self."""

        def bad(name: str, why: str) -> None:
            raise ConfigError(f"{prefix}.{name}", f"{why}, got {getattr(self, name)!r}")

        def number(name: str) -> float:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                bad(name, "must be a number")
            return float(v)

        for name in ("num_sessions", "system_prompts", "block_tokens", "max_input_tokens",
                     "system_prompt_tokens", "first_message_tokens", "message_tokens",
                     "output_tokens", "max_output_tokens", "agent_message_tokens", "agent_output_tokens",
                     "subagent_first_message_tokens", "subagent_message_tokens", "subagent_output_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                bad(name, "must be a positive integer")
        v = self.subagent_system_prompt_tokens
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            bad("subagent_system_prompt_tokens", "must be a non-negative integer")
        for name in ("session_rate_per_s",):
            if not (np.isfinite(number(name)) and number(name) > 0):
                bad(name, "must be a positive number")
        for name in ("turns_mean", "agent_turns_mean", "subagent_turns_mean"):
            if not (np.isfinite(number(name)) and number(name) >= 1):
                bad(name, "must be >= 1")
        for name in ("think_time_s", "agent_think_time_s", "decode_s_per_token", "system_prompt_zipf",
                     "system_prompt_sigma", "first_message_sigma", "message_sigma", "output_sigma",
                     "think_time_sigma", "rewrite_prob", "subagents_per_agent_turn", "subagent_think_time_s"):
            if not (np.isfinite(number(name)) and number(name) >= 0):
                bad(name, "must be a non-negative number")
        if not 0 <= self.agent_fraction <= 1:
            bad("agent_fraction", "must be in [0, 1]")
        if not 0 <= self.rewrite_prob <= 1:
            bad("rewrite_prob", "must be in [0, 1]")
        if self.max_input_tokens < 2:
            bad("max_input_tokens", "must be at least 2")
        return self


def default_spec() -> SyntheticSpec:
    """The workload of the bundled ``traces/default.parquet`` (with seed 0).

    About 2,500 requests from 300 sessions over roughly 20 minutes, 20 % of
    them agent-like; median prompt a few thousand tokens; 64-token blocks.
    """
    return SyntheticSpec(
        num_sessions=650,
        session_rate_per_s=0.5,
        turns_mean=3.5,
        think_time_s=20.0,
        decode_s_per_token=0.02,
        system_prompts=16,
        system_prompt_zipf=1.0,
        system_prompt_tokens=1000,
        system_prompt_sigma=0.5,
        first_message_tokens=800,
        first_message_sigma=1.0,
        message_tokens=600,
        message_sigma=1.0,
        output_tokens=250,
        output_sigma=0.7,
        max_output_tokens=4096,
        agent_fraction=0.2,
        agent_turns_mean=7.0,
        agent_think_time_s=2.0,
        agent_message_tokens=900,
        agent_output_tokens=120,
        block_tokens=64,
        max_input_tokens=16384,
    )


def _ragged_arange(counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(c)`` for every ``c`` in ``counts``."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) - np.repeat(starts, counts)


def _segmented_cumsum(values: np.ndarray, group_starts: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at each index in ``group_starts`` (sorted, first is 0)."""
    total = np.cumsum(values)
    before = np.concatenate([[0], total[:-1]])[group_starts]
    lengths = np.diff(np.append(group_starts, len(values)))
    return total - np.repeat(before, lengths)


def _lognormal_int(z: np.ndarray, median: np.ndarray, sigma: np.ndarray, lo: int, hi: int) -> np.ndarray:
    vals = np.rint(libm.exp(libm.log(median) + sigma * z))
    return np.clip(vals, lo, hi).astype(np.int64)


def _stream_turns(rng: np.random.Generator, spec: SyntheticSpec, n_turns: np.ndarray, sys_len: np.ndarray,
                  start: np.ndarray, first_median: np.ndarray, msg_median: np.ndarray, out_median: np.ndarray,
                  think_mean: np.ndarray, think_sigma: float = 0.0) -> tuple[np.ndarray, ...]:
    """The turns of a group of streams (one conversation branch each), the cap applied.

    Per-stream inputs: number of turns, system-prompt length, start time and
    the medians / mean think time of its turns (exponential, or lognormal with
    that mean when ``think_sigma > 0``). Draws, in this order, the
    message lengths, output lengths and think times of every turn. Returns
    per-turn ``(stream, turn, msg, out, prompt_len, arrival, think)`` (stream = index
    into the inputs; ``think`` = the think time before the turn, 0 for a first turn),
    grouped by stream in order, turns ascending.
    """
    cap = spec.max_input_tokens
    R0 = int(n_turns.sum())
    t_sess = np.repeat(np.arange(len(n_turns)), n_turns)
    t_turn = _ragged_arange(n_turns) + 1
    first_of_session = np.cumsum(n_turns) - n_turns

    msg_med = np.where(t_turn == 1, first_median[t_sess], msg_median[t_sess])
    msg_sigma = np.where(t_turn == 1, spec.first_message_sigma, spec.message_sigma)
    msg = _lognormal_int(rng.standard_normal(R0), msg_med.astype(np.float64), msg_sigma, 1, cap)
    out = _lognormal_int(rng.standard_normal(R0), out_median[t_sess].astype(np.float64), spec.output_sigma, 1,
                         spec.max_output_tokens)
    if think_sigma > 0:  # lognormal with the same mean
        sig = think_sigma
        think = libm.exp(sig * rng.standard_normal(R0) - 0.5 * sig * sig) * think_mean[t_sess]
    else:
        think = rng.exponential(1.0, R0) * think_mean[t_sess]

    # the first message is shortened so that every stream keeps its first turn
    msg[first_of_session] = np.minimum(msg[first_of_session], cap - sys_len)

    prev_out = np.concatenate([[0], out[:-1]])
    prev_out[first_of_session] = 0
    growth = msg + prev_out
    growth[first_of_session] += sys_len
    prompt_len = _segmented_cumsum(growth, first_of_session)

    gap = prev_out * spec.decode_s_per_token + think
    gap[first_of_session] = 0.0
    arrival = start[t_sess] + _segmented_cumsum(gap, first_of_session)

    think = np.where(t_turn == 1, 0.0, think)
    # the cap: a stream ends before its first over-long prompt
    keep = prompt_len <= cap  # prompt lengths grow within a stream: keep is a prefix
    return tuple(a[keep] for a in (t_sess, t_turn, msg, out, prompt_len, arrival, think))


#: blocks hashed per batch of streams, and block hashes written per batch of requests: they bound
#: the generator's working memory beside its output (docs/decisions.md #74)
BATCH_BLOCKS = 1 << 20


def _cuts(weights: np.ndarray, per_batch: int) -> list[tuple[int, int]]:
    """Index ranges ``[i0, i1)`` of about ``per_batch`` total weight each (at least one index)."""
    cum = np.zeros(len(weights) + 1, dtype=np.int64)
    np.cumsum(weights, out=cum[1:])
    out, i0, n = [], 0, len(weights)
    while i0 < n:
        i1 = int(np.searchsorted(cum, cum[i0] + per_batch, side="right")) - 1
        i1 = min(max(i1, i0 + 1), n)
        out.append((i0, i1))
        i0 = i1
    return out


def _block_hashes(B: int, n_full: np.ndarray, full_first: np.ndarray, base: np.ndarray, t_sess: np.ndarray,
                  prompt_len: np.ndarray, first_turn: np.ndarray, kept_turns: np.ndarray, seg_start: np.ndarray,
                  seg_end: np.ndarray, seg_key: np.ndarray, root: np.ndarray,
                  per_batch: int = BATCH_BLOCKS) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every full block of every stream, hash of every turn's partial tail), streams in batches.

    Every stream's blocks depend on its own segments only, so a batch of streams is hashed
    alone: the same hashes as all streams at once, with working arrays of one batch."""
    NF = int(n_full.sum())
    has_tail = prompt_len % B > 0
    tail_before = np.zeros(len(prompt_len) + 1, dtype=np.int64)
    np.cumsum(has_tail, out=tail_before[1:])
    full_hash = np.empty(NF, dtype=_U64)
    tail_hash = np.empty(int(tail_before[-1]), dtype=_U64)
    for s0, s1 in _cuts(n_full + kept_turns, per_batch):
        u0, u1 = int(first_turn[s0]), int(first_turn[s1 - 1] + kept_turns[s1 - 1])   # the batch's turns
        nf = n_full[s0:s1]
        ff = full_first[s0:s1] - full_first[s0]
        nfb = int(nf.sum())
        fb_sess = np.repeat(np.arange(s0, s1), nf)
        fb_a = base[fb_sess] + _ragged_arange(nf) * B
        del fb_sess
        ht = has_tail[u0:u1]
        ts = t_sess[u0:u1][ht]
        pl = prompt_len[u0:u1][ht]
        tf = pl // B
        tail_a = base[ts] + tf * B
        blk_a = np.concatenate([fb_a, tail_a])
        blk_b = np.concatenate([fb_a + B, base[ts] + pl])
        del fb_a, tail_a, pl
        # content id of each block from the segment pieces it covers
        i0 = np.searchsorted(seg_start, blk_a, side="right") - 1
        i1 = np.searchsorted(seg_start, blk_b - 1, side="right") - 1
        n_pieces = i1 - i0 + 1
        rank = _ragged_arange(n_pieces)
        p_blk = np.repeat(np.arange(len(blk_a)), n_pieces)
        p_seg = i0[p_blk] + rank
        del i0, i1
        s_at = seg_start[p_seg]
        lo = np.maximum(blk_a[p_blk], s_at) - s_at
        hi = np.minimum(blk_b[p_blk], seg_end[p_seg]) - s_at
        del p_blk, s_at, blk_a, blk_b
        piece = mix64(mix64(mix64(seg_key[p_seg], lo.astype(_U64)), hi.astype(_U64)), rank.astype(_U64))
        del lo, hi, rank, p_seg
        piece_start = np.cumsum(n_pieces) - n_pieces
        content = splitmix64(np.add.reduceat(piece, piece_start) if len(piece) else piece)
        del piece, piece_start, n_pieces

        # chain the full blocks of every stream, one depth at a time across the batch's streams
        fh = np.empty(nfb, dtype=_U64)
        by_depth = np.argsort(-nf, kind="stable")
        n_sorted = nf[by_depth]
        first_sorted = ff[by_depth]
        max_depth = int(n_sorted[0]) if len(nf) else 0
        # the streams with more than j full blocks are a prefix of that order
        active = np.searchsorted(-n_sorted, -np.arange(max_depth), side="left")
        for j, c in enumerate(active):
            idx = first_sorted[:c] + j
            parent = root if j == 0 else fh[idx - 1]
            fh[idx] = mix64(parent, content[idx])

        # a turn's partial tail hangs off the turn's last full block
        tail_parent = np.full(len(tf), root[0], dtype=_U64)
        nz = tf > 0
        tail_parent[nz] = fh[ff[ts[nz] - s0] + tf[nz] - 1]
        tail_hash[tail_before[u0]:tail_before[u1]] = mix64(tail_parent, content[nfb:])
        full_hash[full_first[s0]:full_first[s0] + nfb] = fh
        del fh, content, tail_parent
    return full_hash, tail_hash


def _gather(out: np.ndarray, offs: np.ndarray, first_full: np.ndarray, r_full: np.ndarray, r_tail: np.ndarray,
            full_hash: np.ndarray, tail_hash: np.ndarray) -> None:
    """Write the block hashes of a run of requests into ``out`` (``offs`` from 0, one more than
    the requests): request ``i`` holds its stream's first ``r_full[i]`` full blocks (from
    ``first_full[i]``), then its partial tail ``tail_hash[r_tail[i]]`` if ``r_tail[i] >= 0``."""
    if not len(out):
        return
    c = np.diff(offs)
    if len(full_hash):   # a tail's slot is filled below
        gather = np.repeat(first_full, c) + _ragged_arange(c)
        np.take(full_hash, np.minimum(gather, len(full_hash) - 1), out=out)
        del gather
    wt = r_tail >= 0
    out[offs[1:][wt] - 1] = tail_hash[r_tail[wt]]


def _request_hashes(offsets: np.ndarray, first_full: np.ndarray, r_full: np.ndarray, r_tail: np.ndarray,
                    full_hash: np.ndarray, tail_hash: np.ndarray, per_batch: int = BATCH_BLOCKS) -> np.ndarray:
    """Every request's block hashes, concatenated in request order, written a batch of requests at a time.

    Request ``i`` holds its stream's first ``r_full[i]`` full blocks (from ``first_full[i]``),
    then its partial tail ``tail_hash[r_tail[i]]`` if ``r_tail[i] >= 0``."""
    values = np.empty(int(offsets[-1]), dtype=_U64)
    counts = np.diff(offsets)
    for j0, j1 in _cuts(counts, per_batch):
        v0 = int(offsets[j0])
        _gather(values[v0:int(offsets[j1])], offsets[j0:j1 + 1] - v0, first_full[j0:j1], r_full[j0:j1],
                r_tail[j0:j1], full_hash, tail_hash)
    return values


def generate(spec: SyntheticSpec, seed: int) -> pa.Table:
    """Generate the canonical trace table for ``spec`` with random seed ``seed`` (an int >= 0).

    All randomness comes from ``numpy.random.default_rng(seed)``, drawn in a
    fixed order, so the same spec and seed give the identical table. The
    draws of sub-agents come after all the others, so a spec without
    sub-agents gives the table it gave before sub-agents existed.
    """
    return plan(spec, seed).table()


class Plan:
    """A generated trace before its requests' block hashes are written out.

    Holds every per-request column of the table (``columns``, the keywords of
    :func:`~cluster_sim.trace.schema.build_table`), the hashes of every stream's full
    blocks (``full_hash``, ``full_first[s]`` = stream ``s``'s first) and of every turn's
    partial tail (``tail_hash``), and per request in arrival order its stream (``r_sess``),
    its number of full blocks (``r_full``) and the index of its tail (``r_tail``, -1 when
    it has none). Request ``i``'s block hashes are ``full_hash[full_first[r_sess[i]] :
    ... + r_full[i]]``, then ``tail_hash[r_tail[i]]`` (:meth:`values`): the whole column
    (:meth:`table`) is about 10x the size of ``full_hash``, and :mod:`.stream` never makes
    it (docs/decisions.md #107)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def n_requests(self) -> int:
        return len(self.r_full)

    def values(self, j0: int, j1: int) -> np.ndarray:
        """The block hashes of requests ``[j0, j1)``, concatenated (uint64, a new array)."""
        o = self.offsets
        out = np.empty(int(o[j1] - o[j0]), dtype=_U64)
        _gather(out, o[j0:j1 + 1] - o[j0], self.full_first[self.r_sess[j0:j1]], self.r_full[j0:j1],
                self.r_tail[j0:j1], self.full_hash, self.tail_hash)
        return out

    def table(self, values: np.ndarray | None = None) -> pa.Table:
        """The canonical table; ``values`` replaces the block-hash values (same length; the
        streamed path passes a placeholder that is never read, for the table's IPC layout)."""
        if values is None:
            values = _request_hashes(self.offsets, self.full_first[self.r_sess], self.r_full, self.r_tail,
                                     self.full_hash, self.tail_hash)
        table = build_table(block_hashes=(self.offsets, values), **self.columns)
        meta = dict(table.schema.metadata)
        meta[b"synthetic_spec"] = spec_json(self.spec).encode()
        meta[b"synthetic_seed"] = str(self.seed).encode()
        return table.replace_schema_metadata(meta)


def plan(spec: SyntheticSpec, seed: int, *, batch_blocks: int | None = None) -> Plan:
    """Every draw and every block hash of :func:`generate`, without the requests' hash column
    (blocks hashed ``batch_blocks``, default :data:`BATCH_BLOCKS`, at a time)."""
    spec.validate()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError("seed", f"must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    S = spec.num_sessions
    B = spec.block_tokens
    cap = spec.max_input_tokens
    ns = splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=_U64))  # per-seed key namespace

    # ---- sessions --------------------------------------------------------
    gaps = rng.exponential(1.0 / spec.session_rate_per_s, S)
    session_start = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    is_agent = rng.random(S) < spec.agent_fraction
    turns_mean = np.where(is_agent, spec.agent_turns_mean, spec.turns_mean)
    n_turns = rng.geometric(1.0 / turns_mean)

    P = spec.system_prompts
    weights = libm.power(np.arange(1, P + 1, dtype=np.float64), -spec.system_prompt_zipf)
    prompt_len_pop = _lognormal_int(
        rng.standard_normal(P), spec.system_prompt_tokens, spec.system_prompt_sigma, 1, cap - 1
    )
    sys_idx = rng.choice(P, size=S, p=weights / weights.sum())
    sys_len = prompt_len_pop[sys_idx]
    sys_key = mix64(mix64(ns, np.full(P, _TAG_SYSTEM, dtype=_U64)), np.arange(P, dtype=_U64))

    # ---- the sessions' own turns ------------------------------------------
    t_sess, t_turn, msg, out, prompt_len, arrival, think = _stream_turns(
        rng, spec, n_turns, sys_len, session_start,
        first_median=np.full(S, spec.first_message_tokens),
        msg_median=np.where(is_agent, spec.agent_message_tokens, spec.message_tokens),
        out_median=np.where(is_agent, spec.agent_output_tokens, spec.output_tokens),
        think_mean=np.where(is_agent, spec.agent_think_time_s, spec.think_time_s),
        think_sigma=spec.think_time_sigma,
    )
    # streams: one per session (stream id = session id), then one per sub-agent
    stream_session = np.arange(S, dtype=np.int64)
    stream_kind = is_agent.astype(np.int32)  # 0 text, 1 agent, 2 subagent
    stream_agent = np.zeros(S, dtype=np.int32)  # 0: the session's own; k: its k-th sub-agent
    stream_sys_key = sys_key[sys_idx]
    stream_sys_len = sys_len
    R_own = len(t_sess)  # the sessions' own turns come first in the turn arrays

    # ---- sub-agents: branches spawned by agent turns ----------------------
    if spec.subagents_per_agent_turn > 0 and is_agent.any():
        spawning = np.flatnonzero(is_agent[t_sess])  # kept agent turns
        k = rng.poisson(spec.subagents_per_agent_turn, len(spawning))
        parent_turn = np.repeat(spawning, k)
        A = len(parent_turn)
        if A:
            a_sess = t_sess[parent_turn]
            # a sub-agent starts when the response that launched it is generated
            a_start = arrival[parent_turn] + out[parent_turn] * spec.decode_s_per_token
            a_turns = rng.geometric(1.0 / spec.subagent_turns_mean, A)
            if spec.subagent_system_prompt_tokens > 0:
                # its own system prompt, one per entry of the population (siblings share it)
                sub_pop_len = _lognormal_int(rng.standard_normal(P), spec.subagent_system_prompt_tokens,
                                             spec.system_prompt_sigma, 1, cap - 1)
                sub_key = mix64(mix64(ns, np.full(P, _TAG_SUBAGENT_SYSTEM, dtype=_U64)), np.arange(P, dtype=_U64))
                a_sys_len = sub_pop_len[sys_idx[a_sess]]
                a_sys_key = sub_key[sys_idx[a_sess]]
            else:  # the session's system prompt: shared prefix with the parent
                a_sys_len = sys_len[a_sess]
                a_sys_key = sys_key[sys_idx[a_sess]]
            s_str, s_turn, s_msg, s_out, s_len, s_arr, s_think = _stream_turns(
                rng, spec, a_turns, a_sys_len, a_start,
                first_median=np.full(A, spec.subagent_first_message_tokens),
                msg_median=np.full(A, spec.subagent_message_tokens),
                out_median=np.full(A, spec.subagent_output_tokens),
                think_mean=np.full(A, spec.subagent_think_time_s),
            )
            t_sess = np.concatenate([t_sess, s_str + S])
            t_turn = np.concatenate([t_turn, s_turn])
            msg = np.concatenate([msg, s_msg])
            out = np.concatenate([out, s_out])
            prompt_len = np.concatenate([prompt_len, s_len])
            arrival = np.concatenate([arrival, s_arr])
            think = np.concatenate([think, s_think])
            # k-th sub-agent of its session, in spawn order
            first_of = np.r_[True, a_sess[1:] != a_sess[:-1]]
            rank = np.arange(A) - np.maximum.accumulate(np.where(first_of, np.arange(A), 0))
            stream_agent = np.concatenate([stream_agent, (rank + 1).astype(np.int32)])
            stream_session = np.concatenate([stream_session, a_sess.astype(np.int64)])
            stream_kind = np.concatenate([stream_kind, np.full(A, 2, dtype=np.int32)])
            stream_sys_key = np.concatenate([stream_sys_key, a_sys_key])
            stream_sys_len = np.concatenate([stream_sys_len, a_sys_len])

    # ---- context rewrites: a later turn whose history is new content -------
    if spec.rewrite_prob > 0 and R_own:
        rw = np.zeros(len(t_sess), dtype=bool)
        rw[:R_own] = (rng.random(R_own) < spec.rewrite_prob) & (t_turn[:R_own] > 1)
        if rw.any():
            # the rewritten turn and the turns after it form a new stream of the same session that
            # shares only the system prompt with the old one; its first message is the whole history
            NS0 = len(stream_session)
            count = np.cumsum(rw)
            stream_first = (np.cumsum(np.bincount(t_sess, minlength=NS0)) - np.bincount(t_sess, minlength=NS0))
            since = count - count[stream_first[t_sess]]  # rewrites so far in the turn's stream
            old_stream = t_sess[rw]
            msg[rw] = prompt_len[rw] - stream_sys_len[old_stream]
            t_sess = np.where(since > 0, NS0 + count - 1, t_sess)
            stream_session = np.concatenate([stream_session, stream_session[old_stream]])
            stream_kind = np.concatenate([stream_kind, stream_kind[old_stream]])
            stream_agent = np.concatenate([stream_agent, stream_agent[old_stream]])
            stream_sys_key = np.concatenate([stream_sys_key, stream_sys_key[old_stream]])
            stream_sys_len = np.concatenate([stream_sys_len, stream_sys_len[old_stream]])
            regroup = np.argsort(t_sess, kind="stable")
            t_sess, t_turn, msg, out, prompt_len, arrival, think = (
                a[regroup] for a in (t_sess, t_turn, msg, out, prompt_len, arrival, think))

    # From here on a "session" is a stream: t_sess indexes streams, grouped in order.
    NS = len(stream_session)
    R = len(t_sess)
    kept_turns = np.bincount(t_sess, minlength=NS)
    first_turn = np.cumsum(kept_turns) - kept_turns
    last_turn = first_turn + kept_turns - 1
    stream_len = prompt_len[last_turn]  # each stream = its last prompt

    # ---- segments of every stream, in one global token coordinate ---------
    base = np.cumsum(stream_len) - stream_len
    is_last = np.zeros(R, dtype=bool)
    is_last[last_turn] = True
    sess_u = t_sess.astype(_U64)
    turn_u = t_turn.astype(_U64)

    msg_key = mix64(mix64(mix64(ns, np.full(R, _TAG_MESSAGE, dtype=_U64)), sess_u), turn_u)
    out_key = mix64(mix64(mix64(ns, np.full(R, _TAG_OUTPUT, dtype=_U64)), sess_u), turn_u)

    o_mask = ~is_last  # the last turn's output is in no prompt
    seg_start = np.concatenate([
        base,                                            # system prompt
        base[t_sess] + prompt_len - msg,                 # user message k
        (base[t_sess] + prompt_len)[o_mask],             # output k, before message k+1
    ])
    seg_key = np.concatenate([stream_sys_key, msg_key, out_key[o_mask]])
    order = np.argsort(seg_start, kind="stable")
    seg_start = seg_start[order]
    seg_key = seg_key[order]
    seg_end = np.append(seg_start[1:], base[-1] + stream_len[-1])
    if not np.all(seg_end > seg_start):  # every segment has >= 1 token by construction
        raise AssertionError("synthetic generator produced an empty segment")

    # ---- blocks: every full block of each stream, and each turn's partial tail, in stream batches
    n_full = stream_len // B
    full_first = np.cumsum(n_full) - n_full  # index of a stream's first full block
    tail_full = prompt_len // B  # full blocks in the turn's prompt
    has_tail = prompt_len % B > 0
    root = mix64(ns, np.array([_TAG_ROOT], dtype=_U64))
    full_hash, tail_hash = _block_hashes(B, n_full, full_first, base, t_sess, prompt_len, first_turn, kept_turns,
                                         seg_start, seg_end, seg_key, root, batch_blocks or BATCH_BLOCKS)
    del seg_start, seg_end, seg_key, order, msg_key, out_key, sess_u, turn_u, is_last, o_mask, base

    # ---- requests in arrival order ---------------------------------------
    req_order = np.lexsort((t_turn, t_sess, arrival))
    tail_idx = np.full(R, -1, dtype=np.int64)
    tail_idx[has_tail] = np.arange(int(has_tail.sum()))

    r_sess = t_sess[req_order]
    r_full = tail_full[req_order]
    r_tail = tail_idx[req_order]
    counts = r_full + (r_tail >= 0)
    offsets = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    del counts

    # ---- request-level signals: what a server knows when the response is done --------
    # a conversation (a session's own streams, or one sub-agent, across rewrites) goes on after
    # every turn but its last; an agent or sub-agent turn that goes on ends in a tool call, any
    # other turn hands the word back (end_turn)
    r_kind = stream_kind[r_sess]
    conv = stream_session[r_sess] * (int(stream_agent.max(initial=0)) + 1) + stream_agent[r_sess]
    last_of_conv = np.zeros(R, dtype=bool)
    if R:
        by_conv = np.lexsort((np.arange(R), conv))     # requests are already in arrival order
        ends = np.r_[conv[by_conv][1:] != conv[by_conv][:-1], True]
        last_of_conv[by_conv[ends]] = True
    stop = pa.array(["end_turn", "tool_use"], type=pa.string()).take(
        pa.array(((r_kind > 0) & ~last_of_conv).astype(np.int8)))
    r_out = out[req_order]

    kinds = ["text", "agent"] + (["subagent"] if NS > S else [])
    category = pa.DictionaryArray.from_arrays(pa.array(stream_kind[r_sess]), pa.array(kinds))
    columns = dict(
        arrival_s=arrival[req_order],
        input_tokens=prompt_len[req_order].astype(np.int32),
        output_tokens=out[req_order].astype(np.int32),
        block_tokens=B,
        source=f"synthetic(seed={seed})",
        session_id=stream_session[r_sess],
        category=category,
        turn=t_turn[req_order].astype(np.int32),
        stop_reason=stop,
        think_time_s=think[req_order],
        api_time_s=r_out * spec.decode_s_per_token,
        agent=stream_agent[r_sess],
    )
    return Plan(spec=spec, seed=seed, columns=columns, offsets=offsets, r_sess=r_sess, r_full=r_full,
                r_tail=r_tail, full_hash=full_hash, tail_hash=tail_hash, full_first=full_first, n_full=n_full)


def spec_json(spec: SyntheticSpec) -> str:
    """The spec as the JSON stored in a generated table's metadata.

    Knobs added after the first release (:data:`_LATER_KNOBS`) are listed only
    when they differ from their defaults, so a trace generated before they
    existed (``traces/default.parquet``) keeps its exact metadata.
    """
    d = asdict(spec)
    defaults = {f.name: f.default for f in fields(SyntheticSpec)}
    for name in _LATER_KNOBS:
        if d[name] == defaults[name]:
            del d[name]
    return json.dumps(d, sort_keys=True)


def spec_from_dict(values: dict) -> SyntheticSpec:
    """Build a spec from a mapping, rejecting unknown knobs with ConfigError."""
    known = {f.name for f in fields(SyntheticSpec)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"workload.synthetic.{unknown[0]}", f"unknown knob; known: {', '.join(sorted(known))}")
    return SyntheticSpec(**values).validate()
