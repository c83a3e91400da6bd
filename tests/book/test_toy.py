"""Tests for ropelab.book.toy: the passkey task, the RoPE decoder, and exact retraining of the shipped weights."""

import math
import os
import subprocess
import sys

import pytest
import torch

from ropelab import angles, scaled_inv_freq
from ropelab.book.extrapolate import (
    SHIPPED_KERNELS,
    Settings,
    shipped_weights,
    train_base_model,
)
from ropelab.book.toy import (
    ToyConfig,
    ToyDecoder,
    attention_entropy,
    deterministic,
    evaluate,
    passkey_at,
    passkey_batch,
    query_attention,
    remap_tables,
    rope_tables,
    train,
)
from ropelab.book.ch11 import attention_readout, turns_table
from ropelab.variants import RemapPass, rerope_passes

CFG = ToyConfig()


def test_passkey_batch_layout():
    gen = torch.Generator().manual_seed(3)
    tokens, answers = passkey_batch(CFG, 2000, 20, gen)
    assert tokens.shape == (2000, 20) and answers.shape == (2000,)
    assert (tokens[:, -1] == CFG.query).all()
    is_marker = tokens == CFG.marker
    assert (
        is_marker.sum(1) == 1
    ).all()  # exactly one marker, never the last two positions
    where = is_marker.int().argmax(1)
    assert int(where.max()) == 17 and int(where.min()) == 0  # uniform over 0..length-3
    assert torch.equal(tokens[torch.arange(2000), where + 1], answers)
    assert int(tokens[:, :-1].masked_fill(is_marker[:, :-1], 0).max()) < CFG.vocab


@pytest.mark.parametrize("length", [2, 0, 3.0])
def test_passkey_batch_rejects_short_lengths(length):
    with pytest.raises(ValueError, match="length"):
        passkey_batch(CFG, 4, length, torch.Generator())


def test_deterministic_rejects_bad_threads():
    with pytest.raises(ValueError, match="threads"):
        deterministic(0)


