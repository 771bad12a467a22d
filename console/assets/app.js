// Isobar console: every figure on these pages comes from the admin REST
// API of the broker that served them, called with the token the user
// typed in (kept in sessionStorage, so only for this tab). The console
// has no data and no privileges of its own.
"use strict";

const TOKEN_KEY = "isobar.console.token";
// Only superusers may list tenants; a tenant's admin names theirs.
const TENANTS_KEY = "isobar.console.tenants";
const V2 = "/admin/v2";

// ---- small DOM helpers ----

// el builds an element: el("td", {class: "num"}, "text", child, ...).
// Text is always set as text, never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e && k !== "list") e[k] = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(headers, rows, attrs) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function num(v, digits) {
  if (v === undefined || v === null || Number.isNaN(v)) return "–";
  return Number(v).toLocaleString("en-US", {maximumFractionDigits: digits ?? 0});
}

function bytes(v) {
  if (!v) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return num(v, i ? 1 : 0) + " " + units[i];
}

function status(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text || "";
  s.className = isError ? "error" : "muted";
}

function errorBox(err) {
  return el("p", {class: "error"}, describe(err));
}

// ---- the admin API ----

class APIError extends Error {
  constructor(status, reason, path) {
    super(reason);
    this.status = status;
    this.path = path;
  }
}

function describe(err) {
  if (!(err instanceof APIError)) return String(err.message || err);
  switch (err.status) {
    case 401: return "Not signed in: this API needs a token (" + err.message + ").";
    case 403: return "Your token may not see this (" + err.path + ": " + err.message + ").";
    default: return err.path + ": HTTP " + err.status + ": " + err.message;
  }
}

async function api(method, path, body) {
  const headers = {Accept: "application/json"};
  const tok = sessionStorage.getItem(TOKEN_KEY);
  if (tok) headers.Authorization = "Bearer " + tok;
  const init = {method, headers, cache: "no-store"};
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  if (!r.ok) {
    let reason = text.trim() || r.statusText;
    try { reason = JSON.parse(text).reason || reason; } catch (_) { /* not JSON */ }
    throw new APIError(r.status, reason, path);
  }
  if (r.status === 204 || !text) return null;
  return JSON.parse(text);
}

// settle runs f and returns {value} or {error}, so that one refused call
// leaves the rest of a page standing.
async function settle(f) {
  try { return {value: await f()}; } catch (error) { return {error}; }
}

const enc = encodeURIComponent;
const nsPath = (ns) => ns.split("/").map(enc).join("/");

async function loadClusters() {
  const names = await api("GET", V2 + "/clusters");
  const out = [];
  for (const name of names.sort()) {
    const d = await settle(() => api("GET", V2 + "/clusters/" + enc(name)));
    out.push({name, data: d.value || {}, error: d.error});
  }
  return out;
}

function sameOrigin(url) {
  try { return new URL(url).origin === location.origin; } catch (_) { return false; }
}

// localRegion names the cluster whose web service URL is this page's
// origin; failing that, what the topics' replication sections imply.
function localRegion(clusters, topics) {
  for (const c of clusters) {
    if (sameOrigin(c.data.serviceUrl) || sameOrigin(c.data.serviceUrlTls)) return c.name;
  }
  for (const t of topics || []) {
    const remotes = Object.keys(t.stats?.replication || {});
    const rest = (t.clusters || []).filter((c) => !remotes.includes(c));
    if (remotes.length && rest.length === 1) return rest[0];
  }
  return "";
}

async function loadNamespaces() {
  let tenants;
  try {
    tenants = await api("GET", V2 + "/tenants");
  } catch (err) {
    const mine = (sessionStorage.getItem(TENANTS_KEY) || "").split(",").map((x) => x.trim()).filter(Boolean);
    if (!(err instanceof APIError) || err.status !== 403) throw err;
    if (!mine.length) throw new Error(describe(err) + " Name your tenants in the Tenants field to see their namespaces.");
    tenants = mine;
  }
  const out = [];
  for (const tenant of tenants.sort()) {
    const list = await settle(() => api("GET", V2 + "/namespaces/" + enc(tenant)));
    if (list.error) { out.push({name: tenant + "/*", error: list.error}); continue; }
    for (const ns of list.value.sort()) {
      const [primary, repl] = await Promise.all([
        settle(() => api("GET", V2 + "/namespaces/" + nsPath(ns) + "/primary")),
        settle(() => api("GET", V2 + "/namespaces/" + nsPath(ns) + "/replication")),
      ]);
      out.push({name: ns, failover: primary.value || {}, clusters: repl.value || [],
        error: primary.error || repl.error});
    }
  }
  return out;
}

