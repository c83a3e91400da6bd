/* Explorable figures of The RoPE Book: RoPE you can turn with a slider.
 *
 * One script for every page. Each <figure class="rl-explorable"
 * data-explorable="NAME"> in a page gets its controls, an SVG plot and a
 * readout, built here; the figure's own <figcaption> says what to try.
 * Nothing is fetched: the numbers are computed in the page, in float64.
 *
 * The math lives in `RL` (exported as window.ropelabExplorables) and mirrors
 * ropelab's functions, so that a test can evaluate both on a grid of settings:
 *   invFreq       ropelab.inv_freq            θ_j = b^(-2j/d), j = 0..d/2-1
 *   wavelengths   ropelab.wavelengths         λ_j = 2π/θ_j
 *   fullTurnPairs ropelab.frequencies.full_turn_pairs   #{j : λ_j <= L}
 *   scaledInvFreq ropelab.scaled_inv_freq     PI, NTK-aware, dynamic NTK, YaRN, Llama 3
 *   score         ropelab.attention.rope_scores (interleaved pairs)
 *   decayBound    ropelab.decay_bound         (1/(d/2)) Σ_{j=1}^{d/2} |S_j(δ)|
 */
(function () {
  "use strict";

  // ------------------------------------------------------------------ math
  const RL = {};

  RL.invFreq = function (dim, base) {
    const out = [];
    for (let j = 0; j < dim / 2; j++) out.push(1 / Math.pow(base, (2 * j) / dim));
    return out;
  };

  RL.wavelengths = function (dim, base) {
    return RL.invFreq(dim, base).map((t) => (2 * Math.PI) / t);
  };

  RL.fullTurnPairs = function (dim, base, length) {
    return RL.wavelengths(dim, base).filter((lam) => lam <= length).length;
  };

  RL.ntkBase = function (base, factor, dim) {
    return base * Math.pow(factor, dim / (dim - 2));
  };

  // The methods of chapter 7 as transformers' rope dicts define them, with
  // the defaults of their reference configurations (YaRN: β_fast 32,
  // β_slow 1; Llama 3.1: low_freq_factor 1, high_freq_factor 4). Dynamic NTK
  // is evaluated at the extended length factor × original.
  RL.scaledInvFreq = function (dim, base, method, factor, original) {
    const theta = RL.invFreq(dim, base);
    if (method === "none") return { invFreq: theta, attentionScaling: 1 };
    if (method === "pi") return { invFreq: theta.map((t) => t / factor), attentionScaling: 1 };
    if (method === "ntk") {
      return { invFreq: RL.invFreq(dim, RL.ntkBase(base, factor, dim)), attentionScaling: 1 };
    }
    if (method === "dynamic") {
      const length = Math.max(Math.round(factor * original), original);
      const scale = (factor * length) / original - (factor - 1);
      return {
        invFreq: RL.invFreq(dim, base * Math.pow(scale, dim / (dim - 2))),
        attentionScaling: 1,
      };
    }
    if (method === "yarn") {
      const index = (turns) =>
        (dim * Math.log(original / (turns * 2 * Math.PI))) / (2 * Math.log(base));
      const low = Math.max(Math.floor(index(32)), 0);
      let high = Math.min(Math.ceil(index(1)), dim - 1);
      if (low === high) high += 0.001;
      const out = theta.map((t, j) => {
        const ramp = Math.min(Math.max((j - low) / (high - low), 0), 1);
        const keep = 1 - ramp;
        return (t / factor) * (1 - keep) + t * keep;
      });
      const mscale = factor <= 1 ? 1 : 0.1 * Math.log(factor) + 1;
      return { invFreq: out, attentionScaling: mscale };
    }
    if (method === "llama3") {
      const lowF = 1, highF = 4;
      const lowW = original / lowF, highW = original / highF;
      const out = theta.map((t) => {
        const w = (2 * Math.PI) / t;
        const scaled = w > lowW ? t / factor : t;
        if (w >= highW && w <= lowW) {
          const smooth = (original / w - lowF) / (highF - lowF);
          return ((1 - smooth) * scaled) / factor + smooth * scaled;
        }
        return scaled;
      });
      return { invFreq: out, attentionScaling: 1 };
    }
    throw new Error("unknown method " + method);
  };

  // q, k: length-d arrays, pairs (2j, 2j+1) read as complex numbers.
  // The score of q at position m and k at position n is
  // Σ_j Re[q_j conj(k_j) e^{i(m-n)θ_j}]: it depends on m - n only.
  RL.score = function (q, k, m, n, dim, base) {
    const theta = RL.invFreq(dim, base);
    let s = 0;
    for (let j = 0; j < dim / 2; j++) {
      const re = q[2 * j] * k[2 * j] + q[2 * j + 1] * k[2 * j + 1];
      const im = q[2 * j + 1] * k[2 * j] - q[2 * j] * k[2 * j + 1];
      const a = (m - n) * theta[j];
      s += re * Math.cos(a) - im * Math.sin(a);
    }
    return s;
  };

  // The pair (x, y) rotated by the angle pos·θ.
  RL.rotatePair = function (x, y, angle) {
    return [x * Math.cos(angle) - y * Math.sin(angle), x * Math.sin(angle) + y * Math.cos(angle)];
  };

  RL.decayBound = function (delta, dim, base) {
    const theta = RL.invFreq(dim, base);
    let re = 0, im = 0, total = 0;
    for (let j = 0; j < dim / 2; j++) {
      re += Math.cos(delta * theta[j]);
      im += Math.sin(delta * theta[j]);
      total += Math.hypot(re, im);
    }
    return total / (dim / 2);
  };

  // A reproducible standard-normal vector (mulberry32 + Box-Muller).
  RL.randomVector = function (dim, seed) {
    let a = seed >>> 0;
    const uniform = () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const out = [];
    while (out.length < dim) {
      const u = 1 - uniform(), v = uniform();
      const r = Math.sqrt(-2 * Math.log(u));
      out.push(r * Math.cos(2 * Math.PI * v), r * Math.sin(2 * Math.PI * v));
    }
    return out.slice(0, dim);
  };

  window.ropelabExplorables = RL;

  // ------------------------------------------------------------- drawing
  const SVGNS = "http://www.w3.org/2000/svg";
  let W = 600;
  const H = 330, PAD = { l: 74, r: 26, t: 14, b: 48 };

  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [key, v] of Object.entries(attrs || {})) e.setAttribute(key, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  function text(parent, x, y, s, attrs) {
    const t = el("text", Object.assign({ x: x, y: y }, attrs || {}), parent);
    t.textContent = s;
    return t;
  }

  function fmt(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e4 || a < 1e-2) {
      const e = Math.floor(Math.log10(a));
      const m = v / Math.pow(10, e);
      const sup = String(e).split("").map((c) => "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"["-0123456789".indexOf(c)]);
      return (Math.abs(m - 1) < 1e-9 ? "" : m.toFixed(1) + "×") + "10" + sup.join("");
    }
    return a >= 100 ? v.toFixed(0) : +v.toPrecision(3) + "";
  }

  function number(v, digits) {
    return v.toLocaleString("en-US", { maximumFractionDigits: digits });
  }

  // A line chart on linear or log axes: opts.x/y = {min, max, log, label}.
  function chart(svg, opts) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    // A narrower drawing on a phone, so that its text stays readable.
    W = svg.parentNode.clientWidth < 520 ? 440 : 600;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const { x, y } = opts;
    const map = (ax, v, lo, hi) => {
      const f = ax.log
        ? (Math.log10(v) - Math.log10(ax.min)) / (Math.log10(ax.max) - Math.log10(ax.min))
        : (v - ax.min) / (ax.max - ax.min);
      return lo + f * (hi - lo);
    };
    const X = (v) => map(x, v, PAD.l, W - PAD.r);
    const Y = (v) => map(y, Math.min(Math.max(v, y.min), y.max), H - PAD.b, PAD.t);
    const axes = el("g", { class: "rl-axes" }, svg);
    el("rect", { x: PAD.l, y: PAD.t, width: W - PAD.l - PAD.r, height: H - PAD.t - PAD.b,
      class: "rl-frame" }, axes);
    const ticks = (ax) => {
      if (ax.log) {
        const out = [];
        for (let e = Math.ceil(Math.log10(ax.min)); e <= Math.floor(Math.log10(ax.max)); e++) {
          out.push(Math.pow(10, e));
        }
        const step = Math.ceil(out.length / 6);
        return out.filter((_, i) => i % step === 0);
      }
      const span = ax.max - ax.min, raw = span / 5;
      const mag = Math.pow(10, Math.floor(Math.log10(raw)));
      const step = [1, 2, 5, 10].map((s) => s * mag).find((s) => s >= raw);
      const out = [];
      for (let v = Math.ceil(ax.min / step) * step; v <= ax.max + 1e-9; v += step) out.push(v);
      return out;
    };
    for (const v of ticks(x)) {
      el("line", { x1: X(v), x2: X(v), y1: PAD.t, y2: H - PAD.b, class: "rl-grid" }, axes);
      text(axes, X(v), H - PAD.b + 18, fmt(v), { "text-anchor": "middle" });
    }
    for (const v of ticks(y)) {
      el("line", { x1: PAD.l, x2: W - PAD.r, y1: Y(v), y2: Y(v), class: "rl-grid" }, axes);
      text(axes, PAD.l - 6, Y(v) + 5, fmt(v), { "text-anchor": "end" });
    }
    text(axes, (PAD.l + W - PAD.r) / 2, H - 8, x.label, { "text-anchor": "middle" });
    text(axes, 16, (PAD.t + H - PAD.b) / 2, y.label, {
      "text-anchor": "middle", transform: `rotate(-90 16 ${(PAD.t + H - PAD.b) / 2})` });
    for (const h of opts.hlines || []) {
      el("line", { x1: PAD.l, x2: W - PAD.r, y1: Y(h.y), y2: Y(h.y), class: "rl-hline" }, svg);
      text(svg, PAD.l + 6, Y(h.y) - 6, h.label, { class: "rl-note" });
    }
    opts.series.forEach((s, i) => {
      const cls = "rl-s" + (s.color === undefined ? i : s.color);
      if (s.dots) {
        const g = el("g", { class: cls }, svg);
        s.points.forEach(([a, b], k) => el("circle", { cx: X(a), cy: Y(b), r: 3.2,
          class: s.hollow && s.hollow(k) ? "rl-hollow" : "" }, g));
      } else {
        const d = s.points.map(([a, b], k) => (k ? "L" : "M") + X(a).toFixed(1) + " "
          + Y(b).toFixed(1)).join("");
        el("path", { d: d, class: cls + (s.dashed ? " rl-dashed" : "") }, svg);
      }
    });
    // The legend is HTML under the plot, so it never covers a curve at any width.
    const legend = svg.parentNode.querySelector(".rl-legend");
    legend.replaceChildren(...opts.series.map((ser, i) => {
      const item = document.createElement("span");
      const swatch = document.createElement("span");
      swatch.className = "rl-swatch rl-c" + (ser.color === undefined ? i : ser.color)
        + (ser.dashed ? " rl-dashed" : "");
      item.append(swatch, " " + ser.label);
      return item;
    }));
  }

  // A labelled control (range slider or select) that calls onInput.
  let uid = 0;
  function control(box, spec, onInput) {
    const id = "rl-ctl-" + ++uid;
    const row = document.createElement("div");
    row.className = "rl-control";
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = spec.label;
    row.appendChild(label);
    let input;
    if (spec.options) {
      input = document.createElement("select");
      for (const [value, name] of spec.options) {
        const o = document.createElement("option");
        o.value = value;
        o.textContent = name;
        input.appendChild(o);
      }
    } else {
      input = document.createElement("input");
      input.type = "range";
      input.min = spec.min;
      input.max = spec.max;
      input.step = spec.step || 1;
    }
    input.id = id;
    input.value = spec.value;
    const out = document.createElement("output");
    out.htmlFor = id;
    row.appendChild(input);
    row.appendChild(out);
    box.appendChild(row);
    const show = () => {
      const v = spec.options ? input.value : +input.value;
      out.textContent = spec.show ? spec.show(v) : String(v);
      input.setAttribute("aria-valuetext", out.textContent);
    };
    input.addEventListener("input", () => { show(); onInput(); });
    input.addEventListener("change", () => { show(); onInput(); });
    show();
    return () => (spec.options ? input.value : +input.value);
  }

  function frame(fig, title) {
    const box = document.createElement("div");
    box.className = "rl-controls";
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "rl-plot", role: "img" });
    svg.setAttribute("aria-label", title);
    const legend = document.createElement("p");
    legend.className = "rl-legend";
    const readout = document.createElement("p");
    readout.className = "rl-readout";
    readout.setAttribute("aria-live", "polite");
    const cap = fig.querySelector("figcaption");
    fig.insertBefore(box, cap);
    fig.insertBefore(svg, cap);
    fig.insertBefore(legend, cap);
    fig.insertBefore(readout, cap);
    return { box, svg, readout };
  }

  // A base slider moves in steps of 0.01 in log10(b); the base itself is rounded to
  // two significant digits, so 10^5.7 reads (and computes) as 500,000.
  const baseOf = (e) => Number(Math.pow(10, e).toPrecision(2));
  const baseName = (e) => "b = " + number(baseOf(e), 0);

  // ------------------------------------------------------------ figures
  const FIGURES = {};

  // Chapter 1: the ladder of wavelengths, and which pairs turn within L.
  FIGURES.ladder = function (fig) {
    const { box, svg, readout } = frame(fig, "wavelength of each pair against the pair index");
    const draw = () => {
      const base = baseOf(get.base()), dim = get.dim(), L = Math.pow(2, get.len());
      const lam = RL.wavelengths(dim, base);
      const n = RL.fullTurnPairs(dim, base, L);
      chart(svg, {
        x: { min: 0, max: dim / 2 - 1, label: "pair index j" },
        y: { min: 1, max: 1e8, log: true, label: "wavelength λⱼ (tokens)" },
        hlines: [{ y: L, label: "context L = " + number(L, 0) }],
        series: [{ label: "λⱼ (hollow: no full turn in L)", dots: true,
          points: lam.map((v, j) => [j, v]), hollow: (j) => lam[j] > L }],
      });
      readout.textContent = `${n} of ${dim / 2} pairs complete a full turn within ` +
        `${number(L, 0)} tokens; the slowest turns every ${number(lam[lam.length - 1], 0)} tokens.`;
    };
    const get = {
      base: control(box, { label: "base b", min: 2, max: 7, step: 0.01, value: 4,
        show: baseName }, draw),
      dim: control(box, { label: "head dim d", min: 16, max: 256, step: 8, value: 128 }, draw),
      len: control(box, { label: "context L", min: 6, max: 20, step: 1, value: 13,
        show: (e) => number(Math.pow(2, e), 0) + " tokens" }, draw),
    };
    draw();
    return draw;
  };

  // Chapter 2: q at m and k at n, pair by pair; shifting both keeps the score.
  const Q = [1.0, 0.3, 0.8, -0.5, 0.6, 0.9];
  const K = [0.7, -0.6, 0.2, 1.0, -0.4, 0.8];
  FIGURES.relative = function (fig) {
    const { box, svg, readout } = frame(fig, "q and k arrows of three pairs");
    const dim = 6, base = 100;
    const theta = RL.invFreq(dim, base);
    const draw = () => {
      const m = get.m() + get.s(), n = get.n() + get.s();
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      svg.setAttribute("viewBox", `0 0 600 ${H}`);  // three dials across, at any width
      const r = 80;
      theta.forEach((t, j) => {
        const cx = 100 + 200 * j, cy = 150;
        el("circle", { cx: cx, cy: cy, r: r, class: "rl-frame" }, svg);
        text(svg, cx, 30, `pair ${j}: θ = ${+t.toPrecision(3)}`,
          { "text-anchor": "middle", class: "rl-big" });
        const q = RL.rotatePair(Q[2 * j], Q[2 * j + 1], m * t);
        const k = RL.rotatePair(K[2 * j], K[2 * j + 1], n * t);
        const arrow = (v, cls) => el("line", { x1: cx, y1: cy, x2: cx + v[0] * r / 1.3,
          y2: cy - v[1] * r / 1.3, class: cls + " rl-arrow" }, svg);
        arrow(q, "rl-s0");
        arrow(k, "rl-s1");
        const gap = Math.atan2(q[1], q[0]) - Math.atan2(k[1], k[0]);
        const deg = ((((gap * 180) / Math.PI) % 360) + 540) % 360 - 180;
        text(svg, cx, 264, `∠ ${deg.toFixed(1)}°`, { "text-anchor": "middle", class: "rl-big" });
        text(svg, cx, 292, `q·k ${(q[0] * k[0] + q[1] * k[1]).toFixed(3)}`,
          { "text-anchor": "middle", class: "rl-big" });
      });
      text(svg, 250, 322, "q", { class: "rl-s0 rl-key rl-big" });
      text(svg, 290, 322, "k", { class: "rl-s1 rl-key rl-big" });
      const s = RL.score(Q, K, m, n, dim, base);
      readout.textContent = `q at m = ${m}, k at n = ${n}, m − n = ${m - n}: ` +
        `score q_mᵀk_n = ${s.toFixed(4)}`;
    };
    const get = {
      m: control(box, { label: "query position m", min: 0, max: 40, value: 5 }, draw),
      n: control(box, { label: "key position n", min: 0, max: 40, value: 2 }, draw),
      s: control(box, { label: "shift both by s", min: 0, max: 40, value: 0 }, draw),
    };
    draw();
    return draw;
  };

  // Chapter 6: the score against distance, and RoFormer's bound, each curve
  // divided by its own value at distance 0 (as the chapter's static figure).
  FIGURES.decay = function (fig) {
    const { box, svg, readout } = frame(fig, "score and bound against distance");
    const D = 1000, N = 64;
    const draw = () => {
      const base = baseOf(get.base()), dim = get.dim();
      const ones = new Array(dim).fill(1);
      const pairs = [];
      for (let i = 0; i < N; i++) {
        pairs.push([RL.randomVector(dim, 2 * i + 1), RL.randomVector(dim, 2 * i + 2)]);
      }
      const same = [], rand = [], bound = [];
      for (let delta = 0; delta <= D; delta += 4) {
        let mean = 0;
        for (const [q, k] of pairs) mean += Math.abs(RL.score(q, k, delta, 0, dim, base)) / N;
        same.push([delta, RL.score(ones, ones, delta, 0, dim, base)]);
        rand.push([delta, mean]);
        bound.push([delta, RL.decayBound(delta, dim, base)]);
      }
      const norm = (arr) => arr.map(([x, y]) => [x, y / arr[0][1]]);
      const curves = [norm(bound), norm(rand), norm(same)];
      const ys = curves.flat().map((p) => p[1]);
      const low = Math.min(-0.2, ...ys), high = Math.max(1, ...ys);
      chart(svg, {
        x: { min: 0, max: D, label: "relative distance m − n (tokens)" },
        y: { min: Math.floor(low * 10) / 10, max: Math.ceil(high * 10) / 10,
          label: "value / value at 0" },
        series: [
          { label: "RoFormer's bound", points: curves[0] },
          { label: "mean |score|, random q, k", points: curves[1], dashed: true },
          { label: "score, q = k = 1", points: curves[2] },
        ],
      });
      const at = (arr, delta) => arr[delta / 4][1];
      readout.textContent = `at distance 500: bound ${at(curves[0], 500).toFixed(3)}, ` +
        `mean |score| ${at(curves[1], 500).toFixed(3)}, q = k ${at(curves[2], 500).toFixed(3)} ` +
        "of their values at 0.";
    };
    const get = {
      base: control(box, { label: "base b", min: 2, max: 6, step: 0.01, value: 4,
        show: baseName }, draw),
      dim: control(box, { label: "head dim d", min: 16, max: 256, step: 8, value: 128 }, draw),
    };
    draw();
    return draw;
  };

  // Chapter 7: each method's wavelengths against the original ones.
  FIGURES.extension = function (fig) {
    const { box, svg, readout } = frame(fig, "wavelengths after context extension");
    const dim = 128, base = 10000, L = 4096;
    const draw = () => {
      const method = get.method(), s = get.factor();
      const lam0 = RL.wavelengths(dim, base);
      const res = RL.scaledInvFreq(dim, base, method, s, L);
      const lam = res.invFreq.map((t) => (2 * Math.PI) / t);
      chart(svg, {
        x: { min: 0, max: dim / 2 - 1, label: "pair index j" },
        y: { min: 1, max: 1e7, log: true, label: "wavelength (tokens)" },
        hlines: [{ y: L, label: "original context L = 4,096" },
          { y: s * L, label: "extended s·L = " + number(s * L, 0) }],
        series: [
          { label: "original λⱼ (b = 10,000, d = 128)", points: lam0.map((v, j) => [j, v]),
            color: 2 },
          { label: "after " + NAMES[method], points: lam.map((v, j) => [j, v]), color: 0 },
        ],
      });
      const changed = lam.filter((v, j) => Math.abs(v / lam0[j] - 1) > 1e-9).length;
      const mu = res.attentionScaling;
      readout.textContent = `${NAMES[method]}, s = ${s}: ${changed} of ${dim / 2} pairs ` +
        `changed; q and k each ×${mu.toFixed(3)}, so logits ×${(mu * mu).toFixed(3)}.`;
    };
    const NAMES = { pi: "PI", ntk: "NTK-aware", dynamic: "dynamic NTK", yarn: "YaRN",
      llama3: "Llama 3" };
    const get = {
      method: control(box, { label: "method", value: "pi",
        options: Object.entries(NAMES), show: () => "" }, draw),
      factor: control(box, { label: "factor s", min: 1, max: 32, step: 1, value: 4 }, draw),
    };
    draw();
    return draw;
  };

  function init() {
    for (const fig of document.querySelectorAll("figure.rl-explorable")) {
      const make = FIGURES[fig.dataset.explorable];
      if (!make || fig.dataset.ready) continue;
      fig.redraw = make(fig);
      fig.dataset.ready = "1";
    }
    watchWidths();
  }

  function watchWidths() {
    // Redraw when a figure crosses the narrow-layout width chart() uses.
    if (window.ResizeObserver) {
      const narrow = new WeakMap();
      const watch = new ResizeObserver((entries) => {
        for (const { target } of entries) {
          const now = target.clientWidth < 520;
          if (narrow.has(target) && narrow.get(target) !== now && target.redraw) target.redraw();
          narrow.set(target, now);
        }
      });
      document.querySelectorAll("figure.rl-explorable").forEach((f) => watch.observe(f));
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
