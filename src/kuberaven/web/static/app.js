// kuberaven's page: reads /api/v1, listens to /api/v1/events/stream. No framework, no build step.
"use strict";

const API = "/api/v1";
const MAX_EVENTS = 200;
let token = localStorage.getItem("kuberaven-token") || "";
let reloadTimer = null;
let stream = null;

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
    if (value !== null && value !== undefined) node.setAttribute(name, value);
  }
  for (const child of children) node.append(child ?? "");
  return node;
}

function instanceRow(instance) {
  const failed = instance.backend_code === 2;
  const key = `${instance.trust_domain}/${instance.name}`;
  return element(
    "tr",
    { "data-instance": key, class: failed ? "error" : null },
    element("td", {}, instance.name),
    element("td", { class: "phase" }, instance.phase || "—"),
    element("td", { class: "ip" }, instance.pod_ip || ""),
    element("td", {}, instance.node || ""),
    element("td", {}, String(instance.restart_count ?? "")),
    element("td", {}, instance.image || ""),
    element("td", { class: "managed" }, instance.xos_managed ? "kuberaven" : "external"),
    element("td", { class: "status" }, instance.backend_status || ""),
  );
}

function instanceTable(instances) {
  const head = element("tr", {}, ...["name", "phase", "IP", "node", "restarts", "image", "managed by", "status"].map((h) => element("th", {}, h)));
  return element("table", {}, element("thead", {}, head), element("tbody", {}, ...instances.map(instanceRow)));
}

function renderInventory(clusters, trustDomains, slices, instances) {
  const root = document.getElementById("inventory");
  const tree = element("ul", { class: "tree" });
  for (const cluster of clusters) {
    const domains = trustDomains.filter((t) => t.owner === cluster.name);
    const domainList = element("ul");
    for (const domain of domains) {
      const qualified = `${cluster.name}/${domain.name}`;
      const inDomain = instances.filter((i) => i.trust_domain === qualified);
      const sliceList = element("ul");
      const groups = [...slices.filter((s) => s.trust_domain === qualified).map((s) => [s.name, `${qualified}/${s.name}`]), ["(no slice)", null]];
      for (const [label, sliceName] of groups) {
        const members = inDomain.filter((i) => (i.slice || null) === sliceName);
        if (!members.length && sliceName === null) continue;
        sliceList.append(element("li", { "data-slice": sliceName }, element("span", { class: "slice" }, `slice ${label}`), members.length ? instanceTable(members) : element("em", {}, " no instances")));
      }
      const failed = domain.backend_code === 2 ? " error" : "";
      domainList.append(element("li", { "data-trust-domain": qualified, class: failed.trim() || null }, element("span", { class: "domain" }, `trust domain ${domain.name}`), element("small", {}, ` ${domain.backend_status || ""}`), sliceList));
    }
    tree.append(element("li", { "data-cluster": cluster.name }, element("span", { class: "cluster" }, `cluster ${cluster.name}`), domainList));
  }
  root.replaceChildren(tree);
}

async function reloadInventory() {
  try {
    const [clusters, trustDomains, slices, instances] = await Promise.all(
      ["KubernetesService", "TrustDomain", "Slice", "KubernetesServiceInstance"].map(all),
    );
    renderInventory(clusters, trustDomains, slices, instances);
    fillClusters(clusters);
  } catch (error) {
    document.getElementById("inventory").textContent = `cannot load the inventory: ${error.message}`;
  }
}

function scheduleReload() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(reloadInventory, 250);
}

function fillClusters(clusters) {
  const select = document.getElementById("f-cluster");
  const names = clusters.map((c) => c.name);
  if ([...select.options].map((o) => o.value).join() === names.join()) return;
  select.replaceChildren(...names.map((n) => element("option", { value: n }, n)));
}

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
  // Start from the newest few events, then follow.
  let since = 0;
  try {
    const { newest } = await api("/events?limit=1");
    since = Math.max(0, newest - 20);
  } catch (error) {
    setConnection(false, error.message);
    return;
  }
  const query = new URLSearchParams({ since: String(since) });
  if (token) query.set("access_token", token);
  stream = new EventSource(`${API}/events/stream?${query}`);
  stream.onopen = () => setConnection(true);
  stream.onerror = () => setConnection(false, "reconnecting");
  stream.addEventListener("pod", (message) => {
    showEvent(JSON.parse(message.data));
    scheduleReload();
  });
}

function setConnection(live, why = "") {
  const badge = document.getElementById("connection");
  badge.textContent = live ? "live" : `offline ${why}`;
  badge.className = live ? "badge live" : "badge offline";
}

async function createInstance(submitted) {
  submitted.preventDefault();
  const value = (id) => document.getElementById(id).value.trim();
  const cluster = value("f-cluster");
  const trustDomain = `${cluster}/${value("f-trust-domain")}`;
  const documents = [
    { kind: "TrustDomain", name: value("f-trust-domain"), owner: cluster },
    { kind: "Slice", name: value("f-slice"), trust_domain: trustDomain, site: (await all("Site"))[0]?.name },
    { kind: "Image", name: value("f-image") },
    { kind: "KubernetesServiceInstance", name: value("f-name"), slice: `${trustDomain}/${value("f-slice")}`, image: value("f-image") },
  ];
  const result = document.getElementById("create-result");
  try {
    const applied = await api("/apply", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(documents),
    });
    result.className = "ok";
    result.textContent = applied.items.map((i) => `${i.kind} ${i.name} ${i.action}`).join("; ");
    scheduleReload();
  } catch (error) {
    result.className = "error";
    result.textContent = error.message;
  }
}

document.getElementById("create-form").addEventListener("submit", createInstance);
document.getElementById("token-form").addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  token = document.getElementById("token").value;
  localStorage.setItem("kuberaven-token", token);
  document.getElementById("token-form").hidden = true;
  reloadInventory();
  listen();
});
reloadInventory();
listen();
setInterval(reloadInventory, 5000);  // phases change without pod events too (a slow image pull, say)
