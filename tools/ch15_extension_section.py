"""Add chapter 15's section "Beyond the trained length" once the extension runs exist.

    python -m ropelab.book.real_model --stages extend --jobs 2 --threads 1 --json ext.json
    python tools/ch15_extension_section.py ext.json

(on a GPU: ``--device cuda`` instead of ``--jobs 2 --threads 1``). The script copies the
``extend`` entry of ext.json into ropelab/book/data/real_model.json (with its command
and cost) and inserts the section's cells into book/15_real_model.ipynb after the
rebuild section (cell ``rm-rebuild-text``). The cells are drafts: their code runs on
those results; the prose marked EXTEND_TEXT, EXTEND_ALT and COMPARE_TEXT is to be
written from the numbers they print (chapter 11's toy beside the real model, the YaRN
paper's Llama 2 shape), and the chapter's opening list and summary extended. Then
re-execute the chapter and run strict nbval on it.
"""

import json
import sys
from pathlib import Path

CELLS = json.loads(r"""
[
 {
  "cell_type": "markdown",
  "id": "rm-extend-intro",
  "metadata": {},
  "source": [
   "## Beyond the trained length\n",
   "\n",
   "Chapter 11's toy lost position just past its training length and regained part of it under\n",
   "each scaling of chapter 07. The same experiment on the real model: one window of 16,384 tokens,\n",
   "twice the trained 8,192, scored by 1,024-token block, with each method set for the factor\n",
   "$s = 2$ through transformers' `rope_parameters` {cite}`chen2023pi,bloc97ntk,peng2024yarn,dubey2024llama3`:\n",
   "\n",
   "- **no scaling**: `{\"rope_type\": \"default\"}`;\n",
   "- **PI**: `{\"rope_type\": \"linear\", \"factor\": 2}`;\n",
   "- **NTK-aware**: the base $b\\,s^{d/(d-2)}$ as `rope_theta` (transformers has no type for it);\n",
   "- **dynamic NTK**: `{\"rope_type\": \"dynamic\", \"factor\": 2, ...}`, which over one 16,384-token\n",
   "  pass rescales for that whole length, as transformers does for a single forward pass;\n",
   "- **YaRN**: `{\"rope_type\": \"yarn\", \"factor\": 2, ...}`, with its attention temperature;\n",
   "- **Llama 3**: `{\"rope_type\": \"llama3\", \"factor\": 2, \"low_freq_factor\": 1,\n",
   "  \"high_freq_factor\": 4, ...}`;\n",
   "\n",
   "each with `\"original_max_position_embeddings\": 8192` where it takes one. No weight changes:\n",
   "nothing is fine-tuned. The tables come from `ropelab.scaled_inv_freq`, equal to transformers'\n",
   "rotary module for the same dictionary:"
  ]
 },
 {
  "cell_type": "code",
  "id": "rm-methods-check",
  "metadata": {
   "tags": [
    "hide-input"
   ]
  },
  "execution_count": null,
  "outputs": [],
  "source": [
   "from transformers.models.llama import modeling_llama as hf_llama\n",
   "\n",
   "probe = torch.arange(0, 16384, 61)\n",
   "with checks(\"each method's tables = transformers' rotary module, same rope_parameters\"):\n",
   "    for name in rm.METHODS:\n",
   "        params = rm.rope_parameters(name, c)\n",
   "        cfg = hf_llama.LlamaConfig(**{**hf.config.to_dict(), \"rope_parameters\": {\n",
   "            \"rope_theta\": c.base, **params}})\n",
   "        cos_hf, _ = hf_llama.LlamaRotaryEmbedding(cfg)(torch.zeros(1), probe[None])\n",
   "        if name != \"dynamic\":  # rescales for the positions it is given\n",
   "            cos, _ = llama.rope_tables(c, probe, layout=\"half_split\", rope_parameters=params)\n",
   "            check_close(cos, cos_hf[0], tol=1e-5)"
  ]
 },
 {
  "cell_type": "code",
  "id": "rm-extend",
  "metadata": {},
  "execution_count": null,
  "outputs": [],
  "source": [
   "names = {\"none\": \"no scaling\", \"pi\": \"PI\", \"ntk\": \"NTK-aware\", \"dynamic\": \"dynamic NTK\",\n",
   "         \"yarn\": \"YaRN\", \"llama3\": \"Llama 3\"}\n",
   "ranges = {\"0-8k\": (0, 8192), \"8-12k\": (8192, 12288), \"12-16k\": (12288, 16383)}\n",
   "print(\"perplexity [95 % interval] by range of positions\")\n",
   "print(f\"{'method':>12}\" + \"\".join(f\"{r:>22}\" for r in ranges))\n",
   "for n, label in names.items():\n",
   "    cells = [rm.window_interval(ext, n, *r) for r in ranges.values()]\n",
   "    print(f\"{label:>12}\" + \"\".join(f\"{v:>8.2f} [{lo:5.2f}, {hi:5.2f}]\"\n",
   "                                   for v, lo, hi in cells))"
  ]
 },
 {
  "cell_type": "code",
  "id": "rm-extend-fig",
  "metadata": {
   "mystnb": {
    "figure": {
     "caption": "Perplexity of each 1,024-token block of one 16,384-token window of the text, for each method set for s = 2, without fine-tuning. The dotted line is the trained context of 8,192 tokens.",
     "name": "fig-real-extend"
    },
    "image": {
     "alt": "Six lines of perplexity against block position on a log axis. EXTEND_ALT"
    }
   }
  },
  "execution_count": null,
  "outputs": [],
  "source": [
   "blocks = {label: rm.window_blocks(ext, n) for n, label in names.items()}\n",
   "figures.extension_perplexity(blocks, block=ext[\"block\"], context=c.context,\n",
   "                             title=\"Perplexity beyond the trained length, no fine-tuning\")"
  ]
 },
 {
  "cell_type": "markdown",
  "id": "rm-extend-text",
  "metadata": {},
  "source": [
   "EXTEND_TEXT"
  ]
 },
 {
  "cell_type": "code",
  "id": "rm-pairs-vs",
  "metadata": {},
  "execution_count": null,
  "outputs": [],
  "source": [
   "print(\"perplexity over positions 8,192-16,383 relative to no scaling [95 % interval]:\")\n",
   "for n in (\"pi\", \"ntk\", \"dynamic\", \"yarn\", \"llama3\"):\n",
   "    ratio, lo, hi = rm.window_interval(ext, n, 8192, 16383, baseline=\"none\")\n",
   "    print(f\"{names[n]:>12}: {ratio:5.3f} [{lo:5.3f}, {hi:5.3f}]\")"
  ]
 },
 {
  "cell_type": "markdown",
  "id": "rm-compare-text",
  "metadata": {},
  "source": [
   "COMPARE_TEXT"
  ]
 }
]
""")


def main(results: str, notebook: str = "book/15_real_model.ipynb",
         shipped: str = "ropelab/book/data/real_model.json") -> None:
    from ropelab.book.real_model import _dumps

    ext = json.loads(Path(results).read_text())
    data = json.loads(Path(shipped).read_text())
    data["extend"] = ext["extend"]
    data["extend_command"] = ext["command"]
    data["cost_seconds"]["extend"] = ext["cost_seconds"]["extend"]
    Path(shipped).write_text(_dumps(data) + "\n")
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    ids = [c["id"] for c in nb["cells"]]
    if any(c["id"] in ids for c in CELLS):
        sys.exit("the section is already there")
    at = ids.index("rm-rebuild-text") + 1
    nb["cells"][at:at] = CELLS
    Path(notebook).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                              encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
