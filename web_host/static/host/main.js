// The host page: rebuilds itself from GET …/workspace and replays the conversation's event stream
// from its start, then follows it.

import { hostApi } from "./api.js";
import { Bridge } from "./bridge.js";
import { PeriodWatch } from "./ending.js";
import { InteractPanel, millis } from "./interact.js";
import { watchSurface } from "./surface.js";
import { WorkspaceView } from "./workspace.js";

const RECONNECT_MS = 3000;
const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);

function conversationFromUrl() {
  const value = new URLSearchParams(window.location.search).get("conversation_id");
  return value && value.length <= 255 ? value : null;
}

function parse(data) {
  try {
    return JSON.parse(data);
  } catch {
    return null;
  }
}

function main() {
  if (window.location.hash.startsWith("#token=")) {
    // A sign-in link opened while already signed in: keep the token out of the address bar.
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  const conversationId = conversationFromUrl();
  if (!conversationId) {
    byTestId("choose-conversation").hidden = false;
    byTestId("connection").dataset.state = "idle";
    byTestId("connection").textContent = "choose a conversation";
    byTestId("conversation-id").textContent = "none";
    return;
  }
  byTestId("conversation-id").textContent = conversationId;
  byTestId("layout").hidden = false;

  const api = hostApi(conversationId);
  const bridge = new Bridge(byTestId("workspace"));
  const workspace = new WorkspaceView(byTestId("workspace"), { api, bridge });
  const interact = new InteractPanel(byTestId("interact"), {
    onAnswer: (toolCallId, answer) => act(api.answer(toolCallId, answer)),
    onAnswerForms: (toolCallId, answers) => act(api.answerForms(toolCallId, answers)),
  });
  const watch = new PeriodWatch({
    announcer: byTestId("announcer"),
    toggle: byTestId("notify-toggle"),
    onNotice: (text) => interact.showNotice(text),
  });
  document.addEventListener("visibilitychange", () => watch.seen());
  const connection = byTestId("connection");
  let firstLoad = true;

  function setConnection(state, text) {
    connection.dataset.state = state;
    connection.textContent = text;
  }

  function showError(error) {
    if (error && error.status === 401) {
      interact.showNotice("Your session has ended. Reload the page to sign in again.");
      return;
    }
    const code = error && error.body ? error.body.error : "error";
    interact.showNotice(`${code}: ${error && error.message}`);
  }

  function act(promise) {
    return promise.then(() => {
      interact.showNotice("");
      refresh();
    }, showError);
  }

  async function firstLoadDone(state) {
    const foreground = state.foreground;
    const focusing = state.focusing_operation;
    if (focusing && foreground !== "interact" && focusing.instance_id === foreground.instance_id) {
      // The page came back while the period runs: a reload, which never interrupts.
      await api.surfaceEvent(foreground.instance_id, "reloaded");
    }
  }

  async function load() {
    const state = await api.workspace();
    watch.follow(state, Date.now());
    interact.renderPending(state.pending_interactions);
    interact.setForeground(state.foreground === "interact");
    await workspace.show(state);
    if (firstLoad) {
      firstLoad = false;
      firstLoadDone(state).catch(showError);
    }
  }

  let running = false;
  let dirty = false;
  async function refresh() {
    dirty = true;
    if (running) return;
    running = true;
    try {
      while (dirty) {
        dirty = false;
        try {
          await load();
        } catch (error) {
          showError(error);
        }
      }
    } finally {
      running = false;
    }
  }

  // Messages older than the event stream keeps (it replays about a day); the rest come with it.
  async function loadMessages() {
    const { messages } = await api.messages();
    for (const message of messages) interact.addMessage(message, { at: millis(message.created_at) });
  }

  // The stream from its first event (then from the last one seen): every item it carried is placed
  // at its event id, so the timeline is in commit order, live and after a reload alike.
  let lastSeq = 0;
  function seqOf(event) {
    const seq = Number(event.lastEventId);
    if (Number.isSafeInteger(seq) && seq > lastSeq) lastSeq = seq;
    return Number.isSafeInteger(seq) ? seq : undefined;
  }

  function connect() {
    const source = new EventSource(`${api.eventsUrl}?after=${lastSeq}`);
    source.addEventListener("open", () => {
      setConnection("live", "live");
      refresh();
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) {
        setConnection("reconnecting", "reconnecting…");
        return;
      }
      // Refused (not a network error): find out why, then try again unless signed out.
      setConnection("offline", "offline");
      api.workspace().then(() => setTimeout(connect, RECONNECT_MS), showError);
    });
    source.addEventListener("session_ended", () => {
      // Signed out here or elsewhere, or the session expired: nothing more comes for this page.
      source.close();
      setConnection("offline", "signed out");
      interact.showNotice("Your session has ended. Reload the page to sign in again.");
    });
    source.addEventListener("message", (event) => {
      const message = parse(event.data);
      const seq = seqOf(event);
      if (message) interact.addMessage(message, { seq });
    });
    source.addEventListener("operation", (event) => {
      const operation = parse(event.data);
      const seq = seqOf(event);
      if (operation) {
        interact.addOperation(operation, seq);
        watch.operation(operation);
      }
      refresh();
    });
    source.addEventListener("workspace", (event) => {
      seqOf(event);
      refresh();
    });
    source.addEventListener("interaction", (event) => {
      seqOf(event);
      refresh();
    });
  }

  byTestId("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = byTestId("message-input");
    const text = input.value.trim();
    if (!text) return;
    api.postMessage(text).then((message) => {
      input.value = "";
      interact.showNotice("");
      interact.addMessage(message);
      interact.scrollToEnd();
    }, showError);
  });
  byTestId("back-to-interact").addEventListener("click", () => act(api.foreground("interact")));
  byTestId("open-whiteboard").addEventListener("click", () =>
    act(api.foreground({ app_scope: "whiteboard" })),
  );
  watchSurface((event) => {
    const instanceId = workspace.foregroundInstanceId;
    if (instanceId) api.surfaceEvent(instanceId, event).catch(() => {});
  });

  refresh();
  loadMessages()
    .catch(showError)
    .finally(connect);
}

main();
