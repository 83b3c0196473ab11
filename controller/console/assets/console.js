// The Coxswain operator console. Plain JavaScript, no build step, no dependencies.
//
// It polls the read-only admin API of the process that served it and renders one of five views
// (fleet, gateways, routes, problems, a proxy's routing table) from hash routes. Every value from
// the API is inserted with textContent (see el): object names, messages and file names are user
// input and must never become markup.
"use strict";

const POLL_MS = 2000;

// el builds an element. attrs sets attributes (class, href, data-*); children are nodes or
// strings (strings become text nodes), arrays are flattened, null/false are skipped.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    e.setAttribute(k, String(v));
  }
  const add = (c) => {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(add); return; }
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  };
  children.forEach(add);
  return e;
}

// ---- fetching ---------------------------------------------------------------------------------

// A controller whose admin address is not loopback authenticates /api/v1 with a bearer token
// (TokenReview + SubjectAccessReview, docs/admin-api.md). The operator pastes one; it lives in
// this tab's sessionStorage only and goes to this origin only.
const TOKEN_KEY = "coxswain-console-token";

async function getJSON(path) {
  try {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const res = await fetch(path, { headers, cache: "no-store", credentials: "omit" });
    if (res.status === 401 || res.status === 403) state.denied = res.status;
    if (!res.ok) return { status: res.status, data: null };
    return { status: res.status, data: await res.json() };
  } catch (err) {
    return { status: 0, data: null, error: String(err) };
  }
}

const state = {
  loaded: false, reachable: true, updated: null,
  health: null, fleet: null, status: null, routing: null, problems: null,
  proxyTables: {}, // node -> {status, data}
  gatewayDetails: {}, // "namespace/name" -> /api/v1/routing/{namespace}/{name}
  denied: 0, // 401 or 403 from the API: ask for a token
};

async function refresh() {
  state.denied = 0;
  const [health, fleet, status, routing, problems] = await Promise.all([
    getJSON("/api/v1/health"), getJSON("/api/v1/fleet"), getJSON("/status"),
    getJSON("/api/v1/routing"), getJSON("/api/v1/problems"),
  ]);
  state.reachable = [health, fleet, status, routing, problems].some((r) => r.status !== 0);
  if (state.reachable) {
    state.health = health.data; state.fleet = fleet.data; state.status = status.data;
    state.routing = routing.data; state.problems = problems.data;
    state.loaded = true; state.updated = new Date();
    // The list has counts; the per-Gateway documents have the listeners, routes and rules. A
    // controller may have hundreds of Gateways: fetch them only for the views that show them.
    const shown = currentView();
    let wanted = [];
    if (shown.name === "gateway") wanted = list(state.routing, "gateways").filter((g) => nsName(g) === shown.arg);
    else if (["gateways", "routes"].includes(shown.name) || mode() === "standalone") wanted = list(state.routing, "gateways");
    const details = await Promise.all(wanted.map((g) =>
      getJSON("/api/v1/routing/" + encodeURIComponent(g.namespace) + "/" + encodeURIComponent(g.name))));
    state.gatewayDetails = {};
    for (const d of details) if (d.data) state.gatewayDetails[nsName(d.data)] = d.data;
  }
  const v = currentView();
  if (v.name === "proxy" && state.fleet) {
    state.proxyTables[v.arg] = await getJSON("/api/v1/fleet/proxies/" + encodeURIComponent(v.arg) + "/routes");
  }
  render();
}

async function loop() {
  await refresh();
  setTimeout(loop, POLL_MS);
}

// ---- the model: one shape whatever endpoint the data came from ---------------------------------

const NEGATIVE = new Set(["Conflicted", "OverlappingTLSConfig", "Degraded"]);

// tone of one condition: ok, bad, warn (Unknown / pending) or idle.
function tone(c) {
  const st = String(c.status);
  if (st === "Unknown") return "warn";
  const good = NEGATIVE.has(c.type) ? st === "False" : st === "True";
  if (good) return "ok";
  if (c.reason === "Pending") return "warn";
  return "bad";
}

function worst(conds) {
  const order = { bad: 3, warn: 2, ok: 1, idle: 0 };
  let t = "idle";
  for (const c of conds || []) if (order[tone(c)] > order[t]) t = tone(c);
  return t;
}

function nsName(o) {
  if (!o) return "";
  if (typeof o === "string") return o;
  return o.namespace ? o.namespace + "/" + o.name : (o.name || "");
}

// mode is "controller" when the process serves a fleet, else "standalone".
function mode() {
  if (state.fleet) return "controller";
  if (state.health && state.health.component === "controller") return "controller";
  return "standalone";
}

function list(x, key) {
  if (Array.isArray(x)) return x;
  if (x && Array.isArray(x[key])) return x[key];
  return [];
}

