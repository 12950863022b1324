// The inventory tab: the namespaces (with their pods, bare pods and slices counted) and every pod in one list,
// paged, searched and sorted by the server (/api/v1/inventory/*), so 30,000 pods cost a page of rows; the chosen
// namespace's Services, ConfigMaps and Secrets; a row's details; delete with the preview of what goes with it
// (the API's dry run); the create form. The view's state (search, cluster, namespace, sort, page) is in the URL.
"use strict";

const POD_PAGE = 50;
const RELOAD_AFTER_EVENT_MS = 500;
const SEARCH_PAUSE_MS = 120;
const FIRST_ROWS = "kuberaven:first-rows"; // a performance mark: when the page first showed pods (bench/ui_bench.py)
const inventory = { q: "", cluster: "", namespace: "", sort: "namespace", offset: 0 };
const podsAnswer = latest();
let reloadTimer = null;
let selected = null; // {kind, id} of the row whose details are shown

function failed(row) {
  return row.backend_code === 2 ? "error" : null;
}

function selectable(kind, row, extra = {}) {
  const chosen = selected && selected.kind === kind && selected.id === row.id;
  const classes = [extra.class, failed(row), "selectable", chosen ? "selected" : null].filter(Boolean).join(" ");
  return { ...extra, "data-kind": kind, "data-id": row.id, class: classes, tabindex: "0" };
}

const POD_COLUMNS = [
  ["namespace", (i) => i.namespace, "namespace", "namespace"],
  ["slice", (i) => (i.bare ? element("em", { class: "hint" }, "bare pod") : i.slice), "slice", "slice"],
  ["name", (i) => i.name, "name", "name"],
  ["phase", (i) => i.phase || "—", "phase", "phase"],
  ["IP", (i) => i.pod_ip || "", "ip", "ip"],
  ["node", (i) => i.node || "", "node", "node"],
  ["restarts", (i) => String(i.restart_count ?? ""), "restarts", "restarts"],
  ["image", (i) => i.image || "", "name image", "image"],
  ["managed by", (i) => (i.xos_managed ? "kuberaven" : "external"), "managed", "managed"],
  ["status", (i) => i.backend_status || "", "status", "status"],
];

function podQuery() {
  const query = new URLSearchParams({ limit: String(POD_PAGE), offset: String(inventory.offset), sort: inventory.sort });
  for (const name of ["q", "cluster", "namespace"]) if (inventory[name]) query.set(name, inventory[name]);
  return query;
}

async function reloadPods() {
  const started = performance.now();
  const page = await podsAnswer(api(`/inventory/pods?${podQuery()}`));
  const view = document.getElementById("inventory");
  view.replaceChildren(
    page.items.length
      ? sortedTable(POD_COLUMNS, page.items,
        (i) => selectable("KubernetesServiceInstance", i, { "data-instance": `${i.trust_domain}/${i.name}` }),
        inventory.sort, (sort) => changeInventory({ sort, offset: 0 }))
      : empty(inventory.q ? `no pod matches “${inventory.q}”` : "no pods"),
    pager(page.total, page.offset, page.limit, (offset) => changeInventory({ offset })));
  view.dataset.total = String(page.total);
  view.dataset.query = podQuery().toString(); // what the rows shown answer (tests and the bench wait on it)
  view.dataset.ms = String(Math.round(performance.now() - started));
  if (page.items.length && !performance.getEntriesByName(FIRST_ROWS).length) performance.mark(FIRST_ROWS);
}

const NAMESPACE_COLUMNS = [
  ["cluster", (t) => t.cluster],
  ["namespace", (t) => t.name, "name"],
  ["pods", (t) => String(t.pods), "pods"],
  ["bare pods", (t) => String(t.bare_pods), "bare"],
  ["slices", (t) => String(t.slices), "slices"],
  ["managed by", (t) => (t.xos_managed ? "kuberaven" : "external"), "managed"],
  ["status", (t) => t.backend_status || "", "status"],
];

