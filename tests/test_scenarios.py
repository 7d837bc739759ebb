"""Scripted scenarios with hand-computed outcomes (simulation-model §2-§5)."""
from __future__ import annotations

import pytest

from cluster_sim.cache import DRAM, HBM, SSD
from cluster_sim.model import load_model

from simhelpers import make_node, replay, trace_from_paths

QN = "qwen3_next_80b_a3b"


def test_three_tiers_lru_by_hand():
    m = load_model(QN)
    F = m.fa_bytes(256)                      # 6,291,456 B: 256 tokens x 24 KiB
    S = m.state_bytes(256)                   # 37.69 MiB of Gated DeltaNet state
    assert (F, S) == (6_291_456, 39_518_208)
    A, B, C, D, E, Fc, G = 1, 2, 3, 4, 5, 6, 7
    paths = [[A, B], [C, D], [E, Fc], [A, B, G], [C, D], [A, B]]
    tr = trace_from_paths(paths)
    hw = dict(hbm_cache_bytes=2 * F + S, dram_bytes=2 * F + S, ssd_bytes=10 * F + 4 * S,
              host_link_bytes_per_s=400e9, ssd_read_bytes_per_s=13e9, ssd_read_latency_s=1e-4,
              gpus_per_node=8, gpu_flops=989e12, mfu=0.4)
    node = make_node(tr, QN, **hw)
    recs = replay(node, tr)
    s = node.stats
    # R1-R3 miss; R3 pushes R1's chunks HBM -> DRAM -> SSD (B, A, then B's state);
    # R4 resumes from B's state on SSD and cannot cache G (HBM all pinned);
    # R4's loads push R2's chunks to SSD; R5 resumes from D's state on SSD; R6 finds A, B, sB in DRAM.
    assert [r["h"] for r in recs] == [0, 0, 0, 2, 2, 2]
    assert s.hits == {"hits_hbm_fa": 0, "hits_hbm_state": 0, "hits_dram_fa": 2, "hits_dram_state": 1,
                      "hits_ssd_fa": 4, "hits_ssd_state": 2}
    assert s.ssd_bytes_written_fa == 6 * F      # B, A (R3); D, C (R4); F, E (R5)
    assert s.ssd_bytes_written_state == 3 * S   # sB (R3), sD (R4), sF (R5)
    assert s.insert_skipped_bytes == F + S      # G and its state in R4
    assert (s.ssd_admissions_hit_fa + s.ssd_admissions_hit_state,
            s.ssd_admissions_fa + s.ssd_admissions_state) == (6, 9)
    rate = 8 * 989e12 * 0.4
    L2, L3 = 2 * 256 + 10, 3 * 256 + 10
    ssd = lambda b: b / 13e9 + b / 400e9 + 1e-4
    expect = [
        m.prefill_flops(0, L2) / rate,
        m.prefill_flops(0, L2) / rate,
        m.prefill_flops(0, L2) / rate,
        ssd(2 * F + S) + m.prefill_flops(512, L3) / rate,
        ssd(2 * F + S) + m.prefill_flops(512, L2) / rate,
        (2 * F + S) / 400e9 + m.prefill_flops(512, L2) / rate,
    ]
    assert [r["latency"] for r in recs] == pytest.approx(expect, rel=1e-12)
    assert sum(s.load_latency) / len(s.load_latency) == pytest.approx(sum(expect) / 6, rel=1e-12)
    # final residency: HBM holds copies of A, B, sB (R6 copied them up, leaving the DRAM copies);
    # C, D, sD were demoted through DRAM onto their valid SSD copies; SSD holds nine payloads
    st = node.st
    ch = {n: int(tr.flat[tr.offsets[i]:tr.offsets[i + 1]][k])
          for i, p in enumerate(paths) for k, n in enumerate(p)}
    assert st.used == [2 * F + S, 2 * F + S, 6 * F + 3 * S]
    assert st.resident(2 * ch[A], DRAM) and not st.resident(2 * ch[C], DRAM) and st.resident(2 * ch[C], SSD)
    assert st.resident(2 * ch[A], HBM) and st.resident(2 * ch[B] + 1, HBM)
    assert not st.res[2 * ch[G]]


def test_two_turn_conversation_hits_fa_and_end_state():
    tr = trace_from_paths([[1, 2], [1, 2, 3, 4]])
    node = make_node(tr, QN, dram_bytes="1TB")
    recs = replay(node, tr)
    assert [r["h"] for r in recs] == [0, 2]
    assert node.stats.hits["hits_dram_fa"] == 2 and node.stats.hits["hits_dram_state"] == 1
    assert node.stats.chunk_misses == 4 and node.stats.chunks_requested == 6


@pytest.mark.parametrize("mode,third_h", [("last", 0), ("last_and_branch", 1)])
def test_branch_off_shared_prefix(mode, third_h):
    # req1 saves a state at its end only; req2 branches off at chunk 1 (FA resident, no state there):
    # under last_and_branch it checkpoints the branch point, so req3 (another branch) resumes there.
    tr = trace_from_paths([[1, 2, 3], [1, 5], [1, 7]])
    node = make_node(tr, load_model(QN, state_checkpoints=mode), dram_bytes="1TB")
    recs = replay(node, tr)
    assert [r["h"] for r in recs] == [0, 0, third_h]
    assert [r["r"] for r in recs] == [0, 1, 1]
    assert node.stats.hits["hits_dram_state"] == (1 if third_h else 0)


