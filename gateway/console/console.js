// Switchboard console: plain JavaScript against the gateway's own API
// (/v1/models, /v1/graphs/{model}/diagram.svg, /v1/chat/completions with
// stream: true, /v1/sessions). Text from the gateway is only ever set as
// textContent; diagrams are parsed as SVG and cleaned before they are shown.
"use strict";

(() => {
  const SESSION_HEADER = document.querySelector('meta[name="switchboard-session-header"]').content || "X-Session-Id";
  const KEY_STORE = "switchboard.console.apiKey";
  const GRAPH_OF_SESSION = "switchboard.console.sessionGraphs";
  const SVG_NS = "http://www.w3.org/2000/svg";

  const $ = (id) => document.getElementById(id);

  // el builds an element: el("div", {class: "x", dataset: {testid: "y"}}, child, "text").
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k === "testid") node.dataset.testid = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  // ---- API access -------------------------------------------------------

  const state = {
    key: sessionStorage.getItem(KEY_STORE) || "",
    graphs: [],
    diagrams: new Map(), // graph name -> promise of its cleaned <svg> (a template to clone)
    graph: "",
    sessionId: "",
    running: null, // AbortController of the stream in flight
    selectedSession: "",
  };

  class APIError extends Error {
    constructor(status, body) {
      const e = (body && body.error) || {};
      super(e.message || `HTTP ${status}`);
      this.status = status;
      this.code = e.code || "";
    }
  }

  function headers(extra) {
    const h = Object.assign({}, extra);
    if (state.key) h.Authorization = "Bearer " + state.key;
    return h;
  }

  // api fetches path; a 401 opens the key prompt and throws.
  async function api(path, opts = {}) {
    const resp = await fetch(path, Object.assign({}, opts, { headers: headers(opts.headers) }));
    if (!resp.ok) {
      let body = null;
      try { body = await resp.json(); } catch (_) { /* not JSON */ }
      const err = new APIError(resp.status, body);
      if (resp.status === 401) askForKey(Boolean(state.key));
      throw err;
    }
    return resp;
  }

  async function apiJSON(path, opts) {
    return (await api(path, opts)).json();
  }

  // ---- key prompt -------------------------------------------------------

  function askForKey(refused) {
    $("key-error").hidden = !refused;
    $("key-overlay").hidden = false;
    $("key-input").value = "";
    $("key-input").focus();
  }

  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const key = $("key-input").value.trim();
    if (!key) return;
    state.key = key;
    sessionStorage.setItem(KEY_STORE, key);
    $("key-overlay").hidden = true;
    showKeyBox();
    start();
  });

  $("forget-key").addEventListener("click", () => {
    state.key = "";
    sessionStorage.removeItem(KEY_STORE);
    showKeyBox();
    askForKey(false);
  });

  function showKeyBox() {
    $("keybox").hidden = !state.key;
  }

  // ---- banner -----------------------------------------------------------

  function showError(msg) {
    const b = $("banner");
    b.textContent = msg;
    b.hidden = !msg;
  }

  function describe(err) {
    if (err instanceof APIError) return err.code ? `${err.message} (${err.code})` : err.message;
    return String(err && err.message ? err.message : err);
  }

  // ---- tabs -------------------------------------------------------------

  const TABS = ["graphs", "playground", "sessions"];

  function showTab(name) {
    if (!TABS.includes(name)) name = "playground";
    for (const t of document.querySelectorAll(".tab")) t.setAttribute("aria-selected", String(t.dataset.tab === name));
    for (const v of document.querySelectorAll(".view")) v.hidden = v.dataset.view !== name;
    if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
    if (name === "sessions") loadSessions();
    if (name === "playground") $("message-input").focus();
  }

  for (const t of document.querySelectorAll(".tab")) t.addEventListener("click", () => showTab(t.dataset.tab));
  $("side-full").addEventListener("click", () => showTab("graphs"));

  // ---- graphs and diagrams ---------------------------------------------

  // Elements and attributes a diagram may keep: shapes, text and styling,
  // nothing that runs, loads or embeds.
  const SVG_TAGS = new Set(["svg", "g", "defs", "title", "desc", "style", "path", "rect", "circle", "ellipse",
    "line", "polyline", "polygon", "text", "tspan", "marker", "lineargradient", "radialgradient", "stop",
    "clippath", "symbol", "use", "pattern", "mask", "filter", "fegaussianblur", "feoffset", "feblend",
    "fecolormatrix", "feflood", "fecomposite", "femerge", "femergenode", "fedropshadow"]);

  // cleanSVG parses text as SVG and returns an <svg> element of this
  // document without scripts, event handlers, foreign content or links
  // that leave the drawing.
  function cleanSVG(text) {
    const doc = new DOMParser().parseFromString(text, "image/svg+xml");
    const root = doc.documentElement;
    if (!root || root.namespaceURI !== SVG_NS || root.localName !== "svg" || doc.getElementsByTagName("parsererror").length) {
      throw new Error("the diagram is not SVG");
    }
    const walk = (node) => {
      for (const child of Array.from(node.children)) {
        if (child.namespaceURI !== SVG_NS || !SVG_TAGS.has(child.localName.toLowerCase())) {
          child.remove();
          continue;
        }
        walk(child);
      }
      for (const attr of Array.from(node.attributes)) {
        const name = attr.name.toLowerCase();
        const value = attr.value.trim().toLowerCase();
        if (name.startsWith("on")) node.removeAttribute(attr.name);
        else if ((name === "href" || name === "xlink:href") && !value.startsWith("#")) node.removeAttribute(attr.name);
        else if (value.includes("javascript:") || /url\(\s*['"]?(?!#)/.test(value)) node.removeAttribute(attr.name);
      }
      if (node.localName === "style") {
        // Only local styling: no imports or remote fonts and images.
        if (/@import|url\(\s*['"]?(?!#)/i.test(node.textContent)) node.remove();
      }
    };
    walk(root);
    const svg = document.importNode(root, true);
    svg.setAttribute("role", "img");
    return svg;
  }

  // loadDiagram fetches a graph's diagram once; both views share it.
  function loadDiagram(name) {
    if (!state.diagrams.has(name)) {
      state.diagrams.set(name, api(`/v1/graphs/${encodeURIComponent(name)}/diagram.svg`)
        .then((resp) => resp.text())
        .then(cleanSVG));
    }
    return state.diagrams.get(name);
  }

  // framed wraps a graph's drawing in the inline <svg> that carries
  // data-testid="graph-diagram" (section 12: one inline <svg> per graph);
  // the gateway's own <svg> stays whole inside it, at the same size.
  function framed(svg, graph) {
    const inner = svg.cloneNode(true);
    const outer = document.createElementNS(SVG_NS, "svg");
    for (const a of ["viewBox", "width", "height"]) {
      if (inner.hasAttribute(a)) outer.setAttribute(a, inner.getAttribute(a));
    }
    outer.setAttribute("data-testid", "graph-diagram");
    outer.setAttribute("data-graph", graph);
    outer.setAttribute("role", "img");
    outer.setAttribute("aria-label", "graph " + graph);
    outer.append(inner);
    return outer;
  }

  function renderGraphs() {
    const list = $("graph-list");
    list.replaceChildren();
    if (!state.graphs.length) {
      list.append(el("p", { class: "muted", text: "This gateway serves no graphs." }));
      return;
    }
    for (const g of state.graphs) {
      const box = el("div", { class: "diagram", "data-graph": g.id }, el("p", { class: "muted", text: "Drawing…" }));
      const card = el("article", { class: "card graph-card", testid: "graph" },
        el("header", {},
          el("h2", { text: g.id }),
          el("button", { class: "button secondary small", type: "button", text: "Chat", onclick: () => { pickGraph(g.id); showTab("playground"); } })),
        g.description ? el("p", { class: "muted", text: g.description }) : null,
        box);
      list.append(card);
      loadDiagram(g.id).then(
        (svg) => box.replaceChildren(framed(svg, g.id)),
        (err) => box.replaceChildren(el("p", { class: "diagram-error", text: "No diagram: " + describe(err) })));
    }
  }

  function renderSide() {
    const g = state.graphs.find((x) => x.id === state.graph);
    $("side-title").textContent = g ? g.id : "Graph";
    $("side-desc").textContent = g ? (g.description || "") : "";
    const box = $("side-diagram");
    box.replaceChildren();
    if (!g) return;
    loadDiagram(g.id).then(
      (svg) => { if (state.graph === g.id) box.replaceChildren(svg.cloneNode(true)); },
      () => { /* the graphs tab says why */ });
  }

  // ---- playground -------------------------------------------------------

  function newSessionId() {
    if (crypto.randomUUID) return crypto.randomUUID();
    // Pages served over plain HTTP from another host have no randomUUID.
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  function rememberGraph(sessionId, graph) {
    let m = {};
    try { m = JSON.parse(sessionStorage.getItem(GRAPH_OF_SESSION) || "{}"); } catch (_) { m = {}; }
    m[sessionId] = graph;
    sessionStorage.setItem(GRAPH_OF_SESSION, JSON.stringify(m));
  }

  function graphOf(sessionId) {
    try { return JSON.parse(sessionStorage.getItem(GRAPH_OF_SESSION) || "{}")[sessionId] || ""; } catch (_) { return ""; }
  }

  function newConversation() {
    if (state.running) state.running.abort();
    state.sessionId = newSessionId();
    $("session-id").textContent = state.sessionId;
    $("messages").replaceChildren($("chat-empty") || el("div"));
    $("chat-empty").hidden = false;
    setBusy(false);
  }

  function pickGraph(name) {
    if (state.graph === name) return;
    state.graph = name;
    $("graph-select").value = name;
    renderSide();
    newConversation();
  }

  $("graph-select").addEventListener("change", (ev) => pickGraph(ev.target.value));
  $("new-conversation").addEventListener("click", () => { newConversation(); $("message-input").focus(); });

  function setBusy(busy) {
    $("send").disabled = busy;
    $("send").textContent = busy ? "Running…" : "Send";
  }

  function chatLog() {
    $("chat-empty").hidden = true;
    return $("messages");
  }

  function scrollDown(box) {
    box.scrollTop = box.scrollHeight;
  }

  // messageEl is one chat message labelled with its agent ("you" for the user).
  function messageEl(agent, text, user) {
    const bubble = el("div", { class: "bubble" }, text || "");
    const node = el("div", { class: "message" + (user ? " user" : ""), testid: "message", "data-agent": agent },
      el("span", { class: "agent-label", testid: "agent-label", text: agent }), bubble);
    node.bubble = bubble;
    return node;
  }

  function handoffEl(from, to) {
    return el("div", { class: "handoff", testid: "handoff", "data-from": from, "data-to": to }, el("span", { text: `${from} → ${to}` }));
  }

  function formatArgs(args) {
    if (args === undefined || args === null) return "{}";
    if (typeof args === "string") {
      try { return JSON.stringify(JSON.parse(args)); } catch (_) { return args; }
    }
    return JSON.stringify(args);
  }

  // approvalCard shows approvals with Approve and Reject; once every one is
  // decided, onAllDecided runs (the playground resumes the run).
  function approvalCard(sessionId, approvals, onAllDecided) {
    const card = el("div", { class: "approval-card", testid: "approvals" },
      el("h3", { text: approvals.length > 1 ? "These calls wait for your approval" : "This call waits for your approval" }));
    let open = 0;
    for (const a of approvals) {
      const status = el("span", { class: "status-badge " + (a.status || "pending"), testid: "approval-status", text: a.status || "pending" });
      const actions = el("div", { class: "actions" });
      const row = el("div", { class: "approval", testid: "approval", "data-approval": a.id },
        el("div", {},
          el("div", { class: "args" }, el("strong", { text: a.tool }), " " + formatArgs(a.arguments)),
          el("div", { class: "who", text: `asked by ${a.agent}` })),
        actions);
      card.append(row);
      if (a.status && a.status !== "pending") {
        actions.append(status);
        continue;
      }
      open++;
      const decide = async (approve) => {
        for (const b of actions.querySelectorAll("button")) b.disabled = true;
        try {
          const res = await apiJSON(`/v1/sessions/${encodeURIComponent(sessionId)}/approvals/${encodeURIComponent(a.id)}`, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ approve }),
          });
          status.className = "status-badge " + res.status;
          status.textContent = res.status;
          actions.replaceChildren(status);
          if (--open === 0 && onAllDecided) onAllDecided();
        } catch (err) {
          for (const b of actions.querySelectorAll("button")) b.disabled = false;
          card.append(el("div", { class: "error-note", text: "Could not record the decision: " + describe(err) }));
        }
      };
      actions.append(
        el("button", { class: "button ok small", type: "button", testid: "approve", text: "Approve", onclick: () => decide(true) }),
        el("button", { class: "button bad small", type: "button", testid: "reject", text: "Reject", onclick: () => decide(false) }));
    }
    return card;
  }

  // readSSE calls onData with each event's data until [DONE].
  async function readSSE(resp, onData) {
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (!data) continue;
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }

  // run streams one request of the conversation (messages may be empty:
  // the resume of a paused run) and renders it into box as it arrives.
  async function run(box, graph, sessionId, messages) {
    const ctl = new AbortController();
    state.running = ctl;
    setBusy(true);
    let current = null; // the assistant message being written
    const activities = new Map(); // toolCallId -> sub-agent activity element
    const finish = () => { if (current) current.classList.remove("streaming"); current = null; };
    const say = (agent, text) => {
      if (!current || current.dataset.agent !== agent) {
        finish();
        current = messageEl(agent, "", false);
        current.classList.add("streaming");
        box.append(current);
      }
      current.bubble.append(text);
    };
    try {
      const resp = await api("/v1/chat/completions", {
        method: "POST",
        signal: ctl.signal,
        headers: { "Content-Type": "application/json", [SESSION_HEADER]: sessionId },
        body: JSON.stringify({ model: graph, stream: true, messages }),
      });
      await readSSE(resp, (chunk) => {
        if (chunk.error) {
          finish();
          box.append(el("div", { class: "error-note", testid: "error", text: describe(new APIError(0, chunk)) }));
          return;
        }
        const meta = chunk.metadata || {};
        const choice = (chunk.choices || [])[0];
        const delta = (choice && choice.delta) || {};
        switch (meta.event) {
          case "handoff":
            finish();
            box.append(handoffEl(meta.from, meta.to));
            break;
          case "approval_required":
            finish();
            box.append(approvalCard(sessionId, meta.approvals || [], () => resume(box, graph, sessionId)));
            break;
          case "subagent_start": {
            const text = el("div", { class: "activity-text" });
            const a = el("details", { class: "activity", testid: "subagent", "data-subagent": meta.subagent },
              el("summary", { text: `${meta.agentName} asked ${meta.subagent}…` }), text);
            a.text = text;
            activities.set(meta.toolCallId, a);
            finish();
            box.append(a);
            break;
          }
          case "subagent_delta": {
            const a = activities.get(meta.toolCallId);
            if (a) a.text.append(meta.text || "");
            break;
          }
          case "subagent_done": {
            const a = activities.get(meta.toolCallId);
            if (a) a.querySelector("summary").textContent = `${meta.agentName} asked ${meta.subagent} (done)`;
            break;
          }
          default:
            if (typeof delta.content === "string" && delta.content !== "") say(meta.agentName || "assistant", delta.content);
            if (meta.guardrail) {
              finish();
              box.append(el("div", { class: "note", text: `guardrail ${meta.guardrail.name} stopped the run` }));
            }
        }
        scrollDown(box);
      });
    } catch (err) {
      if (err.name !== "AbortError") {
        box.append(el("div", { class: "error-note", testid: "error", text: describe(err) }));
      }
    } finally {
      finish();
      if (state.running === ctl) {
        state.running = null;
        setBusy(false);
      }
      scrollDown(box);
    }
  }

  function resume(box, graph, sessionId) {
    box.append(el("div", { class: "note", text: "decided; the run goes on" }));
    return run(box, graph, sessionId, []);
  }

  async function send() {
    const input = $("message-input");
    const text = input.value.trim();
    if (!text || state.running || !state.graph) return;
    input.value = "";
    const box = chatLog();
    // A new message rejects the approvals still pending (the gateway does
    // so): their buttons no longer decide anything.
    for (const b of box.querySelectorAll('[data-testid="approve"], [data-testid="reject"]')) b.disabled = true;
    box.append(messageEl("you", text, true));
    scrollDown(box);
    rememberGraph(state.sessionId, state.graph);
    await run(box, state.graph, state.sessionId, [{ role: "user", content: text }]);
  }

  $("composer").addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
  $("message-input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    }
  });

  // ---- sessions ---------------------------------------------------------

  function ago(unix) {
    const s = Math.max(0, Math.round(Date.now() / 1000 - unix));
    if (s < 60) return `${s}s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return new Date(unix * 1000).toLocaleString();
  }

  async function loadSessions() {
    const list = $("session-list");
    try {
      const body = await apiJSON("/v1/sessions?limit=20");
      list.replaceChildren();
      if (!body.data.length) list.append(el("li", { class: "placeholder", text: "No sessions yet: chat in the playground to start one." }));
      for (const s of body.data) {
        const item = el("button", { type: "button", class: "session", testid: "session", "data-session": s.id,
          "aria-current": String(s.id === state.selectedSession), onclick: () => openSession(s.id) },
        el("span", { class: "sid", text: s.id }),
        el("span", { class: "meta", text: `${s.activeAgent || "—"} · version ${s.version} · ${ago(s.updatedAt)}` }));
        list.append(el("li", {}, item));
      }
    } catch (err) {
      list.replaceChildren(el("li", { class: "placeholder", text: "Cannot list sessions: " + describe(err) }));
    }
  }

  $("refresh-sessions").addEventListener("click", loadSessions);

  // renderTranscript draws a stored transcript: the agent of each assistant
  // message is the `to` of the handoff marker before it (the first marker's
  // `from` before any).
  function renderTranscript(box, transcript, activeAgent) {
    const first = transcript.find((m) => m.handoff);
    let agent = first ? first.handoff.from : activeAgent || "assistant";
    const results = new Map();
    for (const m of transcript) if (m.role === "tool") results.set(m.tool_call_id, m.content);
    for (const m of transcript) {
      const text = typeof m.content === "string" ? m.content
        : Array.isArray(m.content) ? m.content.filter((p) => p.type === "text").map((p) => p.text).join("") : "";
      if (m.handoff) {
        box.append(handoffEl(m.handoff.from, m.handoff.to));
        agent = m.handoff.to;
      } else if (m.role === "user") {
        box.append(messageEl("you", text, true));
      } else if (m.role === "assistant") {
        const node = messageEl(agent, text, false);
        if (!text) node.bubble.remove();
        for (const tc of m.tool_calls || []) {
          const call = el("div", { class: "toolcall", testid: "tool-call" },
            el("span", { class: "tc-name", text: tc.function.name }), "(" + formatArgs(tc.function.arguments) + ")");
          if (results.has(tc.id)) {
            call.append(el("details", { class: "toolresult" }, el("summary", { text: "result" }), results.get(tc.id)));
          }
          node.append(call);
        }
        box.append(node);
      } else if (m.role === "system" || m.role === "developer") {
        box.append(el("div", { class: "note", text: `${m.role}: ${text}` }));
      }
    }
  }

  async function openSession(id) {
    state.selectedSession = id;
    for (const b of document.querySelectorAll(".session")) b.setAttribute("aria-current", String(b.dataset.session === id));
    const pane = $("transcript-pane");
    pane.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
    let sess;
    try {
      sess = await apiJSON(`/v1/sessions/${encodeURIComponent(id)}`);
    } catch (err) {
      pane.replaceChildren(el("div", { class: "error-note", text: describe(err) }));
      return;
    }
    const graphSel = el("select", { "aria-label": "graph to continue in" },
      ...state.graphs.map((g) => el("option", { value: g.id, text: g.id })));
    graphSel.value = graphOf(id) || state.graph;
    const box = el("div", { class: "messages transcript", testid: "transcript" });
    pane.replaceChildren(
      el("div", { class: "transcript-head" },
        el("div", {},
          el("div", {}, "Session ", el("code", { text: sess.id })),
          el("div", { class: "muted", text: `active agent ${sess.activeAgent || "—"} · version ${sess.version}` })),
        el("div", { class: "field" }, "Continue in ", graphSel,
          el("button", { class: "button secondary small", type: "button", text: "Open in playground",
            onclick: () => continueInPlayground(sess, graphSel.value, false) }))),
      box);
    renderTranscript(box, sess.transcript || [], sess.activeAgent);
    const pending = sess.pendingApprovals || [];
    if (pending.length) {
      box.append(approvalCard(sess.id, pending, () => {
        box.append(el("div", { class: "note", text: "All decided: the run resumes in the playground." }));
        continueInPlayground(sess, graphSel.value, true);
      }));
    }
  }

  // continueInPlayground makes a stored session the playground's
  // conversation; resume streams its paused run on.
  async function continueInPlayground(sess, graph, resumeRun) {
    if (state.running) state.running.abort();
    if (graph && graph !== state.graph) {
      state.graph = graph;
      $("graph-select").value = graph;
      renderSide();
    }
    state.sessionId = sess.id;
    rememberGraph(sess.id, state.graph);
    $("session-id").textContent = sess.id;
    const box = $("messages");
    box.replaceChildren($("chat-empty"));
    $("chat-empty").hidden = true;
    renderTranscript(box, sess.transcript || [], sess.activeAgent);
    showTab("playground");
    scrollDown(box);
    if (resumeRun) await resume(box, state.graph, sess.id);
  }

  // ---- start ------------------------------------------------------------

  let started = false;

  async function start() {
    showError("");
    let models;
    try {
      models = await apiJSON("/v1/models");
    } catch (err) {
      if (err instanceof APIError && err.status === 401) return; // the key prompt is open
      showError("Cannot reach the gateway: " + describe(err));
      return;
    }
    state.graphs = models.data || [];
    state.diagrams.clear();
    const sel = $("graph-select");
    sel.replaceChildren(...state.graphs.map((g) => el("option", { value: g.id, text: g.id })));
    renderGraphs();
    if (!started) {
      started = true;
      state.graph = null;
      pickGraph(state.graphs.length ? state.graphs[0].id : "");
    } else {
      renderSide();
    }
    showTab(location.hash.slice(1) || "playground");
  }

  showKeyBox();
  start();
})();