async function reloadNamespaces() {
  const query = new URLSearchParams();
  if (inventory.cluster) query.set("cluster", inventory.cluster);
  const page = await api(`/inventory/namespaces?${query}`);
  const chosen = `${inventory.cluster}/${inventory.namespace}`;
  document.getElementById("inv-namespaces").replaceChildren(page.items.length
    ? table(NAMESPACE_COLUMNS, page.items, (t) => selectable("TrustDomain", t, {
      "data-trust-domain": `${t.cluster}/${t.name}`, "data-namespace": t.name, "data-cluster": t.cluster,
      class: `${t.cluster}/${t.name}` === chosen || (!inventory.cluster && t.name === inventory.namespace) ? "chosen" : null,
    }))
    : empty("no namespaces"), page.items.length < page.total ? empty(`the first ${page.items.length} of ${page.total}`) : "");
  const select = document.getElementById("inv-namespace");
  const names = ["", ...new Set(page.items.map((t) => t.name))];
  if (inventory.namespace && !names.includes(inventory.namespace)) names.push(inventory.namespace);
  if ([...select.options].map((o) => o.value).join() !== names.join()) {
    select.replaceChildren(...names.map((n) => element("option", { value: n }, n || "all")));
  }
  select.value = inventory.namespace;
}

function keysOf(row) {
  // Observed rows have `keys`; rows kuberaven manages have `data` (a Secret's values come back hidden).
  return (row.keys || Object.keys(row.data || {})).join(", ");
}

// The chosen namespace's Services (with their ports), ConfigMaps and Secrets (keys only).
async function reloadObjects() {
  const box = document.getElementById("inv-objects");
  if (!inventory.namespace || !inventory.cluster) {
    box.replaceChildren(empty("Choose a namespace (click its row) for its Services, ConfigMaps and Secrets."));
    return;
  }
  const domain = `${inventory.cluster}/${inventory.namespace}`;
  const inDomain = (kind) => api(`/${kind}?limit=1000&trust_domain=${encodeURIComponent(domain)}`).then((p) => p.items);
  const [services, configMaps, secrets] = await Promise.all(["Service", "KubernetesConfigMap", "KubernetesSecret"].map(inDomain));
  const own = services.filter((s) => s.kind === "Service");
  const ports = (await Promise.all(own.map((s) =>
    api(`/ServicePort?limit=1000&service=${encodeURIComponent(`${domain}/${s.name}`)}`)))).flatMap((p) => p.items);
  const parts = [];
  const managed = (r) => (r.xos_managed ? "kuberaven" : "external");
  if (own.length) {
    parts.push(element("span", { class: "group" }, "Services"), table([
      ["name", (s) => s.name, "name"],
      ["ports", (s) => ports.filter((p) => p.service === `${domain}/${s.name}`)
        .map((p) => `${p.name || ""} ${p.external_port ?? ""}→${p.internal_port ?? ""}/${p.protocol}`.trim()).join(", ")],
      ["managed by", managed, "managed"],
      ["status", (s) => s.backend_status || "", "status"],
    ], own, (s) => selectable("Service", s, { "data-object": `Service/${domain}/${s.name}` })));
  }
  for (const [label, kind, rows] of [["ConfigMaps", "KubernetesConfigMap", configMaps], ["Secrets (keys only)", "KubernetesSecret", secrets]]) {
    if (!rows.length) continue;
    parts.push(element("span", { class: "group" }, label), table([
      ["name", (r) => r.name, "name"],
      ["keys", keysOf, "name keys"],
      ["managed by", managed, "managed"],
      ["status", (r) => r.backend_status || "", "status"],
    ], rows, (r) => selectable(kind, r, { "data-object": `${kind}/${domain}/${r.name}` })));
  }
  box.replaceChildren(element("h3", {}, `Services, ConfigMaps and Secrets of ${domain}`),
    ...(parts.length ? parts : [empty("none")]));
}

