// The network as a picture (Cytoscape.js, served from /libs/): from the same rows as the network tab's tables.
// One namespace: its network and subnet joined to the cluster's router, the pods' ports, each Service's load
// balancer with its listeners pointing to the member ports, floating IPs to their load balancers, and each
// NetworkPolicy's security group pointing to the ports that carry it. The whole cluster: every namespace's network
// with its ports counted, and the load balancers. More than FOLD ports fold into one node with their count.
// A can-reach answer is drawn on it: the path, and the hop that decides, green (allowed) or red (denied).
"use strict";

const FOLD = 40; // ports of a namespace drawn one by one; more fold into a count
const GRAPH_LIMIT = 1000; // rows of each listing the picture reads
let netGraph = null; // the Cytoscape instance (tests read it)
let graphKey = ""; // what the picture shows: redrawn only when that changes

function nodeOf(id, label, kind, extra = {}) {
  return { group: "nodes", data: { id, label, kind, ...extra } };
}

function edgeOf(source, target, kind) {
  return { group: "edges", data: { id: `${kind}:${source}->${target}`, source, target, kind } };
}

function portId(namespace, pod) {
  return `port:${namespace}/${pod}`;
}

// The elements of the picture, a pure function of the listing rows; ``keep``: ports drawn even when folding.
function networkElements(rows, keep = new Set(), whole = false) {
  const nodes = new Map();
  const edges = new Map();
  const add = (node) => { if (!nodes.has(node.data.id)) nodes.set(node.data.id, node); };
  const link = (edge) => { if (nodes.has(edge.data.source) && nodes.has(edge.data.target)) edges.set(edge.data.id, edge); };
  for (const n of rows.networks) {
    const router = `router:${n.cluster}`;
    add(nodeOf(router, `router\n(cluster ${n.cluster})`, "router"));
    add(nodeOf(`net:${n.cluster}/${n.namespace}`, `network ${n.namespace}`, "network"));
    add(nodeOf(`subnet:${n.cluster}/${n.namespace}`, `subnet ${n.cidr || "?"}\ngw ${n.gateway || "?"}`, "subnet"));
    link(edgeOf(`net:${n.cluster}/${n.namespace}`, `subnet:${n.cluster}/${n.namespace}`, "has"));
    link(edgeOf(`subnet:${n.cluster}/${n.namespace}`, router, "interface"));
    if (whole && n.ports) {
      add(nodeOf(`fold:${n.cluster}/${n.namespace}`, `${n.ports} ports`, "fold"));
      link(edgeOf(`fold:${n.cluster}/${n.namespace}`, `subnet:${n.cluster}/${n.namespace}`, "on"));
    }
  }
  const byAddress = new Map();
  const inNamespace = Map.groupBy ? Map.groupBy(rows.ports, (p) => `${p.cluster}/${p.namespace}`)
    : rows.ports.reduce((m, p) => m.set(`${p.cluster}/${p.namespace}`, [...(m.get(`${p.cluster}/${p.namespace}`) || []), p]), new Map());
  for (const [place, ports] of inNamespace) {
    const folding = ports.length > FOLD;
    const drawn = folding ? ports.filter((p) => keep.has(portId(p.namespace, p.pod))) : ports;
    for (const p of drawn) {
      add(nodeOf(portId(p.namespace, p.pod), `${p.pod}\n${p.address || "no address yet"}`, "port"));
      link(edgeOf(portId(p.namespace, p.pod), `subnet:${place}`, "on"));
      if (p.address) byAddress.set(`${place}|${p.address}`, portId(p.namespace, p.pod));
    }
    if (folding) {
      add(nodeOf(`fold:${place}`, `${ports.length - drawn.length} more ports`, "fold"));
      link(edgeOf(`fold:${place}`, `subnet:${place}`, "on"));
    }
  }
  for (const lb of rows.loadbalancers) {
    const id = `lb:${lb.namespace}/${lb.service}`;
    add(nodeOf(id, `load balancer ${lb.service}\n${lb.vip_address || ""}`, "lb"));
    link(edgeOf(id, `subnet:${lb.cluster}/${lb.namespace}`, "on"));
    if (lb.floating_ip) {
      add(nodeOf(`fip:${lb.floating_ip}`, `floating IP\n${lb.floating_ip}`, "fip"));
      link(edgeOf(`fip:${lb.floating_ip}`, id, "floats"));
    }
    for (const listener of lb.listeners) {
      const lid = `listener:${lb.namespace}/${lb.service}/${listener.port ?? listener.name}`;
      add(nodeOf(lid, "protocol" in listener ? `${listener.protocol}:${listener.port}` : listener.name, "listener"));
      link(edgeOf(id, lid, "listens"));
      for (const m of listener.pool?.members || []) {
        link(edgeOf(lid, byAddress.get(`${lb.cluster}/${lb.namespace}|${m.address}`) || `fold:${lb.cluster}/${lb.namespace}`, "member"));
      }
    }
  }
  for (const p of rows.policies) {
    const id = `policy:${p.namespace}/${p.policy}`;
    add(nodeOf(id, `policy ${p.policy}\n(${p.directions.join(", ")})`, "policy"));
    for (const pod of p.pods) link(edgeOf(id, portId(p.namespace, pod), "guards"));
  }
  return [...nodes.values(), ...edges.values()];
}

