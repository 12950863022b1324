// The network tab: what the translation made (GET /api/v1/network/{networks,ports,loadbalancers,policies},
// the same rows as `kuberaven net get`), and can-reach with every hop that decides.
"use strict";

const NET_LIMIT = 1000;

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
    ["namespace", (r) => r.namespace, "name"],
    ["CIDR", (r) => r.cidr],
    ["gateway", (r) => r.gateway],
    ["network", (r) => r.network],
    ["subnet", (r) => r.subnet],
    ["security group", (r) => r.security_group],
    ["ports", (r) => String(r.ports)],
    ["cluster", (r) => r.cluster],
  ],
  ports: [
    ["namespace", (r) => r.namespace, "name"],
    ["pod", (r) => r.pod, "name"],
    ["address", (r) => r.address],
    ["MAC", (r) => r.mac],
    ["node", (r) => r.node],
    ["port", (r) => r.port],
    ["security groups", (r) => groupsCell(r.security_groups), "name"],
  ],
  loadbalancers: [
    ["namespace", (r) => r.namespace, "name"],
    ["Service", (r) => r.service, "name"],
    ["load balancer", (r) => r.load_balancer],
    ["VIP", (r) => r.vip_address],
    ["floating IP", (r) => r.floating_ip || (r.floating_error ? `none: ${r.floating_error}` : "")],
    ["listeners → pools → members", (r) => element("div", {}, ...r.listeners.map(listenerNode)), "name"],
  ],
  policies: [
    ["namespace", (r) => r.namespace, "name"],
    ["NetworkPolicy", (r) => r.policy, "name"],
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

async function reloadNetwork() {
  const namespace = document.getElementById("net-namespace").value.trim();
  const query = new URLSearchParams({ limit: String(NET_LIMIT) });
  if (namespace) query.set("namespace", namespace);
  const status = document.getElementById("net-status");
  try {
    const pages = await Promise.all(Object.keys(NET_VIEWS).map((what) => api(`/network/${what}?${query}`)));
    for (const page of pages) {
      const shownRows = page.items.length < page.total ? ` (the first ${page.items.length} of ${page.total})` : "";
      const view = page.items.length
        ? table(NET_VIEWS[page.kind], page.items, (r) => ({ "data-net": NET_KEYS[page.kind](r) }))
        : empty(`none${namespace ? ` in ${namespace}` : ""}`);
      document.getElementById(`net-${page.kind}`).replaceChildren(view, shownRows ? empty(shownRows) : "");
    }
    status.className = "hint";
    status.textContent = `as of ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    status.className = "error";
    status.textContent = `cannot load the network state: ${error.message}`;
  }
}

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
  } catch (error) {
    result.className = "error";
    result.dataset.allowed = "";
    result.replaceChildren(element("p", {}, error.message));
  }
}

document.getElementById("net-filter").addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  reloadNetwork();
});
document.getElementById("reach-form").addEventListener("submit", askReach);
tabOpened.network = reloadNetwork;
setInterval(() => { if (currentTab() === "network") reloadNetwork(); }, 5000);
