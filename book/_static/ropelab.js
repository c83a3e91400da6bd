// The RoPE Book's page behaviour (styles in ropelab.css; checked by
// tests/book/test_render.py at 1400 px and 400 px):
// * inline math wider than its paragraph scrolls in its own box instead of
//   running off a phone's screen;
// * a check's one-line verdict (✓ ...) wraps to the column;
// * a display equation or table wider than the column gets a visible cue
//   ("scroll sideways") under it, and a fade at the edge;
// * tables: their column names are copied to each cell (data-label), for the
//   stacked layout on phones; many-column tables get a smaller type;
// * a figure opens full size with a tap (an overlay; a tap or Escape closes it);
// * search results: snippets lose their raw TeX (\(\theta_j\) reads θ_j).
(function () {
  var CUE = "ropelab-scroll-cue";

  function markWide() {
    document.querySelectorAll("mjx-container:not([display])").forEach(function (m) {
      m.classList.remove("ropelab-wide-inline");
      // the line box it sits in: skip inline wrappers (the theme's span.math is
      // inline-flex, as wide as the formula, rounded to whole pixels)
      var box = m.parentElement;
      while (box && getComputedStyle(box).display.indexOf("inline") === 0) {
        box = box.parentElement;
      }
      if (box && m.getBoundingClientRect().width > box.clientWidth + 1) {
        m.classList.add("ropelab-wide-inline");
      }
    });
  }

  // A check's verdict (a "✓ ..." output line) wraps to the column rather than
  // hiding its end behind a sideways scroll on a phone.
  function wrapChecks() {
    document.querySelectorAll("article div.cell_output pre").forEach(function (pre) {
      if (/^\s*[✓✗]/.test(pre.textContent)) pre.classList.add("ropelab-check-line");
    });
  }

  function cueScrolling() {
    var boxes = document.querySelectorAll('article mjx-container[display="true"], article table');
    boxes.forEach(function (box) {
      var next = box.nextElementSibling;
      var has = next && next.classList.contains(CUE);
      var wide = box.getClientRects().length > 0 && box.scrollWidth > box.clientWidth + 1;
      box.classList.toggle("ropelab-scrolls", wide);
      if (wide && !has) {
        var cue = document.createElement("div");
        cue.className = CUE;
        cue.textContent = box.tagName === "TABLE" ? "scroll the table sideways" : "scroll sideways for the rest";
        box.insertAdjacentElement("afterend", cue);
      } else if (!wide && has) {
        next.remove();
      }
    });
  }

  function labelTables() {
    document.querySelectorAll("article table").forEach(function (table) {
      var names = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
        return th.textContent.trim();
      });
      if (names.length >= 5) table.classList.add("ropelab-many-columns");
      if (names.length < 4) return;
      table.classList.add("ropelab-stacked");
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (td, i) {
          if (names[i]) td.setAttribute("data-label", names[i]);
        });
      });
    });
  }

  function openFigure(img) {
    var box = document.createElement("div");
    box.className = "ropelab-lightbox";
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-label", "The figure at full size; tap or press Escape to close");
    var big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    // its own pixels, but at least the screen's width
    big.style.width = Math.max(img.naturalWidth || 0, window.innerWidth) + "px";
    var close = document.createElement("button");
    close.className = "ropelab-lightbox-close";
    close.setAttribute("aria-label", "Close");
    close.textContent = "×";
    box.appendChild(close);
    box.appendChild(big);
    function shut() {
      box.remove();
      document.removeEventListener("keydown", onKey);
    }
    function onKey(e) {
      if (e.key === "Escape") shut();
    }
    box.addEventListener("click", shut);
    document.addEventListener("keydown", onKey);
    document.body.appendChild(box);
    close.focus();
  }

  function enableFigures() {
    document.addEventListener("click", function (e) {
      var img = e.target.closest && e.target.closest("article figure img, article div.cell_output img");
      if (!img || img.closest("a")) return;
      e.preventDefault();
      openFigure(img);
    });
  }

  var GREEK = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", theta: "θ",
    lambda: "λ", mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ", omega: "ω", Theta: "Θ",
    Delta: "Δ", Sigma: "Σ", top: "ᵀ", cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥",
    geq: "≥", approx: "≈", ne: "≠", neq: "≠", to: "→", infty: "∞", ln: "ln", log: "log",
    exp: "exp", sin: "sin", cos: "cos"
  };
  function plainTeX(text) {
    return text
      .replace(/\\[()[\]]|\$\$/g, "")
      .replace(/\\([A-Za-z]+)/g, function (all, name) {
        return Object.prototype.hasOwnProperty.call(GREEK, name) ? GREEK[name] : "";
      })
      .replace(/[{}]/g, "")
      .replace(/\\[,;!: ]/g, " ");
  }
  function cleanSearch() {
    var results = document.getElementById("search-results");
    if (!results) return;
    function clean() {
      results.querySelectorAll("p.context").forEach(function (p) {
        if (/\\|\$\$/.test(p.textContent)) {
          var walker = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
          var node;
          while ((node = walker.nextNode())) node.nodeValue = plainTeX(node.nodeValue);
        }
      });
    }
    new MutationObserver(clean).observe(results, { childList: true, subtree: true });
  }

  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(function () {
        markWide();
        cueScrolling();
        // widths change once MathJax's web fonts arrive: measure again then
        if (document.fonts) document.fonts.ready.then(function () {
          markWide();
          cueScrolling();
        });
      });
    } else if (document.querySelector(".math")) {
      setTimeout(whenTypeset, 100);
    } else {
      cueScrolling();
    }
  }
  function start() {
    labelTables();
    wrapChecks();
    enableFigures();
    cleanSearch();
    whenTypeset();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  window.addEventListener("resize", function () {
    markWide();
    cueScrolling();
  });
})();