// gateways: [{name, namespace, source, addresses[], conditions[], listeners[{name, protocol, port, hostname, attachedRoutes, conditions}]}]
function gateways() {
  const fromRouting = list(state.routing, "gateways");
  if (fromRouting.length) {
    return fromRouting.map((summary) => {
      const g = state.gatewayDetails[nsName(summary)] || summary;
      const st = g.status || {};
      return {
        name: g.name || nsName(g.gateway), namespace: g.namespace || "", source: g.source || "",
        className: g.gatewayClass || g.gatewayClassName || "", detailed: Array.isArray(g.listeners),
        addresses: (g.addresses || st.addresses || []).map((a) => (typeof a === "string" ? a : a.value)),
        conditions: g.conditions || st.conditions || [],
        listeners: (Array.isArray(g.listeners) ? g.listeners : []).map((l) => ({
          name: l.name, protocol: l.protocol || "", port: l.port || "", hostname: l.hostname || "",
          kinds: kindsOf(l.supportedKinds || (l.status && l.status.supportedKinds)), binds: l.binds || [],
          attachedRoutes: l.attachedRoutes, conditions: l.conditions || (l.status && l.status.conditions) || [],
        })),
      };
    });
  }
  if (state.status && state.status.report) {
    return (state.status.report.gateways || []).map((g) => ({
      name: g.name, namespace: g.namespace || "", source: g.source || "", className: "",
      addresses: ((g.status && g.status.addresses) || []).map((a) => a.value),
      conditions: (g.status && g.status.conditions) || [],
      listeners: ((g.status && g.status.listeners) || []).map((l) => ({
        name: l.name, protocol: "", port: "", hostname: "", kinds: kindsOf(l.supportedKinds),
        attachedRoutes: l.attachedRoutes, conditions: l.conditions || [],
      })),
    }));
  }
  if (state.fleet) {
    // Without the routing API the controller still knows each Gateway's place at the gate.
    return (state.fleet.gateways || []).map((g) => {
      const [ns, name] = String(g.gateway).split("/");
      const c = g.programmed
        ? { type: "Programmed", status: "True", reason: "Programmed", message: "" }
        : { type: "Programmed", status: "False", reason: "Pending", message: g.awaiting || g.unbound || "" };
      return { name, namespace: ns, source: "", className: "", addresses: [], conditions: [c], listeners: [] };
    });
  }
  return [];
}

// routes: [{kind, name, namespace, source, hostnames[], parents[{parent, conditions}]}]
function routes() {
  const details = Object.values(state.gatewayDetails);
  if (details.length) return routesFromRouting(details);
  let rs = [];
  if (state.status && state.status.report) rs = state.status.report.routes || [];
  const seen = new Map();
  for (const r of rs) {
    const key = (r.kind || "") + " " + nsName(r);
    if (seen.has(key)) continue;
    const st = r.status || {};
    seen.set(key, {
      kind: r.kind || "Route", name: r.name, namespace: r.namespace || "", source: r.source || "",
      hostnames: r.hostnames || (r.spec && r.spec.hostnames) || [],
      parents: (r.parents || st.parents || []).map((p) => ({
        parent: parentLabel(p.parentRef || p.parent || p, r.namespace),
        conditions: p.conditions || [],
      })),
    });
  }
  return [...seen.values()];
}

// routesFromRouting merges each Gateway's view of its routes into one entry per route, with one
// parent per Gateway.
function routesFromRouting(details) {
  const byKey = new Map();
  for (const g of details) {
    for (const r of g.routes || []) {
      const key = r.kind + " " + nsName(r);
      if (!byKey.has(key)) {
        byKey.set(key, { kind: r.kind, name: r.name, namespace: r.namespace || "", source: r.source || "", hostnames: [], parents: [], rules: [] });
      }
      const e = byKey.get(key);
      const gw = (g.namespace && g.namespace !== r.namespace ? g.namespace + "/" : "") + g.name;
      e.parents.push({ parent: gw + (r.sections && r.sections.length ? "/" + r.sections.join(",") : ""), conditions: r.conditions || [] });
      for (const rule of r.rules || []) {
        if (rule.hostname && !e.hostnames.includes(rule.hostname)) e.hostnames.push(rule.hostname);
      }
    }
  }
  return [...byKey.values()].sort((a, b) => (a.kind + nsName(a)).localeCompare(b.kind + nsName(b)));
}

function kindsOf(ks) {
  return (ks || []).map((k) => (typeof k === "string" ? k : k.kind)).filter(Boolean);
}

function parentLabel(ref, routeNS) {
  if (typeof ref === "string") return ref;
  let s = (ref.namespace && ref.namespace !== routeNS ? ref.namespace + "/" : "") + (ref.name || "");
  if (ref.sectionName) s += "/" + ref.sectionName;
  if (ref.port) s += ":" + ref.port;
  return s;
}