def test_rope_tables_are_cos_sin_of_the_scaled_angles():
    scaling = {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    cos, sin = rope_tables(CFG, 100, scaling)
    theta, temperature = scaled_inv_freq(CFG.head_dim, CFG.base, scaling)
    assert temperature > 1.0
    # an independent computation: complex exponentials of the angles, in float64
    z = temperature * torch.polar(
        torch.ones(100, 16, dtype=torch.float64), angles(range(100), theta).double()
    )
    assert cos.shape == (100, CFG.head_dim) and cos.dtype == torch.float32
    torch.testing.assert_close(
        cos.double(), torch.cat((z.real, z.real), -1), atol=1e-6, rtol=0
    )
    torch.testing.assert_close(
        sin.double(), torch.cat((z.imag, z.imag), -1), atol=1e-6, rtol=0
    )


def test_model_is_causal_and_gets_position_only_from_rope():
    torch.manual_seed(0)
    model = ToyDecoder(CFG).eval()
    gen = torch.Generator().manual_seed(0)
    tokens, _ = passkey_batch(CFG, 2, 30, gen)
    with torch.no_grad():
        _, maps = model(tokens)
        changed = tokens.clone()
        changed[:, 20] = (changed[:, 20] + 1) % CFG.vocab
        _, maps2 = model(changed)
        # without rotation (every angle zero) attention is blind to order
        cos, sin = torch.ones(30, CFG.head_dim), torch.zeros(30, CFG.head_dim)
        h = model.embed(tokens)
        row_a = model.layers[0](h, cos, sin)[1][:, :, -1]
        perm = torch.cat((torch.randperm(29, generator=gen), torch.tensor([29])))
        row_b = model.layers[0](h[:, perm], cos, sin)[1][:, :, -1]
    for a, b in zip(maps, maps2):
        assert a.shape == (2, CFG.n_heads, 30, 30)
        assert torch.equal(
            a[:, :, :20, :], b[:, :, :20, :]
        )  # rows before position 20 never see it
        assert torch.all(a.triu(1) == 0)
    torch.testing.assert_close(row_b, row_a[..., perm], atol=1e-6, rtol=0)


def test_remap_with_the_plain_positions_is_ordinary_rope_bit_for_bit():
    model = shipped_weights()
    gen = torch.Generator().manual_seed(3)
    tokens, _ = passkey_batch(CFG, 4, 50, gen)
    pos = torch.arange(50).double()
    plain = [RemapPass(pos, pos, torch.ones(50, 50, dtype=torch.bool))]
    with torch.no_grad():
        a, maps_a = model(tokens)
        b, maps_b = model(tokens, remap=plain)
        # a window as long as the sequence never remaps: ReRoPE is then RoPE
        c, _ = model(tokens, remap=rerope_passes(50, 50))
        # a window of 1 puts every earlier key at distance 1: other logits
        d, maps_d = model(tokens, remap=rerope_passes(50, 1))
    assert torch.equal(a, b) and torch.equal(a, c)
    assert all(torch.equal(x, y) for x, y in zip(maps_a, maps_b))
    assert not torch.allclose(a, d)
    # with ρ = 1 for all earlier keys, layer 0's scores depend on content only
    assert torch.all(maps_d[0].triu(1) == 0)


def test_remap_tables_reject_bad_passes():
    pos = torch.arange(5).double()
    full = torch.ones(5, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match="at least one"):
        remap_tables(CFG, [])
    with pytest.raises(ValueError, match="exactly once"):
        remap_tables(CFG, [RemapPass(pos, pos, full.triu(1))])
    with pytest.raises(ValueError, match=r"\(5,\)"):
        remap_tables(CFG, [RemapPass(pos[:4], pos, full)])


def test_attention_entropy():
    n = 7
    uniform = torch.full((n, n), 1.0 / n)
    assert torch.allclose(
        attention_entropy(uniform), torch.full((n,), math.log(n), dtype=torch.float32)
    )
    assert torch.equal(attention_entropy(torch.eye(n)), torch.zeros(n))


def test_passkey_at_moves_the_value_and_keeps_one_marker():
    tokens, answer = passkey_at(CFG, 30, 7, seed=4)
    assert tokens.shape == (1, 30) and answer.shape == (1,)
    assert (tokens[0] == CFG.marker).nonzero().flatten().tolist() == [6]
    assert int(tokens[0, 7]) == int(answer) and int(tokens[0, -1]) == CFG.query
    drawn, _ = passkey_batch(CFG, 1, 30, torch.Generator().manual_seed(4))
    moved = (drawn[0] != tokens[0]).nonzero().flatten().tolist()
    assert set(moved) <= {6, 7, int((drawn[0] == CFG.marker).int().argmax())}
    for bad in (0, 29):
        with pytest.raises(ValueError, match="value_pos"):
            passkey_at(CFG, 30, bad)


def test_query_attention_is_the_last_layers_query_row():
    torch.manual_seed(0)
    model = ToyDecoder(ToyConfig(d_model=16))
    rows = query_attention(model, 12, samples=5, seed=2)
    assert rows.shape == (5, 2, 12)
    assert torch.allclose(rows.sum(-1), torch.ones(5, 2))
    tokens, _ = passkey_batch(model.cfg, 5, 12, torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, maps = model(tokens)
    assert torch.equal(rows, maps[1][:, :, 11])
    pi = {"rope_type": "linear", "factor": 4.0}
    assert not torch.equal(query_attention(model, 12, scaling=pi, samples=5), rows)


def test_turns_table_gives_wavelengths_and_turns():
    theta = torch.tensor([2 * math.pi, math.pi / 2, 0.1, 0.01], dtype=torch.float64)
    turns = {1: theta * 10 / (2 * math.pi), 4: theta * 40 / (2 * math.pi)}
    lines = turns_table(theta, turns, every=2).splitlines()
    assert lines[0] == "pair j      λ_j  turns in L  turns in 4L"
    assert lines[1] == "     0      1.0       10.00        40.00"
    assert lines[2].split() == ["2", "62.8", "0.16", "0.64"]
    assert len(lines) == 3
    with pytest.raises(ValueError, match="every"):
        turns_table(theta, turns, every=0)


def test_attention_readout_reads_the_detector_and_the_fetch():
    heads, n, short = 2, 16, 8
    first_s, second_s = torch.zeros(2, heads, short, short)
    second_s[0, -1, 3], second_s[1, -1, 3] = 0.5, 1.0
    first_s[1, 3, 2] = 0.75
    first, second = torch.zeros(heads, n, n), torch.zeros(heads, n, n)
    first[1, [5, 9, 12], 3] = torch.tensor([0.6, 0.2, 0.9])  # marker at 3, value 4
    first[1, 4, 3] = 1.0  # the value's own row does not count
    second[0, -1, 12], second[1, -1, 9], second[:, -1, 4] = 0.7, 0.4, 1e-3
    text = attention_readout({short: (first_s, second_s), n: (first, second)},
                             {short: 3, n: 4}, short)
    assert text.splitlines() == [
        "L: layer 2 on the value ['0.5000', '1.0000'] | layer 1 head 1, "
        "value on marker 0.75",
        "2L: 2 other queries put > 0.5 on the marker, at 5 to 12; "
        "at 9, 12: 0.200, 0.900",
        "2L: layer 2 on 12, 9: 0.70, 0.40; on the value: at most 1e-03",
    ]


def test_training_learns_and_is_deterministic():
    deterministic(1)
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        model = ToyDecoder(ToyConfig(d_model=32))
        losses = train(model, steps=30, length=16, seed=5, batch=16)
        runs.append((losses, model.state_dict()))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])
    assert runs[0][0][-1] < runs[0][0][0]


RETRAIN = """
import torch
from ropelab.book.extrapolate import Settings, shipped_weights, train_base_model
from ropelab.book.toy import deterministic
deterministic(1)
shipped = shipped_weights().state_dict()
retrained = train_base_model(Settings()).state_dict()
assert shipped.keys() == retrained.keys()
differ = [k for k in shipped if not torch.equal(shipped[k], retrained[k])]
print(torch.backends.cpu.get_cpu_capability(), differ)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"),
    reason="the shipped weights come from torch's x86-64 AVX2 kernels",
)
def test_retraining_reproduces_the_shipped_weights_exactly():
    # torch reads its kernel choice when it starts, so retrain in a fresh process
    env = {**os.environ, **SHIPPED_KERNELS}
    done = subprocess.run(
        [sys.executable, "-c", RETRAIN], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["AVX2", "[]"], done.stdout
    model = shipped_weights()
    assert evaluate(model, Settings().train_len, samples=128)["accuracy"] == 1.0
