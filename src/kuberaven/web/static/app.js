// kuberaven's page, shared part: the API, elements, tables, tabs, the live badge and the event stream.
// inventory.js, network.js and health.js use these globals. No framework, no build step.
"use strict";

const API = "/api/v1";
const MAX_EVENTS = 200;
const READY_EVERY_MS = 3000;
let token = localStorage.getItem("kuberaven-token") || "";
let stream = null;
let streamOpen = false;
let lastReadiness = null; // {ready, body} of the last /readyz, or null when it did not answer
const onEvent = []; // callbacks of the views for each pod event
const onReadiness = []; // callbacks for each /readyz answer

function headers(extra = {}) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(API + path, { ...options, headers: headers(options.headers || {}) });
  if (response.status === 401) {
    document.getElementById("token-form").hidden = false;
    throw new Error("an API token is needed");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || `${response.status} ${response.statusText}`);
  return body;
}

async function all(kind) {
  const items = [];
  for (let offset = 0; ; offset += 1000) {
    const page = await api(`/${kind}?limit=1000&offset=${offset}`);
    items.push(...page.items);
    if (items.length >= page.total || page.items.length === 0) return items;
  }
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) node.append(child ?? "");
  return node;
}

// A table of rows: columns are [header, row => cell text or node, class?].
function table(columns, rows, rowAttributes = () => ({})) {
  const head = element("tr", {}, ...columns.map(([title]) => element("th", {}, title)));
  const body = rows.map((row) => element("tr", rowAttributes(row),
    ...columns.map(([, cell, cls]) => element("td", { class: cls || null }, cell(row) ?? ""))));
  return element("table", {}, element("thead", {}, head), element("tbody", {}, ...body));
}

function empty(text) {
  return element("p", { class: "hint" }, text);
}

// --- tabs ------------------------------------------------------------------------------------------

const tabOpened = {}; // tab name → callback when it is shown

function showTab(name) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const tab of document.querySelectorAll("main.tab")) tab.hidden = tab.id !== `tab-${name}`;
  location.hash = name === "inventory" ? "" : name;
  if (tabOpened[name]) tabOpened[name]();
}

function currentTab() {
  return document.querySelector("#tabs button.active")?.dataset.tab || "inventory";
}

// --- the live badge: green only while /readyz says ready and the event stream is open --------------

async function pollReadiness() {
  try {
    const response = await fetch("/readyz", { cache: "no-store" });
    lastReadiness = { ready: response.ok, body: await response.json().catch(() => ({})) };
  } catch (error) {
    lastReadiness = null;
  }
  updateBadge();
  for (const callback of onReadiness) callback(lastReadiness);
}

function updateBadge() {
  const badge = document.getElementById("connection");
  let state, text;
  if (lastReadiness === null) [state, text] = ["offline", "offline: the server does not answer"];
  else if (!lastReadiness.ready) [state, text] = ["degraded", `not ready: ${notReadyReason(lastReadiness.body)}`];
  else if (!streamOpen) [state, text] = ["degraded", "ready; event stream reconnecting"];
  else [state, text] = ["live", "live"];
  badge.textContent = text;
  badge.className = `badge ${state}`;
  badge.dataset.state = state;
}

function notReadyReason(body) {
  const watches = (body.watches || []).filter((w) => w.synced === false || w.connected === false);
  const components = (body.components || []).filter((c) => c.ready === false);
  if (watches.length) return `${watches.length} watch${watches.length > 1 ? "es" : ""} not synced or disconnected`;
  if (components.length) return components.map((c) => `${c.component} ${c.state}`).join(", ");
  return "starting";
}

// --- the event stream ------------------------------------------------------------------------------

function showEvent(event) {
  const list = document.getElementById("events");
  const ips = (event.netinterfaces || []).flatMap((i) => i.addresses).join(",");
  list.prepend(element("li", { "data-status": event.status, "data-pod": `${event.namespace}/${event.name}` },
    element("time", {}, (event.time || "").slice(11, 19)), ` ${event.status} `,
    element("strong", {}, `${event.namespace}/${event.name}`), ` ${event.phase || ""} ${ips}`));
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
}

async function listen() {
  if (stream) stream.close();
  streamOpen = false;
  // Start from the newest few events, then follow.
  let since = 0;
  try {
    const { newest } = await api("/events?limit=1");
    since = Math.max(0, newest - 20);
  } catch (error) {
    updateBadge();
    return;
  }
  const query = new URLSearchParams({ since: String(since) });
  if (token) query.set("access_token", token);
  stream = new EventSource(`${API}/events/stream?${query}`);
  stream.onopen = () => { streamOpen = true; updateBadge(); };
  stream.onerror = () => { streamOpen = false; updateBadge(); };
  stream.addEventListener("pod", (message) => {
    const event = JSON.parse(message.data);
    showEvent(event);
    for (const callback of onEvent) callback(event);
  });
}

function start() {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  document.getElementById("token-form").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    token = document.getElementById("token").value;
    localStorage.setItem("kuberaven-token", token);
    document.getElementById("token-form").hidden = true;
    showTab(currentTab());
    listen();
  });
  pollReadiness();
  setInterval(pollReadiness, READY_EVERY_MS);
  listen();
  const wanted = location.hash.slice(1);
  showTab(["network", "health"].includes(wanted) ? wanted : "inventory");
}

// Once every script has run (the views register their tabs and callbacks).
document.addEventListener("DOMContentLoaded", start);