// problems: [{object, field, reason, message, hint, source, severity}]
function problems() {
  if (state.problems) {
    return list(state.problems, "problems").map((p) => ({ ...p, object: objectLabel(p.object) }))
      .concat(list(state.problems.warnings).map((p) => ({ ...p, object: objectLabel(p.object), severity: "warning" })));
  }
  const out = [];
  const seen = new Set();
  const push = (p) => {
    const k = p.object + "|" + p.reason;
    if (seen.has(k)) return;
    seen.add(k);
    out.push(p);
  };
  const rep = state.status && state.status.report;
  if (state.status && state.status.applyError) {
    push({ object: "configuration", reason: "ApplyFailed", message: state.status.applyError, source: "" });
  }
  if (rep) {
    for (const e of rep.loadErrors || []) {
      push({ object: e.object || e.kind || "document", field: e.field || "", reason: e.reason || "LoadError",
        message: e.message || e.error || JSON.stringify(e), source: e.source || e.file || "" });
    }
    for (const p of rep.problems || []) push({ ...p });
  }
  // Every False condition is a problem too (the translator reports some only as status).
  for (const g of gateways()) {
    const obj = "Gateway " + nsName(g);
    for (const c of g.conditions) if (tone(c) === "bad") push({ object: obj, field: "status.conditions[" + c.type + "]", ...pick(c), source: g.source });
    for (const l of g.listeners) {
      for (const c of l.conditions) if (tone(c) === "bad") push({ object: obj + " listener " + l.name, field: "status.listeners[" + l.name + "]." + c.type, ...pick(c), source: g.source });
    }
  }
  for (const r of routes()) {
    for (const p of r.parents) {
      for (const c of p.conditions) {
        if (tone(c) === "bad") push({ object: r.kind + " " + nsName(r), field: "status.parents[" + p.parent + "]." + c.type, ...pick(c), source: r.source });
      }
    }
  }
  return out;
}

function pick(c) { return { reason: c.reason, message: c.message }; }

function objectLabel(o) {
  if (!o || typeof o === "string") return o;
  return [o.kind, nsName(o)].filter(Boolean).join(" ");
}

// Hints for reasons, used when the API gives none. They say what to change, not what happened.
const HINTS = {
  BackendNotFound: "Create the Service the backendRef names (or fix backendRefs[].name and port); until then its share of traffic is answered with 500.",
  RefNotPermitted: "A reference crosses namespaces: add a ReferenceGrant in the target namespace that allows it.",
  InvalidKind: "The referenced group/kind is not one Coxswain supports here; check the ref's group and kind.",
  NoMatchingParent: "parentRefs names a Gateway, sectionName or port that does not exist; check spelling and namespace.",
  NotAllowedByListeners: "The listener's allowedRoutes does not admit this route's namespace or kind.",
  NoMatchingListenerHostname: "None of the route's hostnames intersects the listener's hostname.",
  InvalidCertificateRef: "The certificateRefs Secret is missing, is not type kubernetes.io/tls, or holds no valid certificate and key.",
  PortUnavailable: "Another process holds the port, or the proxy may not bind it (ports below 1024 need NET_BIND_SERVICE).",
  UnsupportedProtocol: "The listener's protocol is not one this build serves; see `coxswain list-modules`.",
  ProtocolConflict: "Two listeners on one port disagree on protocol; give one of them another port.",
  HostnameConflict: "Two listeners on one port share a hostname; make the hostnames distinct.",
  Pending: "Waiting for the proxies to bind the listeners and acknowledge the snapshot; see Fleet.",
  UnsupportedValue: "A field holds a value Coxswain does not support; the message names it.",
  InvalidParameters: "The GatewayClass parametersRef points at something missing or invalid.",
  LoadError: "The file could not be read as Kubernetes objects; fix it and save, the change is picked up.",
};

// ---- rendering helpers ------------------------------------------------------------------------

function chip(c) {
  // "Conflicted: False" is the good state; say it as its reason (NoConflicts), not as the type.
  if (NEGATIVE.has(c.type) && tone(c) === "ok" && c.reason) return el("span", { class: "chip ok", title: c.message || "" }, c.reason);
  return el("span", { class: "chip " + tone(c), title: c.message || "" },
    c.type, " ", el("span", { class: "reason" }, c.reason && c.reason !== c.type ? "· " + c.reason : ""));
}

function conditionList(conds) {
  if (!conds || !conds.length) return el("span", { class: "chip idle" }, "no conditions");
  const bad = conds.filter((c) => tone(c) !== "ok" && c.message);
  return [conds.map(chip), bad.map((c) => el("div", { class: "msg" }, c.type + ": " + c.message))];
}

// WIDE_COLUMNS are left out below 900px (console.css), where they would crowd the rest.
const WIDE_COLUMNS = new Set(["Route kinds", "Build"]);

function table(headers, rows) {
  return el("div", { class: "scroll" }, el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: WIDE_COLUMNS.has(h) ? "wide" : null }, h)))),
    el("tbody", {}, rows)));
}

