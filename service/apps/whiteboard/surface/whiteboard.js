// The Whiteboard MiniApp: strokes drawn on a canvas, kept in this instance's own snapshot.
// It sees only its own state through the SDK; it cannot see or touch any other app's.
(function () {
  "use strict";

  const MAX_STROKES = 500;
  const MAX_POINTS = 1000;
  const MIN_STEP = 2; // canvas pixels between recorded points
  const WIDTH = 3;
  const byTestId = (id) => document.querySelector(`[data-testid="${id}"]`);
  const canvas = byTestId("canvas");
  const ink = canvas.getContext("2d");

  let strokes = [];
  let revision = 0;
  let writable = false;
  let color = "#1f2937";
  let drawing = null;
  let unsaved = []; // drawn, on their way into the snapshot
  let queue = Promise.resolve();

  const counted = (n) => `${n} stroke${n === 1 ? "" : "s"}`;

  function say(text) {
    byTestId("status").textContent = text;
  }

  function quietly(what) {
    return (error) => {
      say(`${what}: ${error && error.message}`);
      console.debug(`whiteboard: ${what}`, error && error.body);
    };
  }

  function paint(stroke) {
    const [first, ...rest] = stroke.points;
    ink.strokeStyle = stroke.color;
    ink.lineWidth = stroke.width;
    ink.lineCap = "round";
    ink.lineJoin = "round";
    ink.beginPath();
    ink.moveTo(first[0], first[1]);
    for (const [x, y] of rest.length ? rest : [first]) ink.lineTo(x, y);
    ink.stroke();
  }

  function redraw() {
    ink.clearRect(0, 0, canvas.width, canvas.height);
    for (const stroke of [...strokes, ...unsaved]) paint(stroke);
    if (drawing) paint(drawing);
  }

  async function load() {
    const state = await window.lineup.state.get();
    strokes = Array.isArray(state.data.strokes) ? state.data.strokes : [];
    revision = state.revision;
    writable = !state.readonly;
    redraw();
    say(writable ? counted(strokes.length) : "Read only");
  }

  // Compare-and-set against our revision; on a conflict, reload and apply the change again.
  async function commit(change) {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const next = change(strokes);
      try {
        const saved = await window.lineup.state.save({ strokes: next }, revision);
        strokes = next;
        revision = saved.revision;
        say(counted(strokes.length));
        return;
      } catch (error) {
        if (error.error !== "revision_conflict") throw error;
        await load();
      }
    }
  }

  function enqueue(change, failure, stroke) {
    queue = queue
      .then(() => commit(change))
      .catch((error) => quietly(error.error === "state_too_large" ? "The board is full" : failure)(error))
      .finally(() => {
        unsaved = unsaved.filter((item) => item !== stroke);
        redraw();
      });
  }

  function point(event) {
    const box = canvas.getBoundingClientRect();
    const x = ((event.clientX - box.left) * canvas.width) / box.width;
    const y = ((event.clientY - box.top) * canvas.height) / box.height;
    return [Math.round(x), Math.round(y)];
  }

  canvas.addEventListener("pointerdown", (event) => {
    if (!writable) return;
    canvas.setPointerCapture(event.pointerId);
    drawing = { color, width: WIDTH, points: [point(event)] };
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!drawing || drawing.points.length >= MAX_POINTS) return;
    const [x, y] = point(event);
    const [lastX, lastY] = drawing.points[drawing.points.length - 1];
    if (Math.hypot(x - lastX, y - lastY) < MIN_STEP) return;
    drawing.points.push([x, y]);
    redraw();
  });
  const finish = () => {
    if (!drawing) return;
    const stroke = drawing;
    drawing = null;
    if (strokes.length + unsaved.length >= MAX_STROKES) {
      say("The board is full");
      redraw();
      return;
    }
    unsaved = [...unsaved, stroke];
    redraw();
    enqueue((current) => [...current, stroke], "Could not save the stroke", stroke);
  };
  canvas.addEventListener("pointerup", finish);
  canvas.addEventListener("pointercancel", finish);

  for (const swatch of document.querySelectorAll(".swatch")) {
    swatch.addEventListener("click", () => {
      color = swatch.dataset.color;
      for (const other of document.querySelectorAll(".swatch")) {
        other.setAttribute("aria-pressed", String(other === swatch));
      }
    });
  }
  byTestId("clear").addEventListener("click", () => {
    if (writable) enqueue(() => [], "Could not clear");
  });
  byTestId("close").addEventListener("click", () => {
    window.lineup.navigation.close().catch(quietly("Could not close"));
  });

  load().catch(quietly("Could not load"));
})();