const GRAPH_STYLE = [
  { selector: "node", style: { label: "data(label)", "text-wrap": "wrap", "font-size": 10, "text-valign": "bottom", "text-margin-y": 3, width: 22, height: 22, "background-color": "#8c959f" } },
  { selector: 'node[kind = "router"]', style: { shape: "diamond", "background-color": "#1d2430", width: 34, height: 34 } },
  { selector: 'node[kind = "network"]', style: { shape: "round-rectangle", "background-color": "#0969da", width: 40 } },
  { selector: 'node[kind = "subnet"]', style: { shape: "round-rectangle", "background-color": "#54aeff", width: 40 } },
  { selector: 'node[kind = "port"]', style: { "background-color": "#2da44e" } },
  { selector: 'node[kind = "fold"]', style: { shape: "round-octagon", "background-color": "#d0d7de", width: 34, height: 34 } },
  { selector: 'node[kind = "lb"]', style: { shape: "hexagon", "background-color": "#8250df", width: 30, height: 30 } },
  { selector: 'node[kind = "listener"]', style: { shape: "tag", "background-color": "#c297ff" } },
  { selector: 'node[kind = "fip"]', style: { shape: "star", "background-color": "#bf8700", width: 28, height: 28 } },
  { selector: 'node[kind = "policy"]', style: { shape: "round-tag", "background-color": "#cf222e" } },
  { selector: 'node[kind = "outside"]', style: { shape: "ellipse", "background-color": "#6e7781" } },
  { selector: "edge", style: { width: 1.5, "line-color": "#afb8c1", "curve-style": "bezier", "target-arrow-shape": "none" } },
  { selector: 'edge[kind = "member"], edge[kind = "floats"], edge[kind = "listens"]', style: { "target-arrow-shape": "triangle", "target-arrow-color": "#8250df", "line-color": "#c297ff" } },
  { selector: 'edge[kind = "guards"]', style: { "line-style": "dashed", "line-color": "#ff8182", "target-arrow-shape": "tee", "target-arrow-color": "#ff8182" } },
  { selector: "edge.reach", style: { width: 4, "target-arrow-shape": "triangle", "curve-style": "bezier", "z-index": 10 } },
  { selector: "edge.reach.allowed", style: { "line-color": "#1a7f37", "target-arrow-color": "#1a7f37" } },
  { selector: "edge.reach.denied", style: { "line-color": "#cf222e", "target-arrow-color": "#cf222e" } },
  { selector: "node.decides", style: { "border-width": 5, "border-color": "data(verdict)" } },
];