function empty(title, text) {
  return el("div", { class: "empty" }, el("strong", {}, title), text);
}

function card(label, value, small) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value" + (small ? " small" : "") }, value));
}

function ago(t) {
  if (!t) return "—";
  const d = new Date(t);
  if (isNaN(d)) return "—";
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 0) return "in " + human(-s);
  return human(s) + " ago";
}

function human(s) {
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d";
}

function short(v) { return v ? String(v).slice(0, 12) : "—"; }

// ---- views ------------------------------------------------------------------------------------

function viewFleet() {
  const out = [el("h1", {}, "Fleet")];
  const f = state.fleet;
  if (!f) {
    const st = state.status || {};
    out.push(el("p", { class: "sub" }, "Standalone mode: this process translates the files it was given and serves them with its own in-process proxy."));
    out.push(el("div", { class: "cards" },
      card("Mode", "standalone"),
      card("Snapshot", short(st.version), true),
      card("Applied", ago(st.time)),
      card("Problems", String(problems().length))));
    const gws = gateways();
    out.push(el("h2", {}, "Served by the in-process proxy"));
    out.push(gws.length
      ? el("div", { class: "panel" }, table(["Gateway", "Addresses", "Listeners", "Status"], gws.map((g) => el("tr", {},
        el("td", {}, el("a", { href: "#/gateways" }, nsName(g))),
        el("td", {}, g.addresses.length ? g.addresses.map((a) => el("span", { class: "tag" }, a)) : el("span", { class: "msg" }, "every local address")),
        el("td", {}, g.listeners.map((l) => el("div", {}, el("span", { class: "dot " + worst(l.conditions) }), l.name,
          l.attachedRoutes !== undefined ? el("span", { class: "msg" }, " · " + l.attachedRoutes + " routes") : null))),
        el("td", {}, g.conditions.filter((c) => c.type === "Programmed" || tone(c) !== "ok").map(chip))))))
      : empty("Nothing to serve", "No Gateway of Coxswain's GatewayClass was found in the files."));
    const unbound = st.unboundListeners || [];
    if (st.applyError) out.push(el("div", { class: "panel problem" }, el("div", { class: "body" }, el("div", { class: "what" }, "The last configuration was not applied"), el("div", { class: "msg" }, st.applyError))));
    if (unbound.length) {
      out.push(el("h2", {}, "Listeners that could not be bound"));
      out.push(el("div", { class: "panel" }, table(["Listener", "Address", "Reason"], unbound.map((u) =>
        el("tr", {}, el("td", {}, u.name || u.listener || ""), el("td", { class: "mono" }, u.address || ""), el("td", {}, u.reason || "", el("div", { class: "msg" }, u.message || "")))))));
    }
    return out;
  }
  const gws = f.gateways || [];
  const programmed = gws.filter((g) => g.programmed).length;
  out.push(el("p", { class: "sub" }, f.leader ? "This controller leads: it streams snapshots to the proxies below." : "This controller is a standby: the leader's console shows the fleet."));
  out.push(el("div", { class: "cards" },
    card("Proxies connected", String((f.proxies || []).length)),
    card("Snapshot", short(f.version) + (f.sequence ? " · #" + f.sequence : ""), true),
    card("Published", ago(f.publishedAt)),
    card("Gateways programmed", programmed + " / " + gws.length)));
  const proxies = f.proxies || [];
  out.push(el("h2", {}, "Proxies"));
  if (!proxies.length) {
    out.push(empty("No proxy is connected", f.leader ? "Proxies connect to the discovery address; see docs/discovery.md." : "Standby controllers have no proxies."));
  } else {
    out.push(el("div", { class: "panel" }, table(["Proxy", "Mode", "Snapshot", "Listeners", "Connected", "Build"],
      proxies.map((p) => proxyRow(p, f)))));
  }
  if (gws.length) {
    out.push(el("h2", {}, "Gateways at the gate"));
    out.push(el("div", { class: "panel" }, table(["Gateway", "Generation", "Programmed", "Waiting for"], gws.map((g) =>
      el("tr", {}, el("td", {}, g.gateway), el("td", {}, String(g.generation)),
        el("td", {}, el("span", { class: "chip " + (g.programmed ? "ok" : "warn") }, g.programmed ? "Programmed" : "Pending")),
        el("td", {}, g.awaiting || "", g.unbound ? el("div", { class: "msg" }, g.unbound) : null))))));
  }
  return out;
}

