"""Bad input to the public API: one table, an entry per function and per kind of input.

Each entry calls one public function (``ropelab.__all__``) with one bad argument
and names the exception and a pattern its message must hold: the argument's
name, so that a caller never decodes an error from deep inside torch. The
kinds: wrong types and dtypes (tables' too), NaN / infinite / zero / negative
numbers where a number has a meaning, sparse and complex tensors, empty
tensors, another device (``meta`` stands for it on a machine without a GPU:
data on another device is refused, while integer positions and the d/2
frequencies are moved where the computation is, except from meta, which has no
values), shapes that do not broadcast. A second table holds what each function accepts
on purpose (its docstring's policy): empty batches and sequences, frequencies of
zero, NaN in the data. Meta inputs on their own are accepted everywhere
(shapes only): ``test_devices.py``.
"""

from __future__ import annotations

import pytest
import torch

import ropelab
from ropelab import (
    RotaryEmbedding,
    angles,
    apply_rotary,
    apply_rotary_complex,
    cos_sin,
    decay_bound,
    inv_freq,
    packed_positions,
    permute_qk_weight,
    positions_from_mask,
    rerotate_keys,
    rope_scores,
    rotate_half,
    rotate_interleaved,
    rotation_matrix,
    scaled_inv_freq,
    to_half_split,
    to_interleaved,
    unpermute_qk_weight,
    wavelengths,
)

NAN, INF = float("nan"), float("inf")
M = "meta"  # "another device" on a machine without a GPU
g = torch.Generator().manual_seed(0)
X = torch.randn(2, 3, 5, 8, generator=g)  # (batch, heads, seq, dim)
TH = inv_freq(8)
POS = torch.arange(5)
C, S = cos_sin(POS, TH)
W = torch.randn(16, 6, generator=g)  # a q/k projection: 2 heads of dim 8, hidden 6
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
LONG = {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 64,
        "short_factor": [1.0] * 4, "long_factor": [1.0, 2.0, 3.0, 4.0]}


def sparse(t):
    return t.to_sparse()


def cplx(t):
    return torch.complex(t, t)


def with_theta(*values):
    return torch.tensor(values, dtype=torch.float32)


def emb():
    return RotaryEmbedding(8, max_position=16)


def yarn(**kw):
    return {**YARN, **kw}


def triton_rotary(x, cos, sin):
    # the Triton kernel's entry point (ropelab.kernels.triton, optional); a CUDA x or
    # Triton's interpreter (TRITON_INTERPRET=1, set by conftest.py) passes its device test
    kt = pytest.importorskip("ropelab.kernels.triton")
    return kt.apply_rotary(x, cos, sin, layout="half_split")


T, V = TypeError, ValueError