// loadTopics reads the stats of every persistent topic of the namespaces
// (partitions are topics of their own here).
async function loadTopics(namespaces) {
  const out = [];
  for (const ns of namespaces) {
    if (ns.error) continue;
    const list = await settle(() => api("GET", V2 + "/persistent/" + nsPath(ns.name)));
    if (list.error) { out.push({ns: ns.name, name: ns.name + "/*", error: list.error}); continue; }
    for (const full of list.value.sort()) {
      const short = full.replace(/^persistent:\/\//, "");
      const st = await settle(() => api("GET", V2 + "/persistent/" + short.split("/").map(enc).join("/") + "/stats"));
      out.push({ns: ns.name, name: full, short: short.split("/").slice(2).join("/"),
        clusters: ns.clusters, stats: st.value, error: st.error});
    }
  }
  return out;
}

function isInternal(sub) { return sub.startsWith("isobar."); }

function backlog(stats) {
  let n = 0;
  for (const [name, s] of Object.entries(stats?.subscriptions || {})) {
    if (!isInternal(name)) n += s.msgBacklog || 0;
  }
  return n;
}

// ---- pages ----

const pages = {regions: regionsPage, namespaces: namespacesPage, topics: topicsPage, drills: drillsPage};
let current = "";
let generation = 0;

async function show(name) {
  if (!pages[name]) name = "regions";
  current = name;
  const gen = ++generation;
  for (const p of Object.keys(pages)) {
    document.getElementById("nav-" + p).classList.toggle("active", p === name);
  }
  delete document.body.dataset.loaded;
  status("Loading…");
  const page = document.getElementById("page");
  let content;
  try {
    content = await pages[name]();
  } catch (err) {
    content = errorBox(err);
  }
  if (gen !== generation) return; // a newer page was asked for meanwhile
  page.replaceChildren(content);
  status(sessionStorage.getItem(TOKEN_KEY) ? "" : "No token set: only what the server shows without one.");
  document.body.dataset.loaded = name;
}

function refreshButton() {
  return el("button", {type: "button", id: "refresh", onclick: () => show(current)}, "Refresh");
}

async function regionsPage() {
  const clusters = await loadClusters();
  const nss = await settle(loadNamespaces);
  const topics = nss.value ? await loadTopics(nss.value.filter((n) => !n.error && n.clusters.length > 1)) : [];
  const here = localRegion(clusters, topics);
  const cards = clusters.map((c) => el("div", {class: "card", "data-region": c.name},
    el("h3", {}, c.name, c.name === here ? el("span", {class: "muted"}, " (this console)") : null),
    c.error ? errorBox(c.error) : el("dl", {},
      el("dt", {}, "web service"), el("dd", {}, c.data.serviceUrl || c.data.serviceUrlTls || "–"),
      el("dt", {}, "broker service"), el("dd", {}, c.data.brokerServiceUrl || c.data.brokerServiceUrlTls || "–"),
      c.data.natsUrl ? [el("dt", {}, "NATS"), el("dd", {}, c.data.natsUrl)] : null,
      c.name !== here && (c.data.serviceUrl || c.data.serviceUrlTls)
        ? [el("dt", {}, "console"), el("dd", {}, el("a", {href: (c.data.serviceUrlTls || c.data.serviceUrl).replace(/\/$/, "") + "/console/"}, "open"))]
        : null)));

  // Links: this region's replication to each other region, summed over
  // the replicated topics it can see.
  const links = new Map();
  for (const t of topics) {
    for (const [remote, r] of Object.entries(t.stats?.replication || {})) {
      const l = links.get(remote) || {topics: 0, connected: 0, stalled: 0, backlog: 0, delay: 0, rateOut: 0, rateIn: 0};
      l.topics++;
      if (r.connected) l.connected++;
      if (r.stalled) l.stalled++;
      l.backlog += r.replicationBacklog || 0;
      l.delay = Math.max(l.delay, r.replicationDelayInSeconds || 0);
      l.rateOut += r.msgRateOut || 0;
      l.rateIn += r.msgRateIn || 0;
      links.set(remote, l);
    }
  }
  const rows = [...links.entries()].sort().map(([remote, l]) => {
    let state = el("span", {class: "ok"}, "up");
    if (l.stalled) state = el("span", {class: "down"}, "stalled");
    else if (l.connected < l.topics) state = el("span", {class: "warn"}, "down (" + (l.topics - l.connected) + " of " + l.topics + " topics)");
    return el("tr", {"data-link": (here || "?") + "-" + remote},
      el("td", {}, (here || "this region") + " → " + remote), el("td", {}, state),
      el("td", {class: "num"}, num(l.topics)), el("td", {class: "num"}, num(l.backlog)),
      el("td", {class: "num"}, num(l.delay) + " s"),
      el("td", {class: "num"}, num(l.rateOut, 1)), el("td", {class: "num"}, num(l.rateIn, 1)));
  });
  return el("div", {},
    el("h1", {}, "Regions ", refreshButton()),
    el("div", {class: "cards"}, cards),
    el("h2", {}, "Links"),
    nss.error ? errorBox(nss.error) : rows.length
      ? table(["link", "WAN state", "topics", "replication backlog (msgs)", "lag (oldest unreplicated)", "msg/s out", "msg/s in"], rows, {id: "links"})
      : el("p", {class: "muted", id: "links"}, "No replicated topics visible to your token yet: a link shows once a topic of a replicated namespace has been used."),
    el("p", {class: "muted"}, "Links are as the region serving this console sees them; open another region's console for its side."));
}

async function namespacesPage() {
  const [nss, clusters] = await Promise.all([loadNamespaces(), settle(() => api("GET", V2 + "/clusters"))]);
  const rows = nss.map((ns) => {
    if (ns.error) {
      return el("tr", {"data-ns": ns.name}, el("td", {}, ns.name), el("td", {colspan: 5}, errorBox(ns.error)));
    }
    const f = ns.failover;
    const candidates = ns.clusters.filter((c) => f.mode !== "active-standby" || c !== f.primary);
    const pick = el("select", {class: "target", "aria-label": "new primary of " + ns.name},
      candidates.map((c) => el("option", {value: c}, c)),
      f.mode === "active-standby" ? el("option", {value: ""}, "active-active (no primary)") : null);
    const action = ns.clusters.length < 2
      ? el("span", {class: "muted"}, "one region")
      : el("span", {}, pick, " ", el("button", {type: "button", class: "set-primary",
        onclick: () => confirmFailover(ns, pick.value)}, "Set primary…"));
    return el("tr", {"data-ns": ns.name},
      el("td", {}, ns.name),
      el("td", {class: "mode"}, f.mode || "–"),
      el("td", {class: "primary"}, f.primary || "–"),
      el("td", {class: "epoch num"}, num(f.epoch || 0)),
      el("td", {class: "clusters"}, ns.clusters.join(", ")),
      el("td", {}, action));
  });
  return el("div", {},
    el("h1", {}, "Namespaces ", refreshButton()),
    table(["namespace", "mode", "primary", "epoch", "replication clusters", "planned failover"], rows, {id: "namespaces"}),
    clusters.error ? errorBox(clusters.error) : null,
    el("p", {class: "muted"}, "A planned failover makes the chosen region the namespace's primary: the old primary stops taking writes and drains, the epoch goes up by one, and clients follow the redirect (docs/failover.md)."));
}

function confirmFailover(ns, target) {
  const f = ns.failover;
  const text = target
    ? "Make " + target + " the primary of " + ns.name + "? " +
      (f.mode === "active-standby" ? "Writes move from " + f.primary + " to " + target + "" : "The namespace becomes active-standby with " + target + " taking all writes") +
      "; the epoch goes from " + (f.epoch || 0) + " to " + ((f.epoch || 0) + 1) + "."
    : "Make " + ns.name + " active-active? Every region takes writes again; the epoch goes from " + (f.epoch || 0) + " to " + ((f.epoch || 0) + 1) + ".";
  const modal = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  modal.hidden = false;
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  const close = () => { modal.hidden = true; ok.onclick = null; cancel.onclick = null; };
  cancel.onclick = close;
  ok.onclick = async () => {
    close();
    status("Failing " + ns.name + " over…");
    try {
      const path = V2 + "/namespaces/" + nsPath(ns.name) + "/primary";
      if (target) await api("POST", path, {mode: "active-standby", primary: target});
      else await api("DELETE", path);
    } catch (err) {
      status(describe(err), true);
      return;
    }
    await show("namespaces");
    status(target ? ns.name + ": primary is now " + target : ns.name + " is active-active");
  };
  cancel.focus();
}

async function topicsPage() {
  const nss = await loadNamespaces();
  const clusters = await settle(loadClusters);
  const topics = await loadTopics(nss);
  const here = localRegion(clusters.value || [], topics);
  const remotes = [...new Set(topics.flatMap((t) => Object.keys(t.stats?.replication || {})))].sort();
  const byNS = new Map();
  for (const t of topics) {
    if (!byNS.has(t.ns)) byNS.set(t.ns, []);
    byNS.get(t.ns).push(t);
  }
  const sections = [];
  for (const [ns, list] of byNS) {
    const rows = list.map((t) => {
      if (t.error) return el("tr", {"data-topic": t.name}, el("td", {}, t.short || t.name), el("td", {colspan: 5 + remotes.length}, errorBox(t.error)));
      const s = t.stats || {};
      return el("tr", {"data-topic": t.name},
        el("td", {}, t.short),
        el("td", {class: "num rate-in"}, num(s.msgRateIn, 1)),
        el("td", {class: "num rate-out"}, num(s.msgRateOut, 1)),
        el("td", {class: "num backlog"}, num(backlog(s))),
        el("td", {class: "num"}, bytes(s.storageSize)),
        el("td", {class: "num"}, num(Object.keys(s.subscriptions || {}).filter((n) => !isInternal(n)).length)),
        remotes.map((r) => {
          const x = s.replication?.[r];
          if (!x) return el("td", {class: "muted"}, "–");
          return el("td", {class: "repl", "data-remote": r},
            el("span", {class: x.connected ? "ok" : "down"}, x.connected ? "up" : "down"),
            " backlog " + num(x.replicationBacklog) + ", lag " + num(x.replicationDelayInSeconds) + " s, out " +
            num(x.msgRateOut, 1) + "/s, in " + num(x.msgRateIn, 1) + "/s");
        }));
    });
    sections.push(el("h2", {}, ns),
      table(["topic", "msg/s in", "msg/s out", "backlog (msgs)", "storage", "subscriptions", ...remotes.map((r) => "replication ⇄ " + r)], rows, {"data-ns": ns}));
  }
  return el("div", {},
    el("h1", {}, "Topics" + (here ? " in " + here : "") + " ", refreshButton()),
    sections.length ? sections : el("p", {class: "muted"}, "No topics your token may see."),
    el("p", {class: "muted"}, "Rates and backlogs are this region's; the replication columns are its links to each other region (out: to it, in: from it)."));
}

async function drillsPage() {
  const out = el("div", {id: "drill-report"});
  const input = el("input", {type: "file", id: "drill-file", accept: "application/json,.json", onchange: async () => {
    const f = input.files[0];
    if (!f) return;
    try {
      out.replaceChildren(drillReport(JSON.parse(await f.text()), f.name));
    } catch (err) {
      out.replaceChildren(el("p", {class: "error"}, f.name + ": not a drill report: " + (err.message || err)));
    }
    document.body.dataset.loaded = "drill-report";
  }});
  return el("div", {},
    el("h1", {}, "Drill reports"),
    el("p", {}, "Brokers keep no drill reports: ", el("code", {}, "isobar drill failover --json report.json"),
      " writes one where it runs (docs/drills.md). Open it here to read it; the file stays in your browser."),
    el("p", {}, el("label", {for: "drill-file"}, "Report: "), input),
    out);
}

function ms(v) { return v === null || v === undefined ? "–" : num(v) + " ms"; }

function drillReport(r, file) {
  if (typeof r !== "object" || r === null || !("drill" in r) || !("timeline" in r)) {
    throw new Error("no drill or timeline field");
  }
  const fault = r.fault && typeof r.fault === "object"
    ? Object.entries(r.fault).filter(([, v]) => v !== "" && v !== null && v !== 0).map(([k, v]) => k + " " + (typeof v === "object" ? JSON.stringify(v) : v)).join(", ")
    : String(r.fault ?? "–");
  const point = ([label, key]) => {
    const p = r.timeline?.[key];
    return el("tr", {}, el("td", {}, label),
      el("td", {class: "num"}, p ? "+" + num(p.offset_ms) + " ms" : "–"),
      el("td", {class: "muted"}, p?.how || (p ? "" : "did not happen")));
  };
  return el("div", {},
    el("h2", {}, file),
    el("p", {class: "verdict"}, r.passed ? el("span", {class: "ok"}, "PASSED") : el("span", {class: "down"}, "FAILED"),
      " " + r.drill + " drill of " + r.namespace + " (" + r.topic + "), " + r.from + " → " + r.to),
    el("div", {class: "cards"},
      el("div", {class: "card"}, el("h3", {}, "Run"), el("dl", {},
        el("dt", {}, "run"), el("dd", {}, r.run_id || "–"),
        el("dt", {}, "started"), el("dd", {}, r.started || "–"),
        el("dt", {}, "fault"), el("dd", {}, fault || "–"),
        el("dt", {}, "promotion"), el("dd", {}, r.promotion || "–"),
        el("dt", {}, "workload"), el("dd", {}, num(r.rate) + " msg/s, " + num(r.producers) + " producers, " + num(r.consumers) + " consumers"))),
      el("div", {class: "card"}, el("h3", {}, "Recovery"), el("dl", {},
        el("dt", {}, "RTO publish"), el("dd", {class: "rto"}, "p99 " + ms(r.rto_publish_ms?.p99) + ", max " + ms(r.rto_publish_ms?.max)),
        el("dt", {}, "RTO consume"), el("dd", {}, "p99 " + ms(r.rto_consume_ms?.p99) + ", max " + ms(r.rto_consume_ms?.max)),
        el("dt", {}, "RPO"), el("dd", {class: "rpo"}, r.rpo_messages === null || r.rpo_messages === undefined ? "not measured" : num(r.rpo_messages) + " messages, " + ms(r.rpo_ms)))),
      el("div", {class: "card"}, el("h3", {}, "Messages"), el("dl", {},
        el("dt", {}, "sent"), el("dd", {}, num(r.sent)),
        el("dt", {}, "acknowledged"), el("dd", {}, num(r.acknowledged)),
        el("dt", {}, "delivered"), el("dd", {}, num(r.delivered)),
        el("dt", {}, "lost"), el("dd", {class: r.lost ? "down" : ""}, num(r.lost)),
        el("dt", {}, "duplicated"), el("dd", {}, num((r.duplicated_copy || 0) + (r.duplicated_redelivery || 0))),
        el("dt", {}, "out of order"), el("dd", {}, num(r.order_violations))))),
    el("h2", {}, "Timeline"),
    table(["moment", "after the fault", "how"], [
      ["fault", "fault"], ["detected", "detected"], ["fenced", "fenced"], ["promoted", "promoted"],
      ["writable", "writable"], ["first publish", "first_publish_ok"], ["first delivery", "first_delivery_ok"], ["healed", "healed"],
    ].map(point)),
    (r.failures || []).length ? [el("h2", {}, "Failures"), el("ul", {class: "failures"}, r.failures.map((f) => el("li", {}, f)))] : null);
}

// ---- start ----

function start() {
  const tok = document.getElementById("token");
  const tenants = document.getElementById("tenants");
  tok.value = sessionStorage.getItem(TOKEN_KEY) || "";
  tenants.value = sessionStorage.getItem(TENANTS_KEY) || "";
  const keep = (key, v) => { if (v.trim()) sessionStorage.setItem(key, v.trim()); else sessionStorage.removeItem(key); };
  document.getElementById("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    keep(TOKEN_KEY, tok.value);
    keep(TENANTS_KEY, tenants.value);
    show(current);
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(TENANTS_KEY);
    tok.value = "";
    tenants.value = "";
    show(current);
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") document.getElementById("confirm-cancel").click();
  });
  window.addEventListener("hashchange", () => show(location.hash.slice(1)));
  show(location.hash.slice(1));
}

document.addEventListener("DOMContentLoaded", start);