function proxyRow(p, f) {
  let snap;
  if (p.lastRejection) {
    snap = [el("span", { class: "chip bad" }, "rejected " + short(p.lastRejection.version)), el("div", { class: "msg" }, p.lastRejection.error)];
  } else if (p.ackedVersion && p.ackedVersion === f.version) {
    snap = el("span", { class: "chip ok", title: p.ackedVersion }, "acked " + short(p.ackedVersion));
  } else if (p.inFlightVersion) {
    snap = el("span", { class: "chip warn" }, "applying " + short(p.inFlightVersion));
  } else {
    snap = el("span", { class: "chip warn" }, p.ackedVersion ? "behind: " + short(p.ackedVersion) : "nothing acked yet");
  }
  const binds = [
    (p.boundListeners || []).map((b) => el("div", {}, el("span", { class: "dot ok" }), el("span", { class: "mono nowrap" }, b.address), " ", el("span", { class: "msg" }, b.name))),
    (p.failedListeners || []).map((b) => el("div", { title: b.message }, el("span", { class: "dot bad" }), el("span", { class: "mono" }, b.address), " ", el("span", { class: "chip bad" }, b.reason), el("div", { class: "msg" }, b.message))),
  ];
  if (!(p.boundListeners || []).length && !(p.failedListeners || []).length) binds.push(el("span", { class: "msg" }, "none"));
  const missing = (p.missingModules || []).length ? el("div", { class: "msg" }, "missing modules: " + p.missingModules.join(", ")) : null;
  return el("tr", {},
    el("td", { title: p.spiffeID }, el("a", { href: "#/proxy/" + encodeURIComponent(p.node) }, p.node), el("div", { class: "msg wide" }, p.spiffeID)),
    el("td", { class: "nowrap" }, p.mode, p.gateway ? el("div", { class: "msg" }, p.gateway) : null),
    el("td", {}, snap, missing),
    el("td", {}, binds),
    el("td", { class: "nowrap" }, ago(p.connectedAt), el("div", { class: "msg" }, "cert until " + (p.certificateNotAfter ? new Date(p.certificateNotAfter).toLocaleString() : "—"))),
    el("td", { class: "wide" }, p.build || "—", el("div", { class: "msg" }, p.modules + " modules")));
}

function viewGateways() {
  const out = [el("h1", {}, "Gateways")];
  const gws = gateways();
  out.push(el("p", { class: "sub" }, "Every Gateway of Coxswain's GatewayClasses, with its listeners and the addresses it is reachable on."));
  if (!gws.length) {
    out.push(empty("No Gateways", noRoutingReason() || "Create a Gateway whose gatewayClassName names a GatewayClass with controllerName coxswain-labs.dev/gateway-controller."));
    return out;
  }
  for (const g of gws) {
    out.push(el("section", { class: "panel", "data-gateway": nsName(g) },
      el("header", {}, el("span", { class: "dot " + worst(g.conditions) }),
        el("h3", {}, g.detailed ? el("a", { href: "#/gateway/" + encodeURIComponent(g.namespace) + "/" + encodeURIComponent(g.name) }, nsName(g)) : nsName(g)),
        el("span", {}, g.conditions.map(chip)),
        g.source ? el("span", { class: "src" }, g.source) : null),
      el("div", { class: "body" },
        el("div", {}, el("span", { class: "msg" }, "Addresses: "), g.addresses.length ? g.addresses.map((a) => el("span", { class: "tag" }, a)) : el("span", { class: "msg" }, "none yet")),
        g.conditions.filter((c) => tone(c) !== "ok" && c.message).map((c) => el("div", { class: "msg" }, c.type + ": " + c.message))),
      g.listeners.length ? listenerTable(g.listeners) : el("div", { class: "body msg" }, "No listener detail from this endpoint.")));
  }
  return out;
}

// listenerTable leaves out the columns no listener has data for (standalone /status carries
// status, not spec).
function listenerTable(ls) {
  const spec = ls.some((l) => l.protocol || l.port || l.hostname);
  const kinds = ls.some((l) => l.kinds && l.kinds.length);
  const binds = ls.some((l) => l.binds && l.binds.length);
  const headers = ["Listener", spec && "Protocol / port", spec && "Hostname", kinds && "Route kinds", binds && "Proxy sockets", "Routes", "Conditions"].filter(Boolean);
  return table(headers, ls.map((l) => el("tr", {},
          el("td", {}, el("span", { class: "dot " + worst(l.conditions) }), l.name),
          spec ? el("td", { class: "nowrap" }, [l.protocol, l.port].filter(Boolean).join(" / ") || "—") : null,
          spec ? el("td", {}, l.hostname || "*") : null,
          kinds ? el("td", { class: "wide" }, l.kinds.map((k) => el("span", { class: "tag" }, k))) : null,
          binds ? el("td", {}, l.binds.length ? l.binds.map((b) => el("div", { class: "mono nowrap" }, b)) : el("span", { class: "msg" }, "not bound")) : null,
          el("td", {}, l.attachedRoutes === undefined ? "—" : String(l.attachedRoutes)),
          el("td", {}, conditionList(l.conditions)))));
}