def test_every_chunk_checkpoints_make_any_prefix_resumable():
    tr = trace_from_paths([[1, 2, 3], [1, 2, 9]])
    node = make_node(tr, load_model(QN, state_checkpoints="every_chunk"), dram_bytes="1TB")
    assert [r["h"] for r in replay(node, tr)] == [0, 2]


def test_pure_attention_needs_no_state():
    tr = trace_from_paths([[1, 2, 3], [1, 2, 9]])
    node = make_node(tr, "llama3_1_70b", dram_bytes="1TB")
    assert [r["h"] for r in replay(node, tr)] == [0, 2]
    assert node.st.state_bytes.sum() == 0


def test_gemma_needs_its_window_kv():
    g = load_model("gemma3_27b", state_checkpoints="last")
    assert g.has_state and g.swa_window == 1024
    # the window STATE grows with the end position until the window is full
    assert g.state_bytes(512) == 512 * g.swa_kv_bytes_per_token
    assert g.state_bytes(4096) == 1024 * g.swa_kv_bytes_per_token == 416 * 2**20
    tr = trace_from_paths([[1, 2, 3], [1, 2, 4], [1, 2, 3, 5]])
    node = make_node(tr, g, dram_bytes="1TB")
    recs = replay(node, tr)
    # req2 shares two chunks whose FA is resident but has no window KV at chunk 2: no hit;
    # req3 resumes from the window saved at the end of chunk 3
    assert [r["h"] for r in recs] == [0, 0, 3]
    assert node.stats.hits["hits_dram_state"] == 1


def test_state_on_ssd_counts_window_bytes():
    g = load_model("gemma3_27b", state_checkpoints="last")
    F = g.fa_bytes(256)
    tr = trace_from_paths([[1, 2], [3, 4], [1, 2, 5]])
    # DRAM holds one request's payloads; the second pushes the first to SSD
    S2 = g.state_bytes(512)
    node = make_node(tr, g, dram_bytes=2 * F + S2, ssd_bytes="1TB")
    recs = replay(node, tr)
    assert recs[2]["h"] == 2
    assert node.stats.hits["hits_ssd_state"] == 1 and node.stats.hits["hits_ssd_fa"] == 2
    assert node.stats.ssd_bytes_written_state >= S2


def test_dram_hit_with_no_hbm_changes_no_residency():
    tr = trace_from_paths([[1, 2], [1, 2]])
    node = make_node(tr, "llama3_1_70b", dram_bytes="1TB")
    replay(node, tr)
    assert node.st.used[HBM] == 0 and node.st.used[SSD] == 0
    assert node.st.used[DRAM] == 2 * node.st.fa_bytes


def test_fully_reused_aligned_prompt_recomputes_one_token_for_latency_only():
    tr = trace_from_paths([[1, 2], [1, 2]], tail=0)
    node = make_node(tr, "llama3_1_70b", dram_bytes="1TB")
    recs = replay(node, tr)
    assert recs[1]["h"] == 2
    assert node.stats.recomputed_tokens == 512          # only the first request's tokens
    assert recs[1]["latency"] > 2 * node.st.fa_bytes / node.hw.host_link_bytes_per_s


def test_inclusive_ssd_demotion_of_valid_copy_writes_nothing():
    m = load_model("llama3_1_70b")
    F = m.fa_bytes(256)
    # DRAM of 2 chunks: [1,2] goes to SSD when [3,4] arrives; [1,2] comes back (copied to DRAM,
    # SSD copy stays valid); [5,6] pushes it out again: no new SSD write for chunks 1 and 2
    tr = trace_from_paths([[1, 2], [3, 4], [1, 2], [5, 6]])
    node = make_node(tr, m, dram_bytes=2 * F, ssd_bytes="1TB")
    replay(node, tr)
    # writes: 1,2 (req2); 3,4 (req3); req4 evicts 1,2 whose SSD copies are valid
    assert node.stats.ssd_bytes_written_fa == 4 * F


def test_pinned_overflow_skips_deepest_first():
    m = load_model("llama3_1_70b")
    F = m.fa_bytes(256)
    tr = trace_from_paths([[1, 2, 3, 4, 5]])
    node = make_node(tr, m, dram_bytes=3 * F)
    recs = replay(node, tr)
    assert node.stats.insert_skipped_bytes == 2 * F
    ids = tr.path(0)
    assert [bool(node.st.res[2 * c]) for c in ids] == [True, True, True, False, False]
    assert recs[0]["h"] == 0


def test_zero_capacity_tier_is_absent():
    tr = trace_from_paths([[1, 2], [1, 2]])
    node = make_node(tr, "llama3_1_70b")       # every tier 0: nothing is cached, nothing counted
    recs = replay(node, tr)
    assert [r["h"] for r in recs] == [0, 0]
    assert node.stats.ssd_bytes_written_fa == 0
    assert node.stats.insert_skipped_bytes == 4 * node.st.fa_bytes
