// Building the page from data without ever parsing it as HTML, and the formats the console shows.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(element, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

export function replace(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

// ---- formats

const pad = (n) => String(n).padStart(2, "0");

/** "2026-12-01 14:03:07 UTC": the date, the time to the second (24 h) and the zone, everywhere. */
export function when(iso) {
  if (!iso) return "–";
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  const date = `${at.getUTCFullYear()}-${pad(at.getUTCMonth() + 1)}-${pad(at.getUTCDate())}`;
  return `${date} ${clock(iso, true)} UTC`;
}

/** "14:03" (or "14:03:07" with seconds), 24 h, UTC: the charts' axes and the header. */
export function clock(iso, seconds = false) {
  const at = new Date(iso);
  const time = `${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())}`;
  return seconds ? `${time}:${pad(at.getUTCSeconds())}` : time;
}

/** "1 deadline", "3 deadlines". */
export const plural = (n, word) => `${count(n)} ${word}${Number(n) === 1 ? "" : "s"}`;

/** A <time> element with the exact RFC 3339 time as its title. */
export function timeEl(iso) {
  return h("time", { datetime: iso || undefined, title: iso || undefined }, when(iso));
}

/** Seconds as "0.4 s", "42 s", "3 min 5 s", "2 h 4 min". */
export function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 10) return `${Math.round(seconds * 10) / 10} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function ms(value) {
  if (value === null || value === undefined) return "–";
  return value < 10000 ? `${value} ms` : `${Math.round(value / 100) / 10} s`;
}

export const shortId = (id) => (id ? id.slice(0, 8) : "–");

/** Each of `ids` cut to one length, the shortest (at least 8 characters) at which no two of them
 * read the same, as `ops … list` cuts them: the ids are time-ordered, so rows of the same minute
 * share their first 8 hex digits. A cut never ends on a hyphen. Returns id → what to show. */
export function shortIds(ids, least = 8) {
  const distinct = [...new Set(ids.filter(Boolean))];
  const longest = Math.max(0, ...distinct.map((id) => id.length));
  let length = least;
  while (length < longest && new Set(distinct.map((id) => id.slice(0, length))).size < distinct.length) length += 1;
  const cut = new Map(distinct.map((id) => {
    const short = id.slice(0, length);
    return [id, short.endsWith("-") ? short.slice(0, -1) : short];
  }));
  return (id) => (id ? cut.get(id) || shortId(id) : "–");
}

export const count = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));

/** The trace page of a tool call, in its conversation when the link knows it (a tool_call_id is
 * unique per conversation); none for "." or "..", which a browser resolves out of any path, even
 * percent-encoded (only ids recorded before the id rule: `ops trace` reaches them). */
export function traceHref(toolCallId, conversationId) {
  if (!toolCallId || toolCallId === "." || toolCallId === "..") return undefined;
  const path = `/ops/trace/${encodeURIComponent(toolCallId)}`;
  return conversationId ? `${path}?conversation_id=${encodeURIComponent(conversationId)}` : path;
}

export function badge(status) {
  return h("span", { class: `badge ${status}` }, status);
}

export function notice(text, kind = "error") {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}