// noRoutingReason says why a controller shows no routing, when the reason is not "there is none".
function noRoutingReason() {
  if (state.routing || mode() !== "controller") return "";
  if (state.fleet && !state.fleet.leader) return "This replica is a standby: it does not translate. Open the leader's console.";
  return "This controller has not translated yet (its caches may still be syncing), or it does not serve /api/v1/routing.";
}

function viewRoutes() {
  const out = [el("h1", {}, "Routes")];
  const rs = routes();
  out.push(el("p", { class: "sub" }, "Routes of every kind, with their status per parent Gateway."));
  if (!rs.length) {
    out.push(empty("No routes", noRoutingReason() || "Attach an HTTPRoute, GRPCRoute, TLSRoute, TCPRoute or UDPRoute to a Gateway."));
    return out;
  }
  out.push(el("div", { class: "panel" }, table(["Route", "Kind", "Hostnames", "Parent", "Conditions"], rs.flatMap((r) => {
    const parents = r.parents.length ? r.parents : [{ parent: "—", conditions: [] }];
    return parents.map((p, i) => el("tr", { "data-route": r.kind + " " + nsName(r) },
      el("td", {}, i === 0 ? [el("span", { class: "dot " + worst(r.parents.flatMap((x) => x.conditions)) }), nsName(r), r.source ? el("div", { class: "msg" }, r.source) : null] : ""),
      el("td", {}, i === 0 ? r.kind : ""),
      el("td", {}, i === 0 ? (r.hostnames.length ? r.hostnames.map((h) => el("span", { class: "tag" }, h)) : el("span", { class: "msg" }, "any")) : ""),
      el("td", {}, p.parent),
      el("td", {}, conditionList(p.conditions))));
  }))));
  return out;
}

function viewProblems() {
  const out = [el("h1", {}, "Problems")];
  const ps = problems();
  out.push(el("p", { class: "sub" }, "What is broken, on which object and field, and what to do about it. Everything else keeps serving."));
  if (!ps.length) {
    out.push(el("div", { class: "empty allgood" }, el("strong", {}, "Nothing is broken"), "Every object Coxswain owns is accepted and resolved."));
    return out;
  }
  for (const p of ps) {
    const hint = p.hint || HINTS[p.reason] || "";
    out.push(el("section", { class: "panel problem" + (p.severity === "warning" ? " warning" : ""), "data-problem": p.object },
      el("div", { class: "body" },
        el("div", {}, el("span", { class: "chip " + (p.severity === "warning" ? "warn" : "bad") }, p.reason || "Problem"), el("span", { class: "what" }, p.object)),
        p.field ? el("div", { class: "field" }, p.field) : null,
        el("div", {}, p.message),
        p.source ? el("div", { class: "msg" }, "from " + p.source) : null,
        hint ? el("div", { class: "hint" }, hint) : null)));
  }
  return out;
}

// matchSummary says a route.http / route.grpc match the way an operator writes it
// ("PathPrefix /app · header x-canary = true"); other kinds show their module config.
function matchSummary(m) {
  if (!m) return "";
  let cfg = m.config;
  if (cfg === undefined && m.json) {
    try { cfg = JSON.parse(atob(m.json)); } catch (e) { cfg = undefined; }
  }
  if (!cfg || typeof cfg !== "object") return decodeModule(m);
  const parts = [];
  if (cfg.path) parts.push((cfg.path.type || "PathPrefix") + " " + cfg.path.value);
  if (cfg.method && typeof cfg.method === "string") parts.push(cfg.method);
  if (cfg.method && typeof cfg.method === "object") parts.push([cfg.method.service, cfg.method.method].filter(Boolean).join("/") || "any method");
  for (const h of cfg.headers || []) parts.push("header " + h.name + (h.type === "RegularExpression" ? " ~ " : " = ") + h.value);
  for (const q of cfg.queryParams || cfg.query_params || []) parts.push("query " + q.name + (q.type === "RegularExpression" ? " ~ " : " = ") + q.value);
  const known = new Set(["path", "method", "headers", "queryParams", "query_params"]);
  const rest = Object.keys(cfg).filter((k) => !known.has(k));
  if (!parts.length || rest.length) return decodeModule(m);
  return parts.join(" · ");
}

// ruleLabel drops the route's own kind/namespace/name from an IR route name, which the panel
// already says: "HTTPRoute/default/app/rule/1/match/0" -> "rule 1 · match 0".
function ruleLabel(name) {
  const m = /\/rule\/([^/]+)\/match\/([^/]+)$/.exec(name || "");
  return m ? "rule " + m[1] + " · match " + m[2] : name;
}

function decodeModule(m) {
  if (!m) return "";
  let cfg = "";
  if (m.config !== undefined) {
    cfg = JSON.stringify(m.config);
  } else if (m.json) {
    try { cfg = JSON.stringify(JSON.parse(atob(m.json))); } catch (e) { cfg = ""; }
  }
  return cfg && cfg !== "{}" ? m.id + " " + cfg : m.id;
}

