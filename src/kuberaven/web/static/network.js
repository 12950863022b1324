// The network tab: what the translation made (GET /api/v1/network/{networks,ports,loadbalancers,policies},
// the same rows as `kuberaven net get`), paged, searched and sorted by the server, and can-reach with every hop
// that decides. The view's state (namespace, search, each table's sort and page) is in the URL.
"use strict";

const NET_PAGE = 50;
// The view's state (in the URL): namespace, search, and each table's sort and first row.
const net = { namespace: "", q: "", sort: {}, offset: {} };
const netAnswer = latest();

function groupsCell(groups) {
  return groups.map((g) => `${g.id}${g.from ? ` (${g.from})` : ""}`).join(", ");
}

function listenerNode(listener) {
  if (!("protocol" in listener)) return element("div", {}, listener.name);
  const members = listener.pool?.members || [];
  const targets = members.length ? members.map((m) => `${m.name} ${m.address}:${m.port}`).join(", ") : "no members";
  return element("div", { class: "listener" }, `${listener.protocol}:${listener.port} → pool ${listener.pool?.id ?? "—"}: ${targets}`);
}

function ruleText(rule) {
  const peer = rule.direction === "ingress" ? "from" : "to";
  return `${rule.direction} ${rule.protocol} ${rule.ports} ${peer} ${rule.remote} (${rule.description})`;
}

const NET_VIEWS = {
  networks: [
    ["namespace", (r) => r.namespace, "name", "name"],
    ["CIDR", (r) => r.cidr],
    ["gateway", (r) => r.gateway],
    ["network", (r) => r.network],
    ["subnet", (r) => r.subnet],
    ["security group", (r) => r.security_group],
    ["ports", (r) => String(r.ports)],
    ["cluster", (r) => r.cluster, null, "cluster"],
  ],
  ports: [
    ["namespace", (r) => r.namespace, "name", "namespace"],
    ["pod", (r) => r.pod, "name", "name"],
    ["address", (r) => r.address],
    ["MAC", (r) => r.mac],
    ["node", (r) => r.node],
    ["port", (r) => r.port],
    ["security groups", (r) => groupsCell(r.security_groups), "name"],
  ],
  loadbalancers: [
    ["namespace", (r) => r.namespace, "name", "namespace"],
    ["Service", (r) => r.service, "name", "name"],
    ["load balancer", (r) => r.load_balancer],
    ["VIP", (r) => r.vip_address],
    ["floating IP", (r) => r.floating_ip || (r.floating_error ? `none: ${r.floating_error}` : "")],
    ["listeners → pools → members", (r) => element("div", {}, ...r.listeners.map(listenerNode)), "name"],
  ],
  policies: [
    ["namespace", (r) => r.namespace, "name", "namespace"],
    ["NetworkPolicy", (r) => r.policy, "name", "name"],
    ["security group", (r) => r.security_group],
    ["restricts", (r) => r.directions.join(", ")],
    ["rules", (r) => (r.rules === null ? `${r.rule_count} (in ${r.backend})`
      : element("div", {}, ...r.rules.map((rule) => element("div", {}, ruleText(rule))))), "name"],
    ["pods", (r) => r.pods.join(", "), "name"],
  ],
};

const NET_KEYS = {
  networks: (r) => `${r.cluster}/${r.namespace}`,
  ports: (r) => `${r.namespace}/${r.pod}`,
  loadbalancers: (r) => `${r.namespace}/${r.service}`,
  policies: (r) => `${r.namespace}/${r.policy}`,
};

function netQuery(what) {
  const query = new URLSearchParams({ limit: String(NET_PAGE), offset: String(net.offset[what] || 0) });
  if (net.namespace) query.set("namespace", net.namespace);
  if (net.q) query.set("q", net.q);
  if (net.sort[what]) query.set("sort", net.sort[what]);
  return query;
}

function changeNetwork(change) {
  Object.assign(net, change);
  saveState("network");
  reloadNetwork();
}

