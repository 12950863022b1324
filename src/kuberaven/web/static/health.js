// The health tab: /readyz as tables (app.js polls it every 3 s for the badge too): each component with its
// state, restarts and last error; each watch with its progress, connection, idle time and backlog; and plots of
// the last hour of the daemon's own metrics (uPlot, served from /libs/; without it, the latest values).
"use strict";

// Fields of a watch shown in their own column; any other field a component reports goes to "more".
const WATCH_FIELDS = ["component", "cluster", "target", "synced", "connected", "idle_seconds",
  "listed", "expected", "written", "queued"];

function yesNo(value, bad) {
  if (value === undefined || value === null) return "";
  return element("span", { class: value === bad ? "bad" : "good" }, value ? "yes" : "no");
}

function watchProblem(watch) {
  return watch.synced === false || watch.connected === false;
}

function listedText(watch) {
  if (watch.listed === undefined || watch.listed === null) return "";
  return watch.expected ? `${watch.listed}/${watch.expected}` : String(watch.listed);
}

function moreText(watch) {
  return Object.entries(watch).filter(([name]) => !WATCH_FIELDS.includes(name))
    .map(([name, value]) => `${name}: ${typeof value === "object" ? JSON.stringify(value) : value}`).join("; ");
}

function renderHealth(readiness) {
  const summary = document.getElementById("health-summary");
  if (readiness === null) {
    summary.textContent = "— the server does not answer";
    summary.className = "bad";
    return;
  }
  const { ready, body } = readiness;
  const watches = body.watches || [];
  const components = body.components || [];
  summary.textContent = ready ? "— ready" : `— not ready (HTTP 503): ${notReadyReason(body)}`;
  summary.className = ready ? "good" : "bad";
  summary.dataset.ready = String(ready);
  document.getElementById("health-components").replaceChildren(components.length ? table([
    ["component", (c) => c.component, "name"],
    ["state", (c) => c.state],
    ["ready", (c) => yesNo(c.ready, false)],
    ["restarts", (c) => String(c.restarts ?? 0)],
    ["last error", (c) => c.last_error || "", "name"],
  ], components, (c) => ({ "data-component": c.component, class: c.ready === false ? "error" : null }))
    : empty("no components reported (a daemon without a supervisor)"));
  document.getElementById("health-watches").replaceChildren(watches.length ? table([
    ["component", (w) => w.component || ""],
    ["cluster", (w) => w.cluster || ""],
    ["target", (w) => w.target, "name"],
    ["synced", (w) => yesNo(w.synced, false)],
    ["connected", (w) => yesNo(w.connected, false)],
    ["idle (s)", (w) => (w.idle_seconds ?? "") === "" ? "" : String(w.idle_seconds)],
    ["listed", listedText],
    ["written", (w) => (w.written === undefined ? "" : String(w.written))],
    ["backlog", (w) => (w.queued === undefined ? "" : String(w.queued))],
    ["more", moreText, "name"],
  ], watches, (w) => ({ "data-watch": `${w.component || ""}/${w.target}`, class: watchProblem(w) ? "error" : null }))
    : empty("no watches"));
}

// --- the plots: the last hour of the daemon's metrics (GET /api/v1/metrics/history), drawn with uPlot -------

const PLOT_COLORS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7b83", "#57606a"];
const PLOT_HEIGHT = 170;
const plots = {}; // plot id → {chart, lines}: redrawn with setData while its lines stay the same
let plotTimer = null;

function plotNote(text) {
  return element("p", { class: "hint lib-missing" }, text);
}

function drawPlot(box, plot) {
  const data = [plot.times, ...plot.values];
  const known = plots[plot.id];
  if (known && known.lines === plot.lines.join("\n")) {
    known.chart.setData(data);
    return;
  }
  if (known) known.chart.destroy();
  box.replaceChildren();
  const options = {
    width: Math.max(320, box.clientWidth || 600), height: PLOT_HEIGHT, title: plot.title,
    scales: { x: { time: true } }, axes: [{}, { label: plot.unit, size: 60 }],
    series: [{}, ...plot.lines.map((line, i) => ({ label: line, stroke: PLOT_COLORS[i % PLOT_COLORS.length], spanGaps: true }))],
  };
  plots[plot.id] = { chart: new uPlot(options, data, box), lines: plot.lines.join("\n") };
}

function plotFacts(box, plot) {
  // What the plot shows, for people reading the page's source and for the tests: each line's peak.
  const peaks = Object.fromEntries(plot.lines.map((line, i) =>
    [line, Math.max(0, ...plot.values[i].filter((v) => v !== null))]));
  box.dataset.points = String(plot.times.length);
  box.dataset.lastTime = String(plot.times[plot.times.length - 1] ?? "");
  box.dataset.peaks = JSON.stringify(peaks);
}

async function reloadPlots() {
  clearTimeout(plotTimer);
  const area = document.getElementById("health-plots");
  let every = 10;
  try {
    const history = await api("/metrics/history");
    every = history.every;
    for (const plot of history.plots) {
      let box = area.querySelector(`[data-plot="${plot.id}"]`);
      if (!box) {
        box = element("div", { class: "plot", "data-plot": plot.id });
        area.append(box);
      }
      plotFacts(box, plot);
      if (typeof uPlot === "undefined") {
        const last = plot.lines.map((line, i) => `${line}: ${plot.values[i][plot.values[i].length - 1] ?? "—"}`);
        box.replaceChildren(element("strong", {}, `${plot.title} (${plot.unit})`), " ", last.join(", ") || "no data yet");
      } else {
        drawPlot(box, plot);
      }
    }
    if (typeof uPlot === "undefined" && !area.querySelector(".lib-missing")) {
      area.prepend(plotNote("The plots need uPlot, which is not installed here (make web-libs): the latest values instead."));
    }
  } catch (error) {
    area.replaceChildren(plotNote(`cannot load the metrics' history: ${error.message}`));
  }
  if (currentTab() === "health") plotTimer = setTimeout(reloadPlots, Math.max(1, every) * 1000);
}

tabOpened.health = () => { renderHealth(lastReadiness); reloadPlots(); };
onReadiness.push((readiness) => { if (currentTab() === "health") renderHealth(readiness); });