function viewProxy(node) {
  const out = [el("a", { class: "back", href: "#/fleet" }, "← Fleet"), el("h1", {}, "Routing table of " + node)];
  out.push(el("p", { class: "sub" }, "The snapshot this controller last sent to the proxy, as it compiled it (private keys removed)."));
  const r = state.proxyTables[node];
  if (!r) return out.concat(el("p", { class: "empty" }, "Loading…"));
  if (!r.data) return out.concat(empty("No routing table", r.status === 404 ? "No proxy of that name is connected, or it has been sent nothing yet." : "The API answered " + r.status + "."));
  const snap = r.data;
  out.push(el("div", { class: "cards" }, card("Snapshot", short(snap.version), true),
    card("Listeners", String((snap.listeners || []).length)), card("Clusters", String((snap.clusters || []).length))));
  for (const l of snap.listeners || []) {
    const rows = [];
    for (const s of l.servers || []) {
      for (const vh of s.virtual_hosts || []) {
        for (const rt of vh.routes || []) {
          rows.push(el("tr", {},
            el("td", {}, vh.hostname || s.hostname || "*", s.tls ? el("div", { class: "msg" }, "TLS " + (s.tls.mode || "TERMINATE")) : null),
            el("td", { class: "mono" }, rt.name),
            el("td", { class: "mono", title: decodeModule(rt.match) }, matchSummary(rt.match)),
            el("td", {}, filterTags(rt.filters)),
            el("td", {}, backendList(rt.backends))));
        }
      }
    }
    out.push(el("section", { class: "panel" },
      el("header", {}, el("h3", {}, l.name), el("span", { class: "tag" }, l.protocol || ""), el("span", { class: "src mono" }, l.address)),
      rows.length ? table(["Host", "Route", "Match", "Filters", "Backends"], rows) : el("div", { class: "body msg" }, "No routes on this listener.")));
  }
  const clusters = snap.clusters || [];
  if (clusters.length) {
    out.push(el("h2", {}, "Clusters"));
    out.push(el("div", { class: "panel" }, table(["Cluster", "Protocol", "Balancer", "Endpoints"], clusters.map((c) => el("tr", {},
      el("td", { class: "mono" }, c.name), el("td", {}, c.protocol || "HTTP1"), el("td", {}, c.balancer ? c.balancer.id : "lb.round_robin"),
      el("td", {}, (c.endpoints || []).length ? c.endpoints.map((e) => el("span", { class: "tag" }, e.address + ":" + e.port)) : el("span", { class: "chip bad" }, "no endpoints")))))));
  }
  return out;
}

// viewGateway is one Gateway's compiled routing: per route, its rules in the proxy's precedence
// order, and the clusters they send to.
function viewGateway(key) {
  const out = [el("a", { class: "back", href: "#/gateways" }, "← Gateways"), el("h1", {}, "Routing of Gateway " + key)];
  out.push(el("p", { class: "sub" }, "What the latest translation compiled for this Gateway: each route's rules in the order the proxy matches them."));
  const g = state.gatewayDetails[key];
  if (!g) return out.concat(empty("No such Gateway", "It is not one of Coxswain's, or it is not in the latest translation."));
  const gw = gateways().find((x) => nsName(x) === key);
  if (gw && gw.listeners.length) out.push(el("section", { class: "panel" }, el("header", {}, el("h3", {}, "Listeners")), listenerTable(gw.listeners)));
  const rs = g.routes || [];
  if (!rs.length) out.push(empty("No routes", "No route names this Gateway as a parent."));
  for (const r of rs) {
    const rows = (r.rules || []).map((rule) => el("tr", {},
      el("td", {}, rule.hostname || "*", el("div", { class: "msg nowrap" }, rule.listener || "")),
      el("td", { class: "nowrap", title: rule.name }, ruleLabel(rule.name)),
      el("td", { class: "mono", title: decodeModule(rule.match) }, matchSummary(rule.match)),
      el("td", {}, filterTags(rule.filters)),
      el("td", {}, backendList(rule.backends))));
    out.push(el("section", { class: "panel", "data-route": r.kind + " " + nsName(r) },
      el("header", {}, el("span", { class: "dot " + worst(r.conditions) }), el("h3", {}, r.kind + " " + nsName(r)), el("span", {}, (r.conditions || []).map(chip))),
      rows.length ? table(["Host", "Rule", "Match", "Filters", "Backends"], rows)
        : el("div", { class: "body msg" }, "No compiled rules: the route is not accepted on this Gateway (see its conditions)."),
      (r.clusters || []).length ? el("div", { class: "body" }, r.clusters.map((c) => el("div", {},
        el("span", { class: "mono" }, c.name), " ", el("span", { class: "msg" }, (c.balancer ? c.balancer.id : "lb.round_robin") + " · "),
        (c.endpoints || []).length ? c.endpoints.map((e) => el("span", { class: "tag" }, e.address + ":" + e.port)) : el("span", { class: "chip bad" }, "no endpoints")))) : null));
  }
  return out;
}