async function reloadNetwork() {
  const status = document.getElementById("net-status");
  try {
    const kinds = Object.keys(NET_VIEWS);
    const pages = await netAnswer(Promise.all(kinds.map((what) => api(`/network/${what}?${netQuery(what)}`))));
    for (const page of pages) {
      const what = page.kind;
      const sort = net.sort[what] || "namespace";
      const view = page.items.length
        ? sortedTable(NET_VIEWS[what], page.items, (r) => ({ "data-net": NET_KEYS[what](r) }), sort,
          (newSort) => changeNetwork({ sort: { ...net.sort, [what]: newSort }, offset: { ...net.offset, [what]: 0 } }))
        : empty(`none${net.namespace ? ` in ${net.namespace}` : ""}${net.q ? ` matching “${net.q}”` : ""}`);
      const pages = page.total > page.limit || page.offset
        ? pager(page.total, page.offset, page.limit, (offset) => changeNetwork({ offset: { ...net.offset, [what]: offset } }))
        : "";
      document.getElementById(`net-${what}`).replaceChildren(view, pages);
    }
    status.className = "hint";
    status.textContent = `as of ${new Date().toLocaleTimeString()}`;
    drawNetwork().catch((error) => graphNote(`cannot draw the network: ${error.message}`)); // graph.js
  } catch (error) {
    if (error instanceof Stale) return;
    status.className = "error";
    status.textContent = `cannot load the network state: ${error.message}`;
  }
}

tabStates.network = {
  read() {
    const query = new URLSearchParams();
    if (net.namespace) query.set("namespace", net.namespace);
    if (net.q) query.set("q", net.q);
    for (const [what, sort] of Object.entries(net.sort)) if (sort && sort !== "namespace") query.set(`${what}.sort`, sort);
    for (const [what, offset] of Object.entries(net.offset)) if (offset) query.set(`${what}.offset`, String(offset));
    return query;
  },
  write(query) {
    const sort = {};
    const offset = {};
    for (const what of Object.keys(NET_VIEWS)) {
      if (query.get(`${what}.sort`)) sort[what] = query.get(`${what}.sort`);
      offset[what] = Math.max(0, Number(query.get(`${what}.offset`)) || 0);
    }
    Object.assign(net, { namespace: query.get("namespace") || "", q: query.get("q") || "", sort, offset });
    document.getElementById("net-namespace").value = net.namespace;
    document.getElementById("net-q").value = net.q;
  },
};

function decisionText(name, decision) {
  const where = [decision.policy && `policy ${decision.policy}`, decision.rule && `rule “${decision.rule}”`].filter(Boolean).join(", ");
  return `${name}: ${decision.allowed ? "allowed" : "denied"}${where ? ` by ${where}` : ""}: ${decision.reason}`;
}

// Each hop of an answer (pod → pod: egress, ingress; to a Service: its floating IP, listener, allowed_cidrs and
// each member's ingress), named as people read it.
const HOP_NAMES = {
  egress: "leaving", ingress: "entering", floating_ip: "floating IP of", listener: "listener", allowed_cidrs: "allowed_cidrs of",
};

function hopName(hop) {
  return `${HOP_NAMES[hop.hop] || hop.hop} ${hop.at}`;
}

async function askReach(submitted) {
  submitted.preventDefault();
  const value = (id) => document.getElementById(id).value.trim();
  const query = new URLSearchParams({ from: value("r-from"), to: value("r-to"), protocol: value("r-protocol") });
  if (value("r-port")) query.set("port", value("r-port"));
  const result = document.getElementById("reach-result");
  try {
    const answer = await api(`/network/can-reach?${query}`);
    result.className = answer.allowed ? "ok" : "error";
    result.dataset.allowed = String(answer.allowed);
    result.replaceChildren(
      element("p", { class: "verdict" }, element("strong", {}, answer.allowed ? "allowed" : "denied"), `: ${answer.reason}`),
      element("ul", {}, ...answer.hops.map((hop) => element("li", { class: hop.hop }, decisionText(hopName(hop), hop)))),
    );
    drawReach(answer).catch((error) => graphNote(`cannot draw the path: ${error.message}`)); // graph.js
  } catch (error) {
    result.className = "error";
    result.dataset.allowed = "";
    result.replaceChildren(element("p", {}, error.message));
  }
}

document.getElementById("net-filter").addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  const value = (id) => document.getElementById(id).value.trim();
  changeNetwork({ namespace: value("net-namespace"), q: value("net-q"), offset: {} });
});
const netSearch = debounced((q) => changeNetwork({ q, offset: {} }), 150);
document.getElementById("net-q").addEventListener("input", (typed) => netSearch(typed.target.value.trim()));
document.getElementById("reach-form").addEventListener("submit", askReach);
tabOpened.network = reloadNetwork;
setInterval(() => { if (currentTab() === "network") reloadNetwork(); }, 5000);
