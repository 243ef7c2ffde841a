// logbroker console: live charts. Each <div class="chart" data-chart="URL" data-refresh="S">
// draws the JSON series at URL ({t: [epoch s], series: [{label, values}]}) with uPlot and
// refreshes it every S seconds while it is on the page.
(function () {
  "use strict";
  const palette = ["#1f5fbf", "#b3261e", "#1e7d45", "#a86400", "#6a3d9a"];

  function draw(el) {
    if (el.dataset.drawn) return;
    el.dataset.drawn = "1";
    let plot = null;
    const load = () => {
      if (!document.body.contains(el)) return false;
      fetch(el.dataset.chart, {headers: {"Accept": "application/json"}})
        .then((r) => r.ok ? r.json() : Promise.reject(new Error(r.statusText)))
        .then((d) => {
          const data = [d.t].concat(d.series.map((s) => s.values));
          if (d.t.length < 2) {
            el.innerHTML = '<div class="empty">Collecting samples…</div>';
            plot = null;
            return;
          }
          if (plot) { plot.setData(data); return; }
          el.innerHTML = "";
          const opts = {
            width: Math.max(300, el.clientWidth - 16), height: 200,
            series: [{}].concat(d.series.map((s, i) => ({
              label: s.label, stroke: palette[i % palette.length], width: 2,
              fill: palette[i % palette.length] + "22"}))),
            axes: [{}, {size: 60}], scales: {y: {range: (u, min, max) => [0, Math.max(1, max * 1.1)]}},
          };
          plot = new uPlot(opts, data, el);
        })
        .catch(() => { el.innerHTML = '<div class="empty">Chart unavailable.</div>'; });
      return true;
    };
    load();
    const every = Math.max(1, parseFloat(el.dataset.refresh || "5")) * 1000;
    const timer = setInterval(() => { if (!load()) clearInterval(timer); }, every);
  }

  function init(root) { root.querySelectorAll(".chart[data-chart]").forEach(draw); }
  document.addEventListener("DOMContentLoaded", () => init(document));
  document.addEventListener("htmx:afterSettle", (e) => init(e.target));
})();
