// Surface events: dimming, locking and reloading are reported to the Runtime and never interrupt.

export function watchSurface(report) {
  document.addEventListener("visibilitychange", () => {
    report(document.visibilityState === "hidden" ? "dimmed" : "undimmed");
  });
  // Only a page kept for going back (bfcache) is "locked"; an unloading page says nothing, and
  // the next load of the host page reports "reloaded".
  window.addEventListener("pagehide", (event) => {
    if (event.persisted) report("locked");
  });
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) report("unlocked");
  });
  document.addEventListener("freeze", () => report("locked"));
  document.addEventListener("resume", () => report("unlocked"));
}
