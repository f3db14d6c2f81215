// Ragline's chat page: OpenAI-style chat completions, streamed, over the same API as any client.
// No dependencies, no network besides this server. The API key lives in sessionStorage only.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const keyBox = $("api-key");
  const questionBox = $("question");
  const form = $("ask-form");
  const askButton = $("ask");
  const stopButton = $("stop");
  const newButton = $("new");
  const log = $("log");
  const statusLine = $("status");
  const template = $("turn-template");
  const KEY_ITEM = "ragline.apiKey";
  const MAX_MESSAGES = 12;

  let history = []; // the conversation, as OpenAI messages
  let controller = null; // the answer being streamed, if any
  let turnCount = 0;

  keyBox.value = sessionStorage.getItem(KEY_ITEM) || "";
  keyBox.addEventListener("input", () => sessionStorage.setItem(KEY_ITEM, keyBox.value.trim()));

  questionBox.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && controller) controller.abort();
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    ask();
  });
  // Stop stays in place (a fast answer may end before a click lands); idle, it says so.
  stopButton.addEventListener("click", () => {
    if (controller) controller.abort();
    else say("Nothing to stop: no answer is streaming.");
  });
  newButton.addEventListener("click", () => {
    if (controller) controller.abort();
    history = [];
    log.replaceChildren();
    say("New conversation.");
    questionBox.focus();
  });
  log.addEventListener("click", (e) => {
    const link = e.target.closest("a.cite");
    if (!link) return;
    const target = document.getElementById(link.hash.slice(1));
    if (target) setTimeout(() => target.focus(), 0); // keyboard users land on the source
  });

  function say(text) {
    statusLine.textContent = text;
  }

  function isHttp(uri) {
    try {
      const u = new URL(uri);
      return u.protocol === "http:" || u.protocol === "https:";
    } catch {
      return false;
    }
  }

  // Sources are Markdown: show their inline markup as text would read (tags dropped, links and
  // images as their text) and **bold** as bold. Built as DOM nodes, never as HTML.
  function readable(text) {
    return text
      .replace(/<\/?[a-zA-Z][^>]*>/g, "")
      .replace(/!\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/\[([^\]]+)\]\([^)]*\)/g, "$1");
  }

  function inline(text) {
    const nodes = [];
    const plain = readable(text);
    const bold = /\*\*([^*]+)\*\*/g;
    let last = 0;
    let m;
    while ((m = bold.exec(plain)) !== null) {
      if (m.index > last) nodes.push(document.createTextNode(plain.slice(last, m.index)));
      const b = document.createElement("strong");
      b.textContent = m[1];
      nodes.push(b);
      last = bold.lastIndex;
    }
    if (last < plain.length) nodes.push(document.createTextNode(plain.slice(last)));
    return nodes;
  }

  // The answer's text, with each [S1] marker a link to its source in this turn's list.
  function renderAnswer(el, text, turn) {
    const nodes = [];
    const marker = /\[(S\d+)\]/g;
    let last = 0;
    let m;
    while ((m = marker.exec(text)) !== null) {
      if (m.index > last) nodes.push(...inline(text.slice(last, m.index)));
      const a = document.createElement("a");
      a.className = "cite";
      a.href = `#src-${turn}-${m[1]}`;
      a.title = `Go to source ${m[1]}`;
      a.textContent = `[${m[1]}]`;
      nodes.push(a);
      last = marker.lastIndex;
    }
    if (last < text.length) nodes.push(...inline(text.slice(last)));
    el.replaceChildren(...nodes);
  }

  function renderSources(view, sources, turn) {
    const items = sources.map((s) => {
      const li = document.createElement("li");
      li.id = `src-${turn}-${s.id}`;
      li.tabIndex = -1;
      const sid = document.createElement("span");
      sid.className = "sid";
      sid.textContent = s.id; // outside the link: its name is the title alone
      li.append(sid, " ");
      const a = document.createElement("a");
      a.textContent = s.title || s.doc_id;
      a.dir = "auto";
      if (isHttp(s.source_uri)) {
        a.href = s.source_uri;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
      } else {
        a.href = `#${li.id}`; // no public address: the link keeps its place in the answer
      }
      li.append(a);
      if (s.source_uri && !isHttp(s.source_uri)) {
        const where = document.createElement("span");
        where.className = "where";
        where.textContent = s.source_uri;
        li.append(" ", where);
      }
      const snippet = document.createElement("p");
      snippet.className = "snippet";
      snippet.dir = "auto";
      snippet.replaceChildren(...inline(s.snippet));
      li.append(snippet);
      return li;
    });
    view.sourceList.replaceChildren(...items);
    view.sourcesBox.hidden = items.length === 0;
  }

  function badge(view, text, kind) {
    const b = document.createElement("span");
    b.className = `badge ${kind}`;
    b.textContent = text;
    view.badges.append(b);
  }

  function renderOutcome(view, info, outcome) {
    view.badges.replaceChildren();
    if (outcome.stopped) badge(view, "Stopped", "warn");
    if (outcome.error) badge(view, `Error: ${outcome.error}`, "bad");
    if (!info) return;
    const uncited = !info.citations || info.citations.length === 0;
    if (info.abstained) {
      view.turn.classList.add("abstained");
      badge(view, "Not answered from the sources", "warn");
    } else if (uncited) {
      view.turn.classList.add("uncited");
      badge(view, "No source cited", "warn");
    }
    if (typeof info.confidence === "number") {
      const pct = Math.round(info.confidence * 100);
      badge(view, `Confidence: ${pct}%`, info.confidence >= 0.5 ? "good" : "warn");
    }
    if (info.abstained || uncited) {
      // no claim to ground: a groundedness score would mislead
    } else if (info.groundedness === null || info.groundedness === undefined) {
      badge(view, "Groundedness: not scored", "neutral");
    } else {
      const pct = Math.round(info.groundedness * 100);
      const kind = info.groundedness >= 0.75 ? "good" : info.groundedness >= 0.5 ? "warn" : "bad";
      badge(view, `Grounded: ${pct}%`, kind);
    }
    if (info.degraded && info.degraded.length) {
      view.turn.classList.add("degraded");
      badge(view, `Degraded: ${info.degraded.join(", ")}`, "warn");
    }
    if (info.cache === "hit") badge(view, "From cache", "neutral");
  }

  function newTurn(question) {
    turnCount += 1;
    const node = template.content.firstElementChild.cloneNode(true);
    const view = {
      n: turnCount,
      turn: node,
      answer: node.querySelector(".a"),
      badges: node.querySelector(".badges"),
      sourcesBox: node.querySelector(".sources-box"),
      sourceList: node.querySelector(".sources"),
      feedback: node.querySelector(".feedback"),
    };
    node.querySelector(".q").textContent = question;
    view.sourceList.setAttribute("aria-label", "Sources");
    log.append(node);
    return view;
  }

  function setBusy(busy) {
    stopButton.classList.toggle("idle", !busy);
    askButton.disabled = busy;
    log.setAttribute("aria-busy", busy ? "true" : "false");
    if (!busy && document.activeElement === document.body) questionBox.focus();
  }

  async function errorText(resp) {
    try {
      const body = await resp.json();
      if (body.error && body.error.message) return body.error.message;
      if (body.detail) return body.detail;
    } catch {
      // not JSON: the status says it
    }
    return `HTTP ${resp.status}`;
  }

  // The `data:` payloads of a server-sent event stream, in order.
  async function* sseData(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data) yield data;
      }
    }
  }

  function setUpFeedback(view, info, question, answer, key) {
    const up = view.feedback.querySelector(".up");
    const down = view.feedback.querySelector(".down");
    const note = view.feedback.querySelector(".feedback-status");
    const send = async (rating) => {
      up.setAttribute("aria-pressed", String(rating === "up"));
      down.setAttribute("aria-pressed", String(rating === "down"));
      note.textContent = "Sending…";
      try {
        const resp = await fetch("/v1/feedback", {
          method: "POST",
          headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
          body: JSON.stringify({ request_id: info.request_id, rating, question, answer }),
        });
        note.textContent = resp.ok ? "Thanks: recorded." : `Not recorded: ${await errorText(resp)}`;
      } catch (err) {
        note.textContent = `Not recorded: ${err.message}`;
      }
    };
    up.addEventListener("click", () => send("up"));
    down.addEventListener("click", () => send("down"));
    view.feedback.hidden = false;
  }

  async function ask() {
    if (controller) return;
    const question = questionBox.value.trim();
    const key = keyBox.value.trim();
    if (!key) {
      say("Paste an API key first.");
      keyBox.focus();
      return;
    }
    if (!question) {
      say("Type a question first.");
      questionBox.focus();
      return;
    }
    sessionStorage.setItem(KEY_ITEM, key);
    const view = newTurn(question);
    history.push({ role: "user", content: question });
    questionBox.value = "";
    controller = new AbortController();
    setBusy(true);
    say("Answering…");
    let text = "";
    let info = null;
    const outcome = { stopped: false, error: null };
    try {
      const resp = await fetch("/v1/chat/completions", {
        method: "POST",
        headers: {
          Authorization: `Bearer ${key}`,
          "Content-Type": "application/json",
          Accept: "text/event-stream",
        },
        body: JSON.stringify({
          model: "ragline",
          stream: true,
          stream_options: { include_usage: true },
          messages: history.slice(-MAX_MESSAGES),
        }),
        signal: controller.signal,
      });
      if (!resp.ok) {
        outcome.error = await errorText(resp);
      } else {
        for await (const data of sseData(resp.body)) {
          if (data === "[DONE]") break;
          const chunk = JSON.parse(data);
          if (chunk.error) {
            outcome.error = chunk.error.message;
            break;
          }
          if (chunk.sources) renderSources(view, chunk.sources, view.n);
          const choice = chunk.choices && chunk.choices[0];
          if (choice && choice.delta && choice.delta.content) {
            text += choice.delta.content;
            renderAnswer(view.answer, text, view.n);
          }
          if (chunk.ragline) {
            info = chunk.ragline;
            if (info.sources) renderSources(view, info.sources, view.n);
          }
        }
      }
    } catch (err) {
      if (err.name === "AbortError") outcome.stopped = true;
      else outcome.error = err.message;
    } finally {
      controller = null;
      setBusy(false);
    }
    renderOutcome(view, info, outcome);
    if (text) history.push({ role: "assistant", content: text });
    if (info && !outcome.stopped && !outcome.error) {
      setUpFeedback(view, info, question, text, key);
      say("Answered.");
    } else {
      say(outcome.stopped ? "Stopped." : `Failed: ${outcome.error || "no answer"}`);
    }
  }
})();