# (function, kind, call, exception, a pattern of the message: the argument's name)
BAD = [
    # inv_freq / wavelengths: numbers with a meaning
    ("inv_freq", "odd dim", lambda: inv_freq(7), V, "dim"),
    ("inv_freq", "zero dim", lambda: inv_freq(0), V, "dim"),
    ("inv_freq", "negative dim", lambda: inv_freq(-8), V, "dim"),
    ("inv_freq", "float dim", lambda: inv_freq(8.0), T, "dim"),
    ("inv_freq", "NaN base", lambda: inv_freq(8, NAN), V, "base"),
    ("inv_freq", "infinite base", lambda: inv_freq(8, INF), V, "base"),
    ("inv_freq", "zero base", lambda: inv_freq(8, 0), V, "base"),
    ("inv_freq", "negative base", lambda: inv_freq(8, -10.0), V, "base"),
    ("inv_freq", "base 1", lambda: inv_freq(8, 1.0), V, "base"),
    ("inv_freq", "string base", lambda: inv_freq(8, "1e4"), T, "base"),
    ("inv_freq", "int dtype", lambda: inv_freq(8, dtype=torch.int32), T, "dtype"),
    ("inv_freq", "half dtype", lambda: inv_freq(8, dtype=torch.float16), T, "dtype"),
    ("inv_freq", "complex dtype", lambda: inv_freq(8, dtype=torch.complex64), T, "dtype"),
    ("wavelengths", "odd dim", lambda: wavelengths(7), V, "dim"),
    ("wavelengths", "NaN base", lambda: wavelengths(8, NAN), V, "base"),
    ("wavelengths", "negative base", lambda: wavelengths(8, -2.0), V, "base"),
    # scaled_inv_freq: the rope dict's numbers
    ("scaled_inv_freq", "scaling a string", lambda: scaled_inv_freq(8, 1e4, "yarn"), T,
     "scaling"),
    ("scaled_inv_freq", "unknown rope_type",
     lambda: scaled_inv_freq(8, 1e4, {"rope_type": "ntk"}), V, "rope_type"),
    ("scaled_inv_freq", "NaN factor", lambda: scaled_inv_freq(8, 1e4, yarn(factor=NAN)),
     V, "factor"),
    ("scaled_inv_freq", "infinite factor",
     lambda: scaled_inv_freq(8, 1e4, yarn(factor=INF)), V, "factor"),
    ("scaled_inv_freq", "zero factor", lambda: scaled_inv_freq(8, 1e4, yarn(factor=0)),
     V, "factor"),
    ("scaled_inv_freq", "negative factor",
     lambda: scaled_inv_freq(8, 1e4, {"rope_type": "linear", "factor": -2.0}), V,
     "factor"),
    ("scaled_inv_freq", "zero original length",
     lambda: scaled_inv_freq(8, 1e4, yarn(original_max_position_embeddings=0)), V,
     "original_max_position_embeddings"),
    ("scaled_inv_freq", "negative original length",
     lambda: scaled_inv_freq(8, 1e4, yarn(original_max_position_embeddings=-64)), V,
     "original_max_position_embeddings"),
    ("scaled_inv_freq", "NaN attention_factor",
     lambda: scaled_inv_freq(8, 1e4, yarn(attention_factor=NAN)), V, "attention_factor"),
    ("scaled_inv_freq", "zero attention_factor",
     lambda: scaled_inv_freq(8, 1e4, yarn(attention_factor=0.0)), V,
     "attention_factor"),
    ("scaled_inv_freq", "negative attention_factor",
     lambda: scaled_inv_freq(8, 1e4, yarn(attention_factor=-1.0)), V,
     "attention_factor"),
    ("scaled_inv_freq", "NaN beta_fast",
     lambda: scaled_inv_freq(8, 1e4, yarn(beta_fast=NAN)), V, "beta_fast"),
    ("scaled_inv_freq", "infinite mscale",
     lambda: scaled_inv_freq(8, 1e4, yarn(mscale=INF, mscale_all_dim=1.0)), V, "mscale"),
    ("scaled_inv_freq", "infinite high_freq_factor",
     lambda: scaled_inv_freq(8, 1e4, {**LLAMA3, "high_freq_factor": INF}), V,
     "high_freq_factor"),
    ("scaled_inv_freq", "NaN in long_factor",
     lambda: scaled_inv_freq(8, 1e4, {**LONG, "long_factor": [1.0, NAN, 1.0, 1.0]},
                             seq_len=128), V, "long_factor"),
    ("scaled_inv_freq", "zero in short_factor",
     lambda: scaled_inv_freq(8, 1e4, {**LONG, "short_factor": [1.0, 0.0, 1.0, 1.0]}),
     V, "short_factor"),
    ("scaled_inv_freq", "zero seq_len", lambda: scaled_inv_freq(8, 1e4, YARN, seq_len=0),
     V, "seq_len"),
    ("scaled_inv_freq", "NaN base", lambda: scaled_inv_freq(8, NAN, YARN), V, "base"),
    ("scaled_inv_freq", "int dtype",
     lambda: scaled_inv_freq(8, 1e4, YARN, dtype=torch.int64), T, "dtype"),
    # angles: positions and frequencies
    ("angles", "float positions", lambda: angles(POS.float(), TH), T, "positions"),
    ("angles", "bool positions", lambda: angles(POS > 2, TH), T, "positions"),
    ("angles", "complex positions", lambda: angles(cplx(POS.float()), TH), T,
     "positions"),
    ("angles", "negative position", lambda: angles([0, -1], TH), V, "positions"),
    ("angles", "sparse positions", lambda: angles(sparse(POS), TH), T, "positions"),
    ("angles", "positions on meta, no values to move",
     lambda: angles(POS.to(M), TH), V, "positions"),
    ("angles", "a list for inv_freq", lambda: angles(POS, [1.0, 0.1]), T, "inv_freq"),
    ("angles", "int inv_freq", lambda: angles(POS, TH.int()), T, "inv_freq"),
    ("angles", "half inv_freq", lambda: angles(POS, TH.half()), T, "inv_freq"),
    ("angles", "complex inv_freq", lambda: angles(POS, cplx(TH)), T, "inv_freq"),
    ("angles", "sparse inv_freq", lambda: angles(POS, sparse(TH)), T, "inv_freq"),
    ("angles", "2-D inv_freq", lambda: angles(POS, TH[None]), V, "inv_freq"),
    ("angles", "empty inv_freq", lambda: angles(POS, TH[:0]), V, "inv_freq"),
    ("angles", "NaN inv_freq", lambda: angles(POS, with_theta(1.0, NAN)), V, "inv_freq"),
    ("angles", "infinite inv_freq", lambda: angles(POS, with_theta(INF, 0.1)), V,
     "inv_freq"),
    # cos_sin: the tables' dtype and scale
    ("cos_sin", "int dtype", lambda: cos_sin(POS, TH, dtype=torch.int32), T, "dtype"),
    ("cos_sin", "bool dtype", lambda: cos_sin(POS, TH, dtype=torch.bool), T, "dtype"),
    ("cos_sin", "complex dtype", lambda: cos_sin(POS, TH, dtype=torch.complex64), T,
     "dtype"),
    ("cos_sin", "dtype a string", lambda: cos_sin(POS, TH, dtype="float32"), T, "dtype"),
    ("cos_sin", "NaN attention_scaling", lambda: cos_sin(POS, TH, attention_scaling=NAN),
     V, "attention_scaling"),
    ("cos_sin", "infinite attention_scaling",
     lambda: cos_sin(POS, TH, attention_scaling=INF), V, "attention_scaling"),
    ("cos_sin", "zero attention_scaling", lambda: cos_sin(POS, TH, attention_scaling=0),
     V, "attention_scaling"),
    ("cos_sin", "negative attention_scaling",
     lambda: cos_sin(POS, TH, attention_scaling=-1.0), V, "attention_scaling"),
    ("cos_sin", "attention_scaling a string",
     lambda: cos_sin(POS, TH, attention_scaling="1"), T, "attention_scaling"),
    ("cos_sin", "unknown layout", lambda: cos_sin(POS, TH, layout="paired"), V, "layout"),
    ("cos_sin", "NaN inv_freq", lambda: cos_sin(POS, with_theta(NAN, 0.1)), V,
     "inv_freq"),
    ("cos_sin", "positions on meta, no values to move", lambda: cos_sin(POS.to(M), TH), V,
     "positions"),
    # rotate_half / rotate_interleaved
    ("rotate_half", "int x", lambda: rotate_half(POS[:4]), T, "x"),
    ("rotate_half", "complex x", lambda: rotate_half(cplx(X)), T, "x"),
    ("rotate_half", "sparse x", lambda: rotate_half(sparse(X)), T, "x"),
    ("rotate_half", "odd last axis", lambda: rotate_half(X[..., :7]), V, "x"),
    ("rotate_half", "empty last axis", lambda: rotate_half(X[..., :0]), V, "x"),
    ("rotate_half", "0-d x", lambda: rotate_half(torch.tensor(1.0)), V, "x"),
    ("rotate_interleaved", "sparse x", lambda: rotate_interleaved(sparse(X)), T, "x"),
    ("rotate_interleaved", "odd last axis", lambda: rotate_interleaved(X[..., :7]), V,
     "x"),
    # apply_rotary: x, the tables, layout, rotary_dim, out
    ("apply_rotary", "a list for x", lambda: apply_rotary(X.tolist(), C, S), T, "x"),
    ("apply_rotary", "int x", lambda: apply_rotary(X.int(), C, S), T, "x"),
    ("apply_rotary", "complex x", lambda: apply_rotary(cplx(X), C, S), T, "x"),
    ("apply_rotary", "sparse x", lambda: apply_rotary(sparse(X), C, S), T, "x"),
    ("apply_rotary", "1-D x", lambda: apply_rotary(X[0, 0, 0], C[0], S[0]), V, "x"),
    ("apply_rotary", "odd dim", lambda: apply_rotary(X[..., :7], C, S), V, "x"),
    ("apply_rotary", "empty dim", lambda: apply_rotary(X[..., :0], C[:, :0], S[:, :0]),
     V, "x"),
    ("apply_rotary", "int cos", lambda: apply_rotary(X, C.int(), S), T, "cos"),
    ("apply_rotary", "bool sin", lambda: apply_rotary(X, C, S > 0), T, "sin"),
    ("apply_rotary", "complex sin", lambda: apply_rotary(X, C, cplx(S)), T, "sin"),
    ("apply_rotary", "sparse cos", lambda: apply_rotary(X, sparse(C), S), T, "cos"),
    ("apply_rotary", "cos on another device", lambda: apply_rotary(X, C.to(M), S), V,
     "cos"),
    ("apply_rotary", "sin on another device", lambda: apply_rotary(X, C, S.to(M)), V,
     "sin"),
    ("apply_rotary", "x on another device", lambda: apply_rotary(X.to(M), C, S), V,
     "cos"),
    ("apply_rotary", "tables of another length",
     lambda: apply_rotary(X, C[:4], S[:4]), V, "broadcast"),
    ("apply_rotary", "tables of another width", lambda: apply_rotary(X, C[:, :6], S[:, :6]),
     V, "cos"),
    ("apply_rotary", "cos and sin of different shapes",
     lambda: apply_rotary(X, C, S[None]), V, "cos and sin"),
    ("apply_rotary", "unknown layout", lambda: apply_rotary(X, C, S, layout="neox"), V,
     "layout"),
    ("apply_rotary", "odd rotary_dim",
     lambda: apply_rotary(X, C[:, :3], S[:, :3], rotary_dim=3), V, "rotary_dim"),
    ("apply_rotary", "zero rotary_dim",
     lambda: apply_rotary(X, C[:, :0], S[:, :0], rotary_dim=0), V, "rotary_dim"),
    ("apply_rotary", "rotary_dim past dim", lambda: apply_rotary(X, C, S, rotary_dim=10),
     V, "rotary_dim"),
    ("apply_rotary", "float rotary_dim", lambda: apply_rotary(X, C, S, rotary_dim=8.0), T,
     "rotary_dim"),
    ("apply_rotary", "out a list", lambda: apply_rotary(X, C, S, out=[]), T, "out"),
    ("apply_rotary", "out of another shape",
     lambda: apply_rotary(X, C, S, out=torch.empty(2, 3, 5, 6)), V, "out"),
    ("apply_rotary", "out of another dtype",
     lambda: apply_rotary(X, C, S, out=torch.empty_like(X, dtype=torch.int32)), V, "out"),
    ("apply_rotary", "out on another device",
     lambda: apply_rotary(X, C, S, out=torch.empty_like(X, device=M)), V, "out"),
    ("apply_rotary", "sparse out",
     lambda: apply_rotary(X, C, S, out=sparse(torch.zeros_like(X))), T, "out"),
    # apply_rotary_complex
    ("apply_rotary_complex", "int x", lambda: apply_rotary_complex(X.int(), POS, TH), T,
     "x"),
    ("apply_rotary_complex", "sparse x",
     lambda: apply_rotary_complex(sparse(X), POS, TH), T, "x"),
    ("apply_rotary_complex", "float positions",
     lambda: apply_rotary_complex(X, POS.float(), TH), T, "positions"),
    ("apply_rotary_complex", "positions of another length",
     lambda: apply_rotary_complex(X, POS[:4], TH), V, "positions"),
    ("apply_rotary_complex", "inv_freq of another length",
     lambda: apply_rotary_complex(X, POS, TH[:3]), V, "inv_freq"),
    ("apply_rotary_complex", "NaN inv_freq",
     lambda: apply_rotary_complex(X, POS, with_theta(1.0, NAN, 0.1, 0.01)), V,
     "inv_freq"),
    ("apply_rotary_complex", "positions on meta, no values to move",
     lambda: apply_rotary_complex(X, POS.to(M), TH), V, "positions"),
    # rotation_matrix
    ("rotation_matrix", "float position", lambda: rotation_matrix(1.5, TH), T, "position"),
    ("rotation_matrix", "bool position", lambda: rotation_matrix(True, TH), T,
     "position"),
    ("rotation_matrix", "negative position", lambda: rotation_matrix(-1, TH), V,
     "position"),
    ("rotation_matrix", "several positions", lambda: rotation_matrix(POS[:2], TH), T,
     "position"),
    ("rotation_matrix", "NaN inv_freq", lambda: rotation_matrix(3, with_theta(NAN, 1.0)),
     V, "inv_freq"),
    ("rotation_matrix", "int inv_freq", lambda: rotation_matrix(3, TH.long()), T,
     "inv_freq"),
    ("rotation_matrix", "sparse inv_freq", lambda: rotation_matrix(3, sparse(TH)), T,
     "inv_freq"),
    ("rotation_matrix", "unknown layout", lambda: rotation_matrix(3, TH, layout="x"), V,
     "layout"),
    # to_half_split / to_interleaved
    ("to_half_split", "a list for x", lambda: to_half_split([1.0, 2.0]), T, "x"),
    ("to_half_split", "odd last axis", lambda: to_half_split(X[..., :7]), V, "x"),
    ("to_half_split", "empty last axis", lambda: to_half_split(X[..., :0]), V, "x"),
    ("to_half_split", "sparse x", lambda: to_half_split(sparse(X)), T, "x"),
    ("to_interleaved", "0-d x", lambda: to_interleaved(torch.tensor(1.0)), V, "x"),
    ("to_interleaved", "sparse x", lambda: to_interleaved(sparse(X)), T, "x"),
    # permute_qk_weight / unpermute_qk_weight
    ("permute_qk_weight", "a list for weight", lambda: permute_qk_weight([[1.0]], 1), T,
     "weight"),
    ("permute_qk_weight", "sparse weight", lambda: permute_qk_weight(sparse(W), 2), T,
     "weight"),
    ("permute_qk_weight", "zero n_heads", lambda: permute_qk_weight(W, 0), V, "n_heads"),
    ("permute_qk_weight", "negative n_heads", lambda: permute_qk_weight(W, -2), V,
     "n_heads"),
    ("permute_qk_weight", "float n_heads", lambda: permute_qk_weight(W, 2.0), T,
     "n_heads"),
    ("permute_qk_weight", "rows not n_heads heads", lambda: permute_qk_weight(W, 3), V,
     "weight"),
    ("unpermute_qk_weight", "zero n_heads", lambda: unpermute_qk_weight(W, 0), V,
     "n_heads"),
    ("unpermute_qk_weight", "1-D weight without bias=True",
     lambda: unpermute_qk_weight(W[:, 0], 2), V, "weight"),
    # RotaryEmbedding: construction, then forward
    ("RotaryEmbedding", "odd dim", lambda: RotaryEmbedding(7), V, "dim"),
    ("RotaryEmbedding", "NaN base", lambda: RotaryEmbedding(8, NAN), V, "base"),
    ("RotaryEmbedding", "zero max_position",
     lambda: RotaryEmbedding(8, max_position=0), V, "max_position"),
    ("RotaryEmbedding", "negative max_position",
     lambda: RotaryEmbedding(8, max_position=-1), V, "max_position"),
    ("RotaryEmbedding", "scaling a string",
     lambda: RotaryEmbedding(8, scaling="yarn"), T, "scaling"),
    ("RotaryEmbedding", "NaN factor",
     lambda: RotaryEmbedding(8, scaling=yarn(factor=NAN)), V, "factor"),
    ("RotaryEmbedding", "unknown layout", lambda: RotaryEmbedding(8, layout="x"), V,
     "layout"),
    ("RotaryEmbedding.forward", "int q", lambda: emb()(X.int(), X), T, "q"),
    ("RotaryEmbedding.forward", "sparse k", lambda: emb()(X, sparse(X)), T, "k"),
    ("RotaryEmbedding.forward", "complex q", lambda: emb()(cplx(X), X), T, "q"),
    ("RotaryEmbedding.forward", "k of another length", lambda: emb()(X, X[..., :4, :]),
     V, "k"),
    ("RotaryEmbedding.forward", "float positions",
     lambda: emb()(X, X, positions=POS.float()), T, "positions"),
    ("RotaryEmbedding.forward", "negative position",
     lambda: emb()(X, X, positions=[0, 1, 2, 3, -4]), V, "positions"),
    ("RotaryEmbedding.forward", "positions of another length",
     lambda: emb()(X, X, positions=POS[:4]), V, "positions"),
    ("RotaryEmbedding.forward", "negative offset", lambda: emb()(X, X, offset=-1), V,
     "offset"),
    ("RotaryEmbedding.forward", "q on another device", lambda: emb()(X.to(M), X.to(M)),
     V, "q"),
    ("RotaryEmbedding.forward", "positions on meta, no values to move",
     lambda: emb()(X, X, positions=POS.to(M)), V, "positions"),
    # decay_bound
    ("decay_bound", "float distances", lambda: decay_bound(POS.float(), 8), T,
     "distances"),
    ("decay_bound", "sparse distances", lambda: decay_bound(sparse(POS), 8), T,
     "distances"),
    ("decay_bound", "odd dim", lambda: decay_bound(POS, 7), V, "dim"),
    ("decay_bound", "NaN base", lambda: decay_bound(POS, 8, NAN), V, "base"),
    # positions_from_mask / packed_positions
    ("positions_from_mask", "a list for attention_mask",
     lambda: positions_from_mask([[1, 1]]), T, "attention_mask"),
    ("positions_from_mask", "float mask",
     lambda: positions_from_mask(torch.ones(2, 3)), T, "attention_mask"),
    ("positions_from_mask", "a 2 in the mask",
     lambda: positions_from_mask(torch.tensor([[1, 2]])), V, "attention_mask"),
    ("positions_from_mask", "0-d mask", lambda: positions_from_mask(torch.tensor(1)), V,
     "attention_mask"),
    ("positions_from_mask", "sparse mask",
     lambda: positions_from_mask(sparse(torch.ones(2, 3, dtype=torch.long))), T,
     "attention_mask"),
    ("packed_positions", "float cu_seqlens",
     lambda: packed_positions(torch.tensor([0.0, 3.0])), T, "cu_seqlens"),
    ("packed_positions", "not from 0", lambda: packed_positions([1, 3]), V, "cu_seqlens"),
    ("packed_positions", "decreasing", lambda: packed_positions([0, 3, 2]), V,
     "cu_seqlens"),
    ("packed_positions", "empty", lambda: packed_positions(torch.arange(0)), V,
     "cu_seqlens"),
    ("packed_positions", "2-D", lambda: packed_positions(torch.tensor([[0, 3]])), V,
     "cu_seqlens"),
    ("packed_positions", "sparse cu_seqlens",
     lambda: packed_positions(sparse(torch.tensor([0, 3]))), T, "cu_seqlens"),
    # rerotate_keys
    ("rerotate_keys", "int k", lambda: rerotate_keys(X.int(), 2, TH), T, "k"),
    ("rerotate_keys", "sparse k", lambda: rerotate_keys(sparse(X), 2, TH), T, "k"),
    ("rerotate_keys", "float delta", lambda: rerotate_keys(X, 1.5, TH), T, "delta"),
    ("rerotate_keys", "float delta tensor",
     lambda: rerotate_keys(X, torch.tensor(2.0), TH), T, "delta"),
    ("rerotate_keys", "delta that does not broadcast",
     lambda: rerotate_keys(X, torch.arange(4), TH), V, "delta"),
    ("rerotate_keys", "NaN inv_freq",
     lambda: rerotate_keys(X, 2, with_theta(1.0, NAN, 0.1, 0.01)), V, "inv_freq"),
    ("rerotate_keys", "inv_freq of another length", lambda: rerotate_keys(X, 2, TH[:2]),
     V, "inv_freq"),
    ("rerotate_keys", "delta on meta, no values to move",
     lambda: rerotate_keys(X, torch.tensor(2, device=M), TH), V, "delta"),
    # rope_scores
    ("rope_scores", "int q", lambda: rope_scores(X.int(), X), T, "q"),
    ("rope_scores", "sparse k", lambda: rope_scores(X, sparse(X)), T, "k"),
    ("rope_scores", "k on another device", lambda: rope_scores(X, X.to(M)), V, "k"),
    ("rope_scores", "k of another head dim", lambda: rope_scores(X, X[..., :4]), V, "k"),
    ("rope_scores", "float positions_q",
     lambda: rope_scores(X, X, POS.float(), POS), T, "positions_q"),
    ("rope_scores", "positions_k of another length",
     lambda: rope_scores(X, X, POS, POS[:4]), V, "positions_k"),
    ("rope_scores", "NaN base", lambda: rope_scores(X, X, base=NAN), V, "base"),
    # the Triton entry point: the same checks as apply_rotary, then its own
    ("kernels.triton.apply_rotary", "sparse x", lambda: triton_rotary(sparse(X), C, S), T,
     "x"),
    ("kernels.triton.apply_rotary", "int cos", lambda: triton_rotary(X, C.int(), S), T,
     "cos"),
    ("kernels.triton.apply_rotary", "cos on another device",
     lambda: triton_rotary(X, C.to(M), S), V, "cos"),
    ("kernels.triton.apply_rotary", "tables of another length",
     lambda: triton_rotary(X, C[:4], S[:4]), V, "broadcast"),
]


