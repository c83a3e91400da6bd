// The RoPE Book: mark inline math wider than its paragraph, so that it scrolls
// in its own box (ropelab.css) instead of running off a phone's screen.
(function () {
  function markWide() {
    document.querySelectorAll("mjx-container:not([display])").forEach(function (m) {
      m.classList.remove("ropelab-wide-inline");
      var box = m.parentElement;
      while (box && getComputedStyle(box).display === "inline") box = box.parentElement;
      if (box && m.getBoundingClientRect().width > box.clientWidth) {
        m.classList.add("ropelab-wide-inline");
      }
    });
  }
  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(markWide);
    } else {
      setTimeout(whenTypeset, 100);
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", whenTypeset);
  } else {
    whenTypeset();
  }
  window.addEventListener("resize", markWide);
})();
