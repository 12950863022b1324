// The health tab: /readyz as tables (app.js polls it every 3 s for the badge too): each component with its
// state, restarts and last error; each watch with its progress, connection, idle time and backlog.
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

tabOpened.health = () => renderHealth(lastReadiness);
onReadiness.push((readiness) => { if (currentTab() === "health") renderHealth(readiness); });