@pytest.mark.parametrize("fn, kind, call, exc, pattern",
                         [pytest.param(*case, id=f"{case[0]}: {case[1]}") for case in BAD])
def test_bad_input_raises_an_error_that_names_the_argument(fn, kind, call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_every_public_function_has_entries():
    # the table covers the API: a public callable without an entry is a gap
    no_arguments = {"default_device", "kernel_status"}
    covered = {case[0].split(".")[0] for case in BAD}
    assert set(ropelab.__all__) - no_arguments <= covered, (
        set(ropelab.__all__) - no_arguments - covered)


# (function, what, call, the result's shape and device): accepted on purpose
ACCEPTED = [
    ("apply_rotary", "no tokens", lambda: apply_rotary(X[:, :, :0], C[:0], S[:0]),
     (2, 3, 0, 8)),
    ("apply_rotary", "no rows", lambda: apply_rotary(X[:0], C, S), (0, 3, 5, 8)),
    ("apply_rotary", "NaN in x (data, passed through)",
     lambda: apply_rotary(X.clone().fill_(NAN), C, S), (2, 3, 5, 8)),
    ("angles", "no positions", lambda: angles([], TH), (0, 4)),
    ("angles", "zero and negative frequencies (a pair that stands still or turns back)",
     lambda: angles(POS, with_theta(1.0, 0.0, -0.5)), (5, 3)),
    ("cos_sin", "no positions", lambda: cos_sin(torch.arange(0), TH)[0], (0, 8)),
    ("cos_sin", "positions moved to inv_freq's device, as a list is",
     lambda: cos_sin(POS, TH.to(M))[0], (5, 8), M),
    ("apply_rotary_complex", "inv_freq on the CPU, x anywhere (moved: d/2 numbers)",
     lambda: apply_rotary_complex(X.to(M), POS, TH), (2, 3, 5, 8), M),
    ("rerotate_keys", "inv_freq on the CPU, k anywhere (moved: d/2 numbers)",
     lambda: rerotate_keys(X.to(M), 2, TH), (2, 3, 5, 8), M),
    ("rotate_half", "no rows", lambda: rotate_half(X[:0]), (0, 3, 5, 8)),
    ("apply_rotary_complex", "no tokens",
     lambda: apply_rotary_complex(X[:, :, :0], [], TH), (2, 3, 0, 8)),
    ("rerotate_keys", "no tokens", lambda: rerotate_keys(X[:, :, :0], -3, TH),
     (2, 3, 0, 8)),
    ("to_half_split", "any dtype (a permutation moves values)",
     lambda: to_half_split(POS[:4]), (4,)),
    ("permute_qk_weight", "any dtype (a permutation moves values)",
     lambda: permute_qk_weight(W.to(torch.int8), 2), (16, 6)),
    ("positions_from_mask", "no tokens",
     lambda: positions_from_mask(torch.ones(2, 0, dtype=torch.long)), (2, 0)),
    ("RotaryEmbedding.forward", "no tokens",
     lambda: emb()(X[:, :, :0], X[:, :, :0])[0], (2, 3, 0, 8)),
]


@pytest.mark.parametrize("fn, what, call, shape, device",
                         [pytest.param(*case, *(("cpu",) if len(case) == 4 else ()),
                                       id=f"{case[0]}: {case[1]}") for case in ACCEPTED])
def test_what_each_function_accepts_on_purpose(fn, what, call, shape, device):
    result = call()
    assert tuple(result.shape) == shape and result.device.type == device
