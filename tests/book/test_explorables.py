"""The explorable figures (book/_static/explorables.js): their numbers, and their controls.

The script's math functions run in headless Chromium on a grid of settings
and are compared with ropelab's own (``inv_freq``, ``wavelengths``,
``full_turn_pairs``, ``scaled_inv_freq``, ``rope_scores``, ``decay_bound``)
to 1e-6 relative. Then, on each built page that holds explorables, every
control is moved with the keyboard, as a reader would, and the plot and the
numbers it shows must change, with no console error and no request outside
the book. The browser fixtures are the render check's.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import ropelab
from ropelab.attention import rope_scores
from ropelab.frequencies import full_turn_pairs
from test_render import HTML, browser_context, server  # noqa: F401  (pytest fixtures)

SCRIPT = Path(__file__).resolve().parents[2] / "book" / "_static" / "explorables.js"
REL = 1e-6
# Every page with explorables, and how many each must hold.
EXPECTED = {
    "book/01_frequencies.html": {"ladder"},
    "book/02_complex_rotation.html": {"relative"},
    "book/06_attention_and_decay.html": {"decay"},
    "book/07_context_extension.html": {"extension"},
}
SCALINGS = {
    "pi": lambda s, L: {"rope_type": "linear", "factor": s},
    "ntk": None,  # a base change: compared with inv_freq at ntk_scaled_base
    "dynamic": lambda s, L: {"rope_type": "dynamic", "factor": s,
                             "original_max_position_embeddings": L},
    "yarn": lambda s, L: {"rope_type": "yarn", "factor": s,
                          "original_max_position_embeddings": L},
    "llama3": lambda s, L: {"rope_type": "llama3", "factor": s, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": L},
}


@pytest.fixture(scope="module")
def js(browser_context):  # noqa: F811
    """A blank page with explorables.js loaded; call ``js(expr, arg)`` to evaluate."""
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content("<!doctype html><html><body></body></html>")
    page.add_script_tag(content=SCRIPT.read_text(encoding="utf-8"))
    assert not errors, errors

    def evaluate(expr: str, arg=None):
        return page.evaluate(f"(a) => {{ const RL = window.ropelabExplorables; return {expr}; }}", arg)

    yield evaluate
    page.close()


def assert_rel(js_values, torch_values, what: str) -> None:
    ours = torch.as_tensor(js_values, dtype=torch.float64)
    ref = torch.as_tensor(torch_values).to(torch.float64).reshape(ours.shape)
    rel = ((ours - ref).abs() / ref.abs().clamp_min(1e-300)).max().item()
    assert rel <= REL, f"{what}: max relative difference {rel:.2e} > {REL:.0e}"


GRID = [(d, b) for d in (8, 64, 128, 256) for b in (100.0, 10000.0, 500000.0, 1e7)]


@pytest.mark.parametrize("dim,base", GRID)
def test_frequencies_agree_with_ropelab(js, dim, base):
    assert_rel(js("RL.invFreq(a[0], a[1])", [dim, base]),
               ropelab.inv_freq(dim, base, dtype=torch.float64), "inv_freq")
    assert_rel(js("RL.wavelengths(a[0], a[1])", [dim, base]),
               ropelab.wavelengths(dim, base), "wavelengths")
    for length in (64, 4096, 131072, 10**7):
        assert js("RL.fullTurnPairs(a[0], a[1], a[2])", [dim, base, length]) == \
            full_turn_pairs(dim, base, length)


@pytest.mark.parametrize("method", sorted(SCALINGS))
@pytest.mark.parametrize("factor", [1.0, 2.0, 4.0, 8.0, 32.0])
@pytest.mark.parametrize("dim,base,original", [(64, 10000.0, 2048), (128, 500000.0, 8192)])
def test_scaled_frequencies_agree_with_ropelab(js, method, factor, dim, base, original):
    got = js("RL.scaledInvFreq(a[0], a[1], a[2], a[3], a[4])", [dim, base, method, factor, original])
    if method == "ntk":
        ref = ropelab.inv_freq(dim, ropelab.scaling.ntk_scaled_base(base, factor, dim),
                               dtype=torch.float64)
        scale = 1.0
    else:
        seq_len = round(factor * original) if method == "dynamic" else None
        ref, scale = ropelab.scaled_inv_freq(dim, base, SCALINGS[method](factor, original),
                                             seq_len=seq_len, dtype=torch.float64)
    assert_rel(got["invFreq"], ref, f"{method} inv_freq")
    assert math.isclose(got["attentionScaling"], scale, rel_tol=REL), method


@pytest.mark.parametrize("dim,base", [(6, 100.0), (64, 10000.0), (128, 500000.0)])
def test_scores_agree_with_ropelab(js, dim, base):
    q = js("RL.randomVector(a, 1)", dim)
    k = js("RL.randomVector(a, 2)", dim)
    qt = torch.tensor(q, dtype=torch.float64)[None]
    kt = torch.tensor(k, dtype=torch.float64)[None]
    for m, n in [(0, 0), (5, 2), (2, 5), (1000, 3), (77, 77)]:
        ref = rope_scores(qt, kt, [m], [n], base=base, layout="interleaved")[0, 0]
        got = js("RL.score(a[0], a[1], a[2], a[3], a[4], a[5])", [q, k, m, n, dim, base])
        assert math.isclose(got, float(ref), rel_tol=REL, abs_tol=1e-12), (m, n)


@pytest.mark.parametrize("dim,base", [(16, 100.0), (128, 10000.0), (256, 1e6)])
def test_decay_bound_agrees_with_ropelab(js, dim, base):
    distances = [0, 1, 2, 10, 100, 500, 1000, 4096]
    got = [js("RL.decayBound(a[0], a[1], a[2])", [d, dim, base]) for d in distances]
    assert_rel(got, ropelab.decay_bound(distances, dim, base), "decay_bound")


def test_random_vector_is_reproducible_and_normal(js):
    a = js("RL.randomVector(a, 7)", 4096)
    assert a == js("RL.randomVector(a, 7)", 4096)
    assert a != js("RL.randomVector(a, 8)", 4096)
    t = torch.tensor(a)
    assert abs(t.mean()) < 0.1 and abs(t.std() - 1) < 0.1


STATE = """(fig) => [fig.querySelector('svg.rl-plot').innerHTML,
                    fig.querySelector('.rl-readout').textContent]"""


@pytest.mark.parametrize("page_path", sorted(EXPECTED))
def test_explorables_respond_to_every_control(page_path, server, browser_context):  # noqa: F811
    if not (HTML / page_path).is_file():
        pytest.fail(f"{page_path} is not built: run `make test` or `make book` first", pytrace=False)
    page = browser_context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and not m.text.startswith("Failed to load")
            and problems.append(f"console: {m.text}"))
    page.on("response", lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico")
            and problems.append(f"HTTP {r.status}: {r.url}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: r.url.startswith(server + "/") or r.url.startswith("data:")
            or problems.append(f"request outside the book: {r.url}"))
    page.goto(f"{server}/{page_path}", wait_until="load")
    figures = page.locator("figure.rl-explorable")
    kinds = {figures.nth(i).get_attribute("data-explorable") for i in range(figures.count())}
    assert kinds == EXPECTED[page_path]
    for i in range(figures.count()):
        fig = figures.nth(i)
        assert fig.get_attribute("data-ready") == "1", "the script did not build the figure"
        assert fig.locator("figcaption").inner_text().strip(), "an explorable needs a caption"
        controls = fig.locator("input, select")
        assert controls.count() >= 2
        for c in range(controls.count()):
            control = controls.nth(c)
            label = page.locator(f"label[for='{control.get_attribute('id')}']")
            assert label.count() == 1 and label.inner_text().strip(), "every control has a label"
            before = fig.evaluate(STATE)
            if c == 0:
                control.focus()
            else:  # the keyboard reaches every control: Tab moves to the next one
                controls.nth(c - 1).focus()
                page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.id") == control.get_attribute("id")
            key = "ArrowDown" if control.evaluate("e => e.tagName") == "SELECT" else "ArrowRight"
            page.keyboard.press(key)
            after = fig.evaluate(STATE)
            if after == before:  # a slider already at its maximum: move it the other way
                page.keyboard.press("ArrowLeft")
                page.keyboard.press("ArrowLeft")
                after = fig.evaluate(STATE)
            assert after[0] != before[0], f"figure {i}, control {c}: the plot did not change"
            if "shift both" in label.inner_text():
                score = lambda s: s.split("score")[-1]  # noqa: E731
                assert score(after[1]) == score(before[1]), "shifting both changed the score"
                assert after[1] != before[1], "the positions shown did not change"
            else:
                assert after[1] != before[1], f"figure {i}, control {c}: the numbers did not change"
    # the figures fit a phone screen: nothing wider than the viewport at 400 px
    page.set_viewport_size({"width": 400, "height": 800})
    overflow = page.evaluate("""() => [...document.querySelectorAll('figure.rl-explorable')]
        .filter(f => f.scrollWidth > f.clientWidth + 1).length""")
    assert overflow == 0, "an explorable is wider than its box at 400 px"
    page.close()
    assert not problems, problems
