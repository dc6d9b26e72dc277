// The console's one page: draws the view the address names, follows links inside the console
// without reloading, and refreshes the view every few seconds while the tab is visible.
import { ApiError, ops } from "./api.js";
import { clock, h, notice, replace, traceHref } from "./dom.js";
import { operationsView } from "./operations.js";
import { outboxView } from "./outbox.js";
import { overviewView } from "./overview.js";
import { toolCallsView } from "./toolcalls.js";
import { traceView } from "./trace.js";

const POLL_MS = 3000;
const main = document.getElementById("view");
const live = document.querySelector('[data-testid="live"]');

const ROUTES = [
  { pattern: /^\/ops\/?$/, view: overviewView, nav: "overview" },
  { pattern: /^\/ops\/outbox\/?$/, view: outboxView, nav: "outbox" },
  { pattern: /^\/ops\/operations\/?$/, view: operationsView, nav: "operations" },
  { pattern: /^\/ops\/tool-calls\/?$/, view: toolCallsView, nav: "tool-calls" },
  { pattern: /^\/ops\/trace\/(.+)$/, view: traceView, nav: null, params: (m) => ({ toolCallId: decoded(m[1]) }) },
];

let active = null; // {view, timer, stopped}

/** A path segment as its text; null when it is not valid percent-encoding (the trace says so). */
function decoded(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

const flag = document.querySelector('[data-testid="delivery-flag"]');

/** On every page: whether delivery is paused or the Agent's endpoint is failing (its circuit open). */
async function flagDelivery() {
  const delivery = await ops.delivery();
  const held = delivery.paused ? "Delivery paused" : delivery.circuit !== "closed" ? "Agent endpoint failing: circuit open" : "";
  flag.hidden = !held;
  flag.textContent = held;
  flag.dataset.paused = String(delivery.paused);
  flag.dataset.circuit = delivery.circuit;
}

function setLive(state, text) {
  live.dataset.state = state;
  live.textContent = text;
}

async function tick(current) {
  if (current.stopped || current.busy) return;
  current.busy = true;
  if (!document.hidden) {
    try {
      await Promise.all([current.view.refresh(), flagDelivery()]);
      setLive("live", `live · updated ${clock(new Date().toISOString(), true)} UTC`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        window.location.reload(); // the session has ended: the page answers with the sign-in form
        return;
      }
      setLive("offline", `offline · ${error.message}`);
    }
  }
  current.busy = false;
  if (!current.stopped) current.timer = setTimeout(() => tick(current), POLL_MS);
}

function render() {
  if (active) {
    active.stopped = true;
    clearTimeout(active.timer);
  }
  const path = window.location.pathname;
  const route = ROUTES.map((r) => ({ r, m: path.match(r.pattern) })).find(({ m }) => m);
  const search = window.location.search;
  let navKey = route ? route.r.nav : null;
  if (navKey === "outbox" && new URLSearchParams(search).get("status") === "dead") navKey = "dead";
  for (const link of document.querySelectorAll(".nav a")) {
    if (link.dataset.view === navKey) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (!route) {
    replace(main, h("h1", {}, "Not found"), notice("No such page in the console.", "info"));
    return;
  }
  const view = route.r.view({ params: route.r.params ? route.r.params(route.m) : {}, search, navigate });
  document.title = `${view.title} · Lineup ops`;
  replace(main, view.element);
  active = { view, timer: null, stopped: false, busy: false };
  tick(active);
}

export function navigate(url) {
  window.history.pushState(null, "", url);
  render();
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-nav][href]");
  if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(link.href);
  if (url.origin !== window.location.origin || !url.pathname.startsWith("/ops")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});

document.querySelector('[data-testid="find-trace"]').addEventListener("submit", (event) => {
  event.preventDefault();
  const id = event.target.elements.tool_call_id.value.trim();
  const href = traceHref(id);
  if (href) navigate(href);
});

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && active) {
    clearTimeout(active.timer);
    tick(active);
  }
});

window.addEventListener("popstate", render);
render();