function graphNote(text) {
  document.getElementById("net-graph").replaceChildren(element("p", { class: "hint lib-missing" }, text));
}

async function drawNetwork(keep = new Set()) {
  const box = document.getElementById("net-graph");
  if (typeof cytoscape === "undefined") {
    graphNote("The picture needs Cytoscape.js, which is not installed here (make web-libs): the tables below say the same.");
    return;
  }
  const query = new URLSearchParams({ limit: String(GRAPH_LIMIT) });
  if (net.namespace) query.set("namespace", net.namespace);
  const kinds = net.namespace ? ["networks", "ports", "loadbalancers", "policies"] : ["networks", "loadbalancers"];
  const pages = await Promise.all(kinds.map((what) => api(`/network/${what}?${query}`)));
  const rows = { networks: [], ports: [], loadbalancers: [], policies: [] };
  for (const page of pages) rows[page.kind] = page.items;
  const elements = networkElements(rows, keep, !net.namespace);
  const key = JSON.stringify(elements.map((e) => [e.data.id, e.data.label]));
  if (key === graphKey && netGraph) return;
  graphKey = key;
  if (netGraph) netGraph.destroy();
  box.replaceChildren();
  netGraph = cytoscape({ container: box, elements, style: GRAPH_STYLE, layout: { name: "cose", animate: false, nodeDimensionsIncludeLabels: true }, wheelSensitivity: 0.2 });
  box.dataset.nodes = String(netGraph.nodes().length);
  box.dataset.namespace = net.namespace;
}

// The node a hop of a can-reach answer is at ("ns/pod", "ns/pod:port", "ns/svc" and the Service's parts).
function hopNode(hop, answer) {
  const at = hop.at.replace(/:\d+$/, "");
  if (hop.hop === "egress" || hop.hop === "ingress") return portId(...at.split("/"));
  const service = answer.to.split("/");
  const lb = `lb:${service[0]}/${service[2]}`;
  if (hop.hop === "floating_ip") return netGraph.edges(`[kind = "floats"][target = "${lb}"]`).sources().id() || lb;
  if (hop.hop === "listener") return netGraph.$(`[kind = "listener"][id ^= "listener:${service[0]}/${service[2]}/"]`).first().id() || lb;
  return lb;
}

// The answer's path on the picture: the source, each hop's node, edges green or red, the deciding node ringed.
async function drawReach(answer) {
  if (typeof cytoscape === "undefined") return;
  const source = answer.from.includes("/") ? portId(...answer.from.split("/")) : `outside:${answer.from}`;
  const onPath = new Set([source, ...answer.hops.filter((h) => h.hop === "egress" || h.hop === "ingress").map((h) => hopNode(h, answer))]);
  await drawNetwork(onPath); // the ports on the path are drawn even in a folded namespace
  netGraph.remove(".reach, .outside");
  netGraph.nodes().removeClass("decides");
  if (!netGraph.getElementById(source).length) { // an outside address, or a pod of another namespace
    netGraph.add(nodeOf(source, answer.from.includes("/") ? answer.from : `outside\n${answer.from}`, "outside"))
      .addClass("outside");
  }
  const deciding = answer.allowed ? answer.hops[answer.hops.length - 1] : answer.hops.find((h) => !h.allowed);
  let previous = source;
  for (const hop of answer.hops) {
    const id = hopNode(hop, answer);
    if (!netGraph.getElementById(id).length) continue;
    if (id !== previous) {
      netGraph.add({ group: "edges", data: { id: `reach:${previous}->${id}`, source: previous, target: id, kind: "reach" } })
        .addClass(`reach ${hop.allowed ? "allowed" : "denied"}`);
      previous = id;
    }
    if (hop === deciding) {
      netGraph.getElementById(id).addClass("decides").data("verdict", hop.allowed ? "#1a7f37" : "#cf222e");
    }
  }
  const box = document.getElementById("net-graph");
  box.dataset.reach = `${answer.from}→${answer.to}`;
  box.dataset.allowed = String(answer.allowed);
}