async function reloadInventory() {
  const status = document.getElementById("inv-status");
  try {
    await reloadPods(); // the rows first: the rest waits for them rather than slowing them
    await Promise.all([reloadNamespaces(), reloadObjects(), reloadClusters()]);
    status.className = "hint";
    status.textContent = "";
  } catch (error) {
    if (error instanceof Stale) return;
    status.className = "error";
    status.textContent = `cannot load the inventory: ${error.message}`;
  }
}

// A change of search, filter, sort or page: the URL first (a link shows the same), then the rows.
function changeInventory(change) {
  Object.assign(inventory, change);
  saveState("inventory");
  reloadPods().catch((error) => {
    if (!(error instanceof Stale)) document.getElementById("inv-status").textContent = error.message;
  });
  if ("namespace" in change || "cluster" in change) reloadInventory();
}

tabStates.inventory = {
  read() {
    const query = new URLSearchParams();
    for (const name of ["q", "cluster", "namespace"]) if (inventory[name]) query.set(name, inventory[name]);
    if (inventory.sort !== "namespace") query.set("sort", inventory.sort);
    if (inventory.offset) query.set("offset", String(inventory.offset));
    return query;
  },
  write(query) {
    Object.assign(inventory, {
      q: query.get("q") || "", cluster: query.get("cluster") || "", namespace: query.get("namespace") || "",
      sort: query.get("sort") || "namespace", offset: Math.max(0, Number(query.get("offset")) || 0),
    });
    document.getElementById("inv-q").value = inventory.q;
  },
};

function scheduleReload() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(reloadInventory, RELOAD_AFTER_EVENT_MS);
}

async function reloadClusters() {
  const clusters = (await api("/KubernetesService?limit=1000")).items.map((c) => c.name);
  for (const [id, names] of [["f-cluster", clusters], ["inv-cluster", ["", ...clusters]]]) {
    const select = document.getElementById(id);
    if ([...select.options].map((o) => o.value).join() !== names.join()) {
      select.replaceChildren(...names.map((n) => element("option", { value: n }, n || "all")));
    }
  }
  document.getElementById("inv-cluster").value = inventory.cluster;
}

// --- details and delete ---------------------------------------------------------------------------

