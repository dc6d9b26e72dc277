// Small charts drawn as inline SVG from the overview's JSON: no chart library, no inline script.
import { clock, h, s, when } from "./dom.js";

const W = 600;
const H = 140;
const PAD = { top: 10, right: 8, bottom: 20, left: 40 };

function niceMax(value) {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return value;
}

// The value axis: 0, the maximum and the round steps between (quarters when they are whole
// numbers, else halves), each with a grid line; the time axis: its two ends and its middle.
function valueTicks(max) {
  const parts = max % 4 === 0 ? 4 : max % 2 === 0 ? 2 : 1;
  return Array.from({ length: parts + 1 }, (_, i) => (max * i) / parts);
}

function frame(max, labelFirst, labelLast, labelMiddle) {
  const y = (v) => PAD.top + (H - PAD.top - PAD.bottom) * (1 - v / max);
  const ticks = valueTicks(max).flatMap((v) => [
    v ? s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "grid" }) : null,
    s("text", { x: PAD.left - 4, y: y(v) + (v ? 4 : 0), class: "tick end", "data-testid": "value-tick" }, String(v)),
  ]).filter(Boolean);
  return [
    s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(0), y2: y(0), class: "axis" }),
    ...ticks,
    s("text", { x: PAD.left, y: H - 4, class: "tick", "data-testid": "time-tick" }, labelFirst),
    labelMiddle ? s("text", { x: PAD.left + (W - PAD.left - PAD.right) / 2, y: H - 4, class: "tick middle", "data-testid": "time-tick" }, labelMiddle) : null,
    s("text", { x: W - PAD.right, y: H - 4, class: "tick end", "data-testid": "time-tick" }, labelLast),
  ].filter(Boolean);
}

function chart(label, testid, children) {
  return s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, class: "chart", "data-testid": testid },
    s("title", {}, label), ...children);
}

/** Stacked bars per minute: ``series`` = [{key, label, cls}], ``rows`` = [{at, [key]: n}]. */
export function stackedBars(rows, series, { label, testid, first, last, middle }) {
  const totals = rows.map((row) => series.reduce((sum, { key }) => sum + (row[key] || 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const step = plotW / Math.max(rows.length, 1);
  const bars = [];
  rows.forEach((row, i) => {
    let base = 0;
    for (const { key, label: name, cls } of series) {
      const value = row[key] || 0;
      if (!value) continue;
      const height = (plotH * value) / max;
      const y = PAD.top + plotH * (1 - base / max) - height;
      bars.push(s("rect", { x: PAD.left + i * step + 1, y, width: Math.max(step - 2, 1), height, class: cls },
        s("title", {}, `${when(row.at)}: ${value} ${name}`)));
      base += value;
    }
  });
  return chart(label, testid, [...frame(max, first, last, middle), ...bars]);
}

/** Lines over time: ``series`` = [{key, cls}], ``rows`` = [{at, [key]: n}] oldest first. */
export function lines(rows, series, { label, testid, empty }) {
  if (rows.length < 2) return h("p", { class: "muted chart-empty", "data-testid": testid }, empty);
  const t0 = Date.parse(rows[0].at);
  const t1 = Date.parse(rows[rows.length - 1].at);
  const max = niceMax(Math.max(0, ...rows.flatMap((row) => series.map(({ key }) => row[key] || 0))));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const x = (at) => PAD.left + (plotW * (Date.parse(at) - t0)) / Math.max(t1 - t0, 1);
  const y = (v) => PAD.top + plotH * (1 - v / max);
  const paths = series.map(({ key, cls }) =>
    s("polyline", { class: `series ${cls}`, points: rows.map((row) => `${x(row.at).toFixed(1)},${y(row[key] || 0).toFixed(1)}`).join(" ") }));
  const firstLabel = `${clock(rows[0].at)} UTC`;
  const lastLabel = `${clock(rows[rows.length - 1].at)} UTC`;
  const middleLabel = `${clock(new Date((t0 + t1) / 2).toISOString())} UTC`;
  return chart(label, testid, [...frame(max, firstLabel, lastLabel, middleLabel), ...paths]);
}

/** Horizontal bars for named values (deadline lateness percentiles), in ms, over a scale from 0
 * to a round maximum marked below them. */
export function hbars(items, { label, testid }) {
  const max = niceMax(Math.max(1, ...items.map(({ value }) => value || 0)));
  const rowH = 26;
  const scaleY = items.length * rowH + 18;
  const height = scaleY + 6;
  const labelW = 44;
  const plotW = W - labelW - 90;
  const children = items.flatMap(({ name, value }, i) => {
    const y = 4 + i * rowH;
    const width = value ? Math.max((plotW * value) / max, 2) : 0;
    return [
      s("text", { x: labelW - 6, y: y + 15, class: "tick end strong" }, name),
      s("rect", { x: labelW, y: y + 3, width: plotW, height: 16, class: "track" }),
      s("rect", { x: labelW, y: y + 3, width, height: 16, class: "late" }),
      s("text", { x: labelW + plotW + 8, y: y + 15, class: "tick" }, value === null || value === undefined ? "–" : `${value} ms`),
    ];
  });
  const scale = [
    s("line", { x1: labelW, x2: labelW + plotW, y1: scaleY - 12, y2: scaleY - 12, class: "axis" }),
    s("line", { x1: labelW + plotW / 2, x2: labelW + plotW / 2, y1: 4, y2: scaleY - 12, class: "grid" }),
    s("text", { x: labelW, y: scaleY, class: "tick", "data-testid": "scale-min" }, "0 ms"),
    s("text", { x: labelW + plotW / 2, y: scaleY, class: "tick middle" }, `${max / 2} ms`),
    s("text", { x: labelW + plotW, y: scaleY, class: "tick end", "data-testid": "scale-max" }, `${max} ms`),
  ];
  return s("svg", { viewBox: `0 0 ${W} ${height}`, role: "img", "aria-label": label, class: "chart bars", "data-testid": testid },
    s("title", {}, label), ...children, ...scale);
}
