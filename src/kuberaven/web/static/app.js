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

// A table sorted by the server: columns are [header, row => cell, class?, sort key?]; a header with a sort key
// is a button (aria-sort shows the order); ``sort`` is "key" or "-key"; onSort(newSort) asks for the other order.
function sortedTable(columns, rows, rowAttributes, sort, onSort) {
  const shown = table(columns, rows, rowAttributes);
  const heads = shown.querySelectorAll("thead th");
  columns.forEach(([title, , , key], index) => {
    if (!key) return;
    const order = sort === key ? "ascending" : sort === `-${key}` ? "descending" : "none";
    const arrow = { ascending: " ▲", descending: " ▼", none: "" }[order];
    const button = element("button", { type: "button", class: "sort", "data-sort": key }, `${title}${arrow}`);
    button.addEventListener("click", () => onSort(sort === key ? `-${key}` : key));
    heads[index].setAttribute("aria-sort", order);
    heads[index].replaceChildren(button);
  });
  return shown;
}

// "rows a–b of N" and previous / next buttons; onPage(newOffset).
function pager(total, offset, limit, onPage) {
  const last = Math.min(offset + limit, total);
  const text = total ? `rows ${offset + 1}–${last} of ${total.toLocaleString("en")}` : "no rows";
  const previous = element("button", { type: "button", class: "previous", disabled: offset === 0 }, "← previous");
  const next = element("button", { type: "button", class: "next", disabled: last >= total }, "next →");
  previous.addEventListener("click", () => onPage(Math.max(0, offset - limit)));
  next.addEventListener("click", () => onPage(offset + limit));
  return element("div", { class: "pager", "data-total": String(total), "data-offset": String(offset) },
    previous, element("span", { class: "range" }, text), next);
}

// Calls ``fn`` once the calls stop for ``ms`` (a search box: one request per pause in typing, not per key).
function debounced(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// Drops answers that arrive after a newer request of the same view (a slow search must not overwrite a newer one).
function latest() {
  let asked = 0;
  return async (promise) => {
    const mine = ++asked;
    const answer = await promise;
    if (mine !== asked) throw new Stale();
    return answer;
  };
}
class Stale extends Error {}

// --- tabs ------------------------------------------------------------------------------------------

const tabOpened = {}; // tab name → callback when it is shown
// The URL holds the view's state (#network?namespace=shop, #inventory?q=web&sort=-node&offset=50), so a link
// shows a colleague the same thing: tab name → {read() → URLSearchParams, write(URLSearchParams)}.
const tabStates = {};

function showTab(name) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const tab of document.querySelectorAll("main.tab")) tab.hidden = tab.id !== `tab-${name}`;
  saveState(name);
  if (tabOpened[name]) tabOpened[name]();
}

// The current view's state into the URL (replaceState: paging through a list does not fill the history).
function saveState(name = currentTab()) {
  const query = tabStates[name] ? tabStates[name].read().toString() : "";
  const hash = name === "inventory" && !query ? "" : `#${name}${query ? `?${query}` : ""}`;
  if (hash !== location.hash) history.replaceState(null, "", `${location.pathname}${location.search}${hash}`);
}

// The tab and view state a URL names (a link opened, or the hash changed by hand).
function openHash() {
  const [wanted, query = ""] = location.hash.slice(1).split("?");
  const name = ["network", "health"].includes(wanted) ? wanted : "inventory";
  if (tabStates[name]) tabStates[name].write(new URLSearchParams(query));
  showTab(name);
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
  window.addEventListener("hashchange", openHash);
  openHash(); // the view's rows first; then the badge and the event stream
  pollReadiness();
  setInterval(pollReadiness, READY_EVERY_MS);
  listen();
}

// Once every script has run (the views register their tabs and callbacks).
document.addEventListener("DOMContentLoaded", start);