function shown(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

async function showDetail(kind, id) {
  selected = { kind, id };
  const section = document.getElementById("detail-section");
  section.hidden = false;
  document.getElementById("delete-plan").hidden = true;
  document.getElementById("delete-result").textContent = "";
  try {
    const row = await api(`/${kind}/${id}`);
    document.getElementById("detail-title").textContent = `${kind} ${row.name ?? id}`;
    const fields = Object.entries(row).filter(([name]) => name !== "kind");
    document.getElementById("detail").replaceChildren(...fields.map(([name, value]) =>
      element("tr", { "data-field": name }, element("th", {}, name), element("td", {}, shown(value)))));
  } catch (error) {
    document.getElementById("detail-title").textContent = `${kind} ${id}: ${error.message}`;
    document.getElementById("detail").replaceChildren();
  }
  for (const node of document.querySelectorAll(".selected")) node.classList.remove("selected");
  for (const node of document.querySelectorAll(`[data-kind="${kind}"][data-id="${id}"]`)) node.classList.add("selected");
}

async function previewDelete() {
  const result = document.getElementById("delete-result");
  result.textContent = "";
  try {
    // The API's dry run: the same plan as `kuberaven delete --cascade --dry-run` (model/deletes.py).
    const plan = await api(`/${selected.kind}/${selected.id}?cascade=true&dry_run=true`, { method: "DELETE" });
    const others = plan.deleted.length - 1;
    document.getElementById("delete-what").textContent = others
      ? `Deleting ${plan.kind} ${plan.name} also deletes ${others} other row${others > 1 ? "s" : ""}:`
      : `Delete ${plan.kind} ${plan.name}?`;
    document.getElementById("delete-rows").replaceChildren(...plan.deleted.map((row) =>
      element("li", { "data-kind": row.kind }, `${row.kind} ${row.name}`,
        row.in_kubernetes ? element("strong", {}, " (deleted in Kubernetes)") : "")));
    document.getElementById("delete-confirm").textContent = `Delete ${plan.deleted.length} row${plan.deleted.length > 1 ? "s" : ""}`;
    document.getElementById("delete-plan").hidden = false;
  } catch (error) {
    result.className = "error";
    result.textContent = error.message; // e.g. still referenced by other rows
  }
}

async function confirmDelete() {
  const result = document.getElementById("delete-result");
  try {
    const done = await api(`/${selected.kind}/${selected.id}?cascade=true`, { method: "DELETE" });
    result.className = "ok";
    result.textContent = `deleted ${done.deleted.map((r) => `${r.kind} ${r.name}`).join(", ")}`;
    document.getElementById("delete-plan").hidden = true;
    document.getElementById("detail").replaceChildren();
    selected = null;
    scheduleReload();
  } catch (error) {
    result.className = "error";
    result.textContent = error.message;
  }
}

async function createInstance(submitted) {
  submitted.preventDefault();
  const value = (id) => document.getElementById(id).value.trim();
  const cluster = value("f-cluster");
  const trustDomain = `${cluster}/${value("f-trust-domain")}`;
  const documents = [
    { kind: "TrustDomain", name: value("f-trust-domain"), owner: cluster },
    { kind: "Slice", name: value("f-slice"), trust_domain: trustDomain, site: (await api("/Site?limit=1")).items[0]?.name },
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

function chooseRow(row) {
  showDetail(row.dataset.kind, row.dataset.id);
  if (row.dataset.namespace) changeInventory({ cluster: row.dataset.cluster, namespace: row.dataset.namespace, offset: 0 });
}

const inventorySection = document.getElementById("inventory-section");
inventorySection.addEventListener("click", (clicked) => {
  const row = clicked.target.closest("[data-kind][data-id]");
  if (row) chooseRow(row);
});
inventorySection.addEventListener("keydown", (pressed) => {
  const row = pressed.target.closest("[data-kind][data-id]");
  if (row && pressed.key === "Enter") chooseRow(row);
});
const search = debounced((q) => changeInventory({ q, offset: 0 }), SEARCH_PAUSE_MS);
document.getElementById("inv-q").addEventListener("input", (typed) => search(typed.target.value.trim()));
document.getElementById("inv-filter").addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  changeInventory({ q: document.getElementById("inv-q").value.trim(), offset: 0 });
});
document.getElementById("inv-cluster").addEventListener("change", (changed) =>
  changeInventory({ cluster: changed.target.value, namespace: "", offset: 0 }));
document.getElementById("inv-namespace").addEventListener("change", (changed) =>
  changeInventory({ namespace: changed.target.value, offset: 0 }));
// "/" searches, as in k9s and less (not while typing in a field).
document.addEventListener("keydown", (pressed) => {
  if (pressed.key !== "/" || currentTab() !== "inventory" || pressed.target.closest("input, select, textarea")) return;
  pressed.preventDefault();
  document.getElementById("inv-q").focus();
});
document.getElementById("delete-preview").addEventListener("click", previewDelete);
document.getElementById("delete-confirm").addEventListener("click", confirmDelete);
document.getElementById("delete-cancel").addEventListener("click", () => { document.getElementById("delete-plan").hidden = true; });
document.getElementById("create-form").addEventListener("submit", createInstance);
tabOpened.inventory = reloadInventory;
onEvent.push(() => { if (currentTab() === "inventory") scheduleReload(); });
// Phases change without pod events too (a slow image pull, say).
setInterval(() => { if (currentTab() === "inventory") reloadInventory(); }, 5000);
