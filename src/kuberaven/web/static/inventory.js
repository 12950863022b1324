// The inventory tab: clusters → trust domains → slices → instances, Services, ConfigMaps and Secrets;
// a row's details; delete with the preview of what goes with it (the API's dry run); the create form.
"use strict";

const INVENTORY_KINDS = ["KubernetesService", "TrustDomain", "Slice", "KubernetesServiceInstance", "Service",
  "ServicePort", "KubernetesConfigMap", "KubernetesSecret"];
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

function instanceTable(instances) {
  return table([
    ["name", (i) => i.name, "name"],
    ["phase", (i) => i.phase || "—", "phase"],
    ["IP", (i) => i.pod_ip || "", "ip"],
    ["node", (i) => i.node || ""],
    ["restarts", (i) => String(i.restart_count ?? "")],
    ["image", (i) => i.image || "", "name"],
    ["managed by", (i) => (i.xos_managed ? "kuberaven" : "external"), "managed"],
    ["status", (i) => i.backend_status || "", "status"],
  ], instances, (i) => selectable("KubernetesServiceInstance", i, { "data-instance": `${i.trust_domain}/${i.name}` }));
}

function keysOf(row) {
  // Observed rows have `keys`; rows kuberaven manages have `data` (a Secret's values come back hidden).
  return (row.keys || Object.keys(row.data || {})).join(", ");
}

function objectTables(domain, services, ports, configMaps, secrets) {
  const parts = [];
  const managed = (r) => (r.xos_managed ? "kuberaven" : "external");
  if (services.length) {
    parts.push(element("span", { class: "group" }, "Services"), table([
      ["name", (s) => s.name, "name"],
      ["ports", (s) => ports.filter((p) => p.service === `${domain}/${s.name}`)
        .map((p) => `${p.name || ""} ${p.external_port ?? ""}→${p.internal_port ?? ""}/${p.protocol}`.trim()).join(", ")],
      ["managed by", managed, "managed"],
      ["status", (s) => s.backend_status || "", "status"],
    ], services, (s) => selectable("Service", s, { "data-object": `Service/${domain}/${s.name}` })));
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
  return parts;
}

function renderInventory(rows) {
  const [clusters, trustDomains, slices, instances, services, ports, configMaps, secrets] = rows;
  const tree = element("ul", { class: "tree" });
  for (const cluster of clusters) {
    const domainList = element("ul");
    for (const domain of trustDomains.filter((t) => t.owner === cluster.name)) {
      const qualified = `${cluster.name}/${domain.name}`;
      const inDomain = (list) => list.filter((r) => r.trust_domain === qualified);
      const members = inDomain(instances);
      const sliceList = element("ul");
      const groups = [...slices.filter((s) => s.trust_domain === qualified).map((s) => [s, `${qualified}/${s.name}`]), [null, null]];
      for (const [slice, sliceName] of groups) {
        const inSlice = members.filter((i) => (i.slice || null) === sliceName);
        if (!inSlice.length && slice === null) continue;
        const label = slice ? element("span", selectable("Slice", slice, { class: "slice" }), `slice ${slice.name}`)
          : element("span", { class: "slice" }, "(no slice)");
        sliceList.append(element("li", { "data-slice": sliceName }, label, inSlice.length ? instanceTable(inSlice) : element("em", {}, " no instances")));
      }
      const objects = objectTables(qualified, inDomain(services), ports, inDomain(configMaps), inDomain(secrets));
      if (objects.length) sliceList.append(element("li", { class: "objects" }, ...objects));
      domainList.append(element("li", { "data-trust-domain": qualified, class: failed(domain) },
        element("span", selectable("TrustDomain", domain, { class: "domain" }), `trust domain ${domain.name}`),
        element("small", { class: "status" }, ` ${domain.backend_status || ""}`), sliceList));
    }
    tree.append(element("li", { "data-cluster": cluster.name },
      element("span", selectable("KubernetesService", cluster, { class: "cluster" }), `cluster ${cluster.name}`), domainList));
  }
  document.getElementById("inventory").replaceChildren(tree);
}

async function reloadInventory() {
  try {
    const rows = await Promise.all(INVENTORY_KINDS.map(all));
    rows[4] = rows[4].filter((s) => s.kind === "Service" && s.trust_domain); // not the clusters (also Services)
    renderInventory(rows);
    fillClusters(rows[0]);
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

document.getElementById("inventory").addEventListener("click", (clicked) => {
  const row = clicked.target.closest("[data-kind][data-id]");
  if (row) showDetail(row.dataset.kind, row.dataset.id);
});
document.getElementById("inventory").addEventListener("keydown", (pressed) => {
  const row = pressed.target.closest("[data-kind][data-id]");
  if (row && pressed.key === "Enter") showDetail(row.dataset.kind, row.dataset.id);
});
document.getElementById("delete-preview").addEventListener("click", previewDelete);
document.getElementById("delete-confirm").addEventListener("click", confirmDelete);
document.getElementById("delete-cancel").addEventListener("click", () => { document.getElementById("delete-plan").hidden = true; });
document.getElementById("create-form").addEventListener("submit", createInstance);
tabOpened.inventory = reloadInventory;
onEvent.push(() => { if (currentTab() === "inventory") scheduleReload(); });
// Phases change without pod events too (a slow image pull, say).
setInterval(() => { if (currentTab() === "inventory") reloadInventory(); }, 5000);
