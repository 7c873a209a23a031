// runledger console: the live parts of the server-rendered pages. It talks only to this
// server's public API (/api/v1) with the session cookie, sending the session's CSRF token
// (from <meta name="csrf-token">) on every request that changes something. Text from the
// server is only ever set as textContent, never parsed as HTML.
"use strict";

(function () {
  const page = document.body.dataset.page;
  const meta = document.querySelector('meta[name="csrf-token"]');
  const csrf = meta ? meta.content : "";

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRF-Token"] = csrf;
    const options = { method, headers, credentials: "same-origin" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch("/api/v1" + path, options);
    } catch (e) {
      throw new ApiError(0, "the server cannot be reached; check the connection and retry");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      data = null;
    }
    if (response.status === 401) {
      // The session ended (signed out elsewhere, expired, key revoked): sign in again.
      window.location.assign("/signin");
    }
    if (!response.ok) {
      const detail = (data && (data.detail || data.title)) || "HTTP " + response.status;
      throw new ApiError(response.status, detail);
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return node;
  }

  function when(s) {
    if (!s) return "";
    let t = s.replace("T", " ");
    const dot = t.indexOf(".");
    t = dot >= 0 ? t.slice(0, dot) : t.replace(/Z$/, "");
    return t + " UTC";
  }

  function badge(state, id) {
    return el("span", { class: "state state-" + String(state).toLowerCase(), id }, state);
  }

  function clock() {
    return new Date().toISOString().slice(11, 19) + " UTC";
  }

  const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
  const POLL_MS = 3000;

  // Runs every `ms` while the tab is visible, and at once when it becomes visible again.
  function whileVisible(ms, fn) {
    let timer = null;
    const tick = async () => {
      timer = null;
      if (document.hidden) return;
      try {
        await fn();
      } finally {
        if (!document.hidden && timer === null) timer = setTimeout(tick, ms);
      }
    };
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && timer === null) tick();
    });
    timer = setTimeout(tick, ms);
  }

  // ---- Runs ---------------------------------------------------------------------------------

  function runRow(run) {
    const config = run.agent_config || {};
    const creator = run.creator || {};
    return el(
      "tr",
      { "data-run": run.run_id },
      el("td", { class: "title" }, el("a", { href: "/runs/" + run.run_id }, run.title || "(untitled)")),
      el("td", {}, badge(run.state)),
      el("td", {}, config.environment_id || ""),
      el("td", {}, creator.display_name || ""),
      el("td", {}, when(run.created_at)),
      el("td", {}, when(run.updated_at))
    );
  }

  function runsPage() {
    const form = document.getElementById("filters");
    if (form) {
      // Empty fields stay out of the URL, so it reads as the filters applied.
      form.addEventListener("submit", () => {
        for (const field of form.elements) {
          if ((field.tagName === "INPUT" || field.tagName === "SELECT") && field.type !== "checkbox" && field.value === "") {
            field.disabled = true;
          }
        }
      });
    }
    const rows = document.getElementById("run-rows");
    const status = document.getElementById("runs-status");
    const empty = document.getElementById("runs-empty");
    if (!rows) return;
    whileVisible(POLL_MS, async () => {
      try {
        const page = await api("GET", "/agent/runs" + window.location.search);
        rows.replaceChildren(...page.runs.map(runRow));
        empty.hidden = page.runs.length > 0;
        status.textContent = "Live: updated " + clock();
      } catch (e) {
        status.textContent = "Could not refresh the list (" + e.message + "); retrying.";
      }
    });
  }

  // ---- Run ----------------------------------------------------------------------------------

  const ROW = 20; // px; the CSS gives every transcript line this height (.tx-rows div)

  function transcriptView(box, statusLine) {
    const spacer = box.querySelector(".tx-spacer");
    const view = box.querySelector(".tx-rows");
    const lines = [];
    const open = new Map();
    let paused = false;
    let scheduled = false;

    function render() {
      scheduled = false;
      spacer.style.height = lines.length * ROW + "px";
      if (!paused) box.scrollTop = box.scrollHeight;
      const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 30);
      const last = Math.min(lines.length, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + 30);
      view.style.transform = "translateY(" + first * ROW + "px)";
      const nodes = [];
      for (let i = first; i < last; i++) {
        nodes.push(el("div", { class: "s-" + lines[i].s }, lines[i].t || "\u200b"));
      }
      view.replaceChildren(...nodes);
    }

    function schedule() {
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(render);
      }
    }

    box.addEventListener("scroll", schedule, { passive: true });
    window.addEventListener("resize", schedule);

    return {
      add(entry) {
        const key = entry.execution + "/" + entry.stream;
        const parts = String(entry.text).split("\n");
        let i = 0;
        if (open.has(key)) {
          lines[open.get(key)].t += parts[0];
          open.delete(key);
          i = 1;
        }
        for (; i < parts.length; i++) lines.push({ s: entry.stream, t: parts[i] });
        if (entry.continued) open.set(key, lines.length - 1);
        schedule();
      },
      setPaused(p) {
        paused = p;
        schedule();
      },
      count() {
        return lines.length;
      },
      status(text) {
        statusLine.textContent = text;
      },
    };
  }

  function describe(event) {
    const data = event.data || {};
    const parts = [];
    if (data.creator && data.creator.display_name) parts.push("by " + data.creator.display_name);
    for (const [k, v] of Object.entries(data)) {
      if (["title", "prompt", "config", "creator", "metadata", "team", "by"].includes(k)) continue;
      if (v === null || typeof v === "object") continue;
      parts.push(k + ": " + String(v).slice(0, 200));
    }
    return parts.join(", ");
  }

  function runPage() {
    const root = document.getElementById("run");
    if (!root) return;
    const id = root.dataset.runId;
    const stateBadge = document.getElementById("run-state");
    const cancel = document.getElementById("cancel");
    const result = document.getElementById("action-result");
    const events = document.getElementById("events");
    const view = transcriptView(document.getElementById("transcript"), document.getElementById("tx-status"));
    let state = root.dataset.state;
    let lastOffset = -1;
    let source = null;

    function setState(s) {
      state = s;
      root.dataset.state = s;
      stateBadge.textContent = s;
      stateBadge.className = "state state-" + s.toLowerCase();
      cancel.hidden = TERMINAL.has(s);
    }

    // The timeline is rendered on the server, a page at a time; while it shows the newest page,
    // the events recorded since are added here (keys named as the page named them, else by id).
    const keyNames = JSON.parse(events.dataset.keyNames || "{}");
    async function loadEvents() {
      if (events.dataset.newest !== "true") return;
      try {
        const last = events.dataset.lastSeq;
        const query = last === "" ? "" : "?after_seq=" + last;
        const page = await api("GET", "/agent/runs/" + id + "/events" + query);
        for (const e of page.events) {
          // Two refreshes may overlap: an event already shown is not added again.
          if (events.dataset.lastSeq !== "" && e.seq <= Number(events.dataset.lastSeq)) continue;
          const data = e.data || {};
          const parts = [describe(e)];
          if (data.by) parts.push("by " + (keyNames[data.by] || data.by));
          const status = data.status_message;
          if (status && status.message) parts.push(status.message + (status.error_code ? " " + status.error_code : ""));
          const o = e.origin;
          if (o) {
            const from = ["via " + o.channel];
            if (o.key) from.push("key " + o.key.name + " (" + o.key.id + ")");
            for (const [label, v] of [["request", o.request_id], ["from", o.client_addr], ["user agent", o.user_agent], ["cause", o.cause], ["reason", o.reason]]) {
              if (v) from.push(label + " " + v);
            }
            parts.push(from.join(" · "));
          }
          events.append(
            el("li", { id: "event-" + e.seq, value: e.seq, "data-seq": String(e.seq) },
              el("time", { dateTime: e.at }, when(e.at)), " ", el("strong", {}, e.type), " ",
              parts.filter((p) => p).join(", "), " ",
              el("a", { class: "at-link", href: "/runs/" + id + "?at=" + e.seq + "#at" }, "the run at this event"))
          );
          events.dataset.lastSeq = String(e.seq);
        }
      } catch (e) {
        events.append(el("li", { class: "error" }, "The newest events could not be read: " + e.message));
      }
    }

    async function refresh() {
      try {
        const run = await api("GET", "/agent/runs/" + id);
        // A run gets its session (and link) once its agent starts.
        if (run.session_link && !document.getElementById("session-link")) {
          document.querySelector(".run-head").append(el("a", { id: "session-link", href: run.session_link }, "Shareable session page"));
        }
        if (run.state !== state) {
          setState(run.state);
          loadEvents();
        }
      } catch (e) {
        result.textContent = "Could not refresh the run: " + e.message;
      }
    }

    function follow() {
      if (source) return;
      const query = lastOffset >= 0 ? "?offset=" + lastOffset : "";
      source = new EventSource("/api/v1/agent/runs/" + id + "/transcript" + query);
      view.status("Following live output…");
      source.addEventListener("entry", (message) => {
        const entry = JSON.parse(message.data);
        // A reconnect may repeat the entry it resumed from.
        if (entry.offset <= lastOffset) return;
        lastOffset = entry.offset;
        view.add(entry);
      });
      source.addEventListener("end", (message) => {
        source.close();
        source = null;
        const end = JSON.parse(message.data);
        setState(end.state);
        loadEvents();
        refresh();
        view.status("The run is " + end.state + "; " + view.count() + " lines.");
      });
      source.addEventListener("error", (message) => {
        if (message.data) {
          source.close();
          source = null;
          let detail = message.data;
          try {
            detail = JSON.parse(message.data).detail;
          } catch (e) {
            // the raw text is the detail
          }
          view.status("The transcript cannot be read: " + detail);
        } else if (source && source.readyState === EventSource.CONNECTING) {
          view.status("Connection lost; reconnecting…");
        }
      });
    }

    const pause = document.getElementById("tx-pause");
    pause.addEventListener("click", () => {
      const paused = pause.getAttribute("aria-pressed") !== "true";
      pause.setAttribute("aria-pressed", String(paused));
      pause.textContent = paused ? "Resume auto-scroll" : "Pause auto-scroll";
      view.setPaused(paused);
    });

    cancel.addEventListener("click", async () => {
      cancel.disabled = true;
      result.textContent = "Cancelling…";
      try {
        await api("POST", "/agent/runs/" + id + "/cancel");
        result.textContent = "Cancelled.";
        setState("CANCELLED");
        loadEvents();
      } catch (e) {
        result.textContent = "Not cancelled: " + e.message;
      } finally {
        cancel.disabled = false;
      }
    });

    const form = document.getElementById("followup");
    const message = document.getElementById("followup-message");
    const followResult = document.getElementById("followup-result");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      followResult.textContent = "Sending…";
      try {
        const answer = await api("POST", "/agent/runs/" + id + "/followups", { message: message.value });
        followResult.textContent = "Sent; the run is " + answer.state + ".";
        message.value = "";
        setState(answer.state);
        loadEvents();
        follow();
      } catch (e) {
        followResult.textContent = "Not sent: " + e.message;
      } finally {
        button.disabled = false;
      }
    });

    loadEvents();
    follow();
    whileVisible(POLL_MS, async () => {
      if (!TERMINAL.has(state) || source) await refresh();
    });
  }

  // ---- New run ------------------------------------------------------------------------------

  function newRunPage() {
    const form = document.getElementById("new-run");
    if (!form) return;
    const env = document.getElementById("n-env");
    const result = document.getElementById("new-result");
    api("GET", "/agent/environments")
      .then((list) => {
        for (const e of list.environments) {
          env.append(el("option", { value: e.uid }, e.config && e.config.name && e.config.name !== e.uid ? e.uid + " (" + e.config.name + ")" : e.uid));
        }
      })
      .catch((e) => {
        result.textContent = "The environments could not be listed (" + e.message + "); the default one is used.";
      });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      const body = { prompt: document.getElementById("n-prompt").value };
      const title = document.getElementById("n-title").value.trim();
      const model = document.getElementById("n-model").value.trim();
      if (title) body.title = title;
      const config = {};
      if (env.value) config.environment_id = env.value;
      if (model) config.model_id = model;
      if (Object.keys(config).length) body.config = config;
      button.disabled = true;
      result.textContent = "Starting…";
      try {
        const created = await api("POST", "/agent/runs", body);
        window.location.assign("/runs/" + created.run_id);
      } catch (e) {
        result.textContent = "The run was not created: " + e.message;
        button.disabled = false;
      }
    });
  }

  // ---- Keys ---------------------------------------------------------------------------------

  function keysPage() {
    const rows = document.getElementById("key-rows");
    if (!rows) return;
    const status = document.getElementById("keys-status");
    async function load() {
      try {
        const list = await api("GET", "/admin/keys");
        rows.replaceChildren(
          ...list.keys.map((k) => {
            const revoke = k.revoked_at
              ? null
              : el("button", { type: "button", class: "danger", "data-key": k.id }, "Revoke");
            if (revoke) {
              revoke.setAttribute("aria-label", "Revoke key " + k.name);
              revoke.addEventListener("click", async () => {
                revoke.disabled = true;
                try {
                  await api("POST", "/admin/keys/" + encodeURIComponent(k.id) + "/revoke");
                  status.textContent = "Key " + k.name + " revoked.";
                } catch (e) {
                  status.textContent = "Not revoked: " + e.message;
                }
                load();
              });
            }
            return el(
              "tr",
              { "data-key": k.id },
              el("td", {}, k.name + (k.admin ? " (admin)" : "")),
              el("td", {}, el("code", {}, k.id)),
              el("td", {}, k.team),
              el("td", {}, k.kind),
              el("td", {}, when(k.created_at)),
              el("td", {}, k.revoked_at ? "revoked " + when(k.revoked_at) : "live"),
              el("td", {}, revoke)
            );
          })
        );
      } catch (e) {
        status.textContent = "The keys could not be listed: " + e.message;
      }
    }
    const form = document.getElementById("new-key");
    const result = document.getElementById("key-result");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = {
        name: document.getElementById("k-name").value,
        team: document.getElementById("k-team").value.trim() || "default",
        kind: document.getElementById("k-kind").value,
        admin: document.getElementById("k-admin").checked,
      };
      try {
        const created = await api("POST", "/admin/keys", body);
        result.replaceChildren(
          el("p", {}, "Key " + created.name + " created. Copy its secret now: it is not shown again."),
          el("code", { id: "new-key-secret", class: "secret" }, created.key)
        );
        form.reset();
        load();
      } catch (e) {
        result.replaceChildren(el("p", { class: "error" }, "Not created: " + e.message));
      }
    });
    load();
  }

  if (page === "runs") runsPage();
  else if (page === "run") runPage();
  else if (page === "new") newRunPage();
  else if (page === "keys") keysPage();
})();