function filterTags(fs) {
  // The namespace is the column's; the full ID and config are in the tooltip.
  return (fs || []).length ? fs.map((f) => el("span", { class: "tag nowrap", title: decodeModule(f) }, String(f.id).replace(/^filter\.http\./, ""))) : el("span", { class: "msg" }, "none");
}

function backendList(bs) {
  if (!(bs || []).length) return el("span", { class: "msg" }, "none");
  return bs.map((b) => b.cluster && !b.error
    ? el("div", {}, el("span", { class: "mono" }, b.cluster), " ", el("span", { class: "msg" }, "weight " + (b.weight || 0)))
    : el("div", {}, el("span", { class: "chip bad" }, "unresolved"), el("span", { class: "msg" }, b.error || "")));
}

// signIn asks for a bearer token when the API refuses this browser.
function signIn() {
  const input = el("input", { type: "password", id: "token", autocomplete: "off", placeholder: "paste a token", "aria-label": "Bearer token" });
  const form = el("form", { class: "filter" }, input, " ", el("button", { type: "submit" }, "Use token"),
    sessionStorage.getItem(TOKEN_KEY) ? [" ", el("button", { type: "button", id: "forget" }, "Forget token")] : null);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    input.value = "";
    input.blur();
    refresh();
  });
  const forget = form.querySelector("#forget");
  if (forget) forget.addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); refresh(); });
  return el("section", { class: "panel problem" }, el("div", { class: "body" },
    el("div", { class: "what" }, state.denied === 403 ? "This token may not read the admin API" : "The admin API needs a token"),
    el("div", { class: "msg" }, "This controller checks bearer tokens with a TokenReview and a SubjectAccessReview (get on the non-resource URL /coxswain/api/v1/*, e.g. the chart's coxswain-admin-reader role). " +
      "Paste one, e.g. from `kubectl create token <service-account>`; it is kept in this tab only."),
    form));
}

// ---- shell ------------------------------------------------------------------------------------

function currentView() {
  const h = location.hash.replace(/^#\/?/, "");
  const [name, ...rest] = h.split("/");
  if (name === "proxy" && rest.length) return { name, arg: decodeURIComponent(rest.join("/")) };
  if (name === "gateway" && rest.length === 2) return { name, arg: rest.map(decodeURIComponent).join("/") };
  if (["fleet", "gateways", "routes", "problems"].includes(name)) return { name };
  return { name: "default" };
}

function render() {
  let v = currentView();
  if (v.name === "default") v = { name: mode() === "controller" ? "fleet" : "gateways" };
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === v.name || (v.name === "proxy" && a.dataset.view === "fleet") ||
      (v.name === "gateway" && a.dataset.view === "gateways"));
  }
  const n = state.loaded ? problems().filter((p) => p.severity !== "warning").length : 0;
  const count = document.getElementById("problem-count");
  count.hidden = !state.loaded || Boolean(state.denied);
  count.textContent = String(n);
  count.classList.toggle("zero", n === 0);

  const meta = document.getElementById("meta");
  const h = state.health || {};
  meta.replaceChildren(...[
    el("span", { class: "pill" }, state.denied ? "signed out" : mode()),
    h.version ? el("span", {}, h.version) : null,
    typeof h.leader === "boolean" ? el("span", {}, h.leader ? "leader" : "standby") : null,
    el("span", { class: "live" + (state.reachable ? "" : " stale") }, state.updated ? "updated " + state.updated.toLocaleTimeString() : "connecting"),
  ].filter(Boolean));
  const banner = document.getElementById("banner");
  banner.hidden = state.reachable;
  banner.textContent = state.reachable ? "" : "Lost contact with the admin API; showing what was last seen. Retrying every " + POLL_MS / 1000 + "s.";

  if (!state.loaded) return;
  const views = { fleet: viewFleet, gateways: viewGateways, routes: viewRoutes, problems: viewProblems };
  // Refused: nothing the API said can be shown (not even the mode), only the way in.
  const body = state.denied ? [signIn()]
    : v.name === "proxy" ? viewProxy(v.arg) : v.name === "gateway" ? viewGateway(v.arg) : views[v.name]();
  const main = document.getElementById("main");
  // Re-rendering while the operator types a token would wipe it.
  const typing = document.getElementById("token");
  if (typing && typing === document.activeElement && typing.value) return;
  main.replaceChildren(...[].concat(body).flat(Infinity).filter(Boolean));
  document.body.dataset.view = v.name;
  document.body.dataset.ready = "true";
}

window.addEventListener("hashchange", () => { refresh(); });
document.addEventListener("DOMContentLoaded", loop);
