// lockgrid view: polls the indexing progress, then scrubs through ticks.
// Every figure comes from the JSON endpoints documented in the host crate.
"use strict";

const $ = (id) => document.getElementById(id);
const WINDOW = 100; // ticks listed on each side of the current one
let last = 0;
let current = 0;
let observer = null; // chosen observer id, or null for the lowest live one
let player = null;
let request = 0; // the newest tick request; older replies are dropped
let listed = { from: 1, to: 0 };

async function getJson(url) {
  const reply = await fetch(url);
  const body = await reply.json();
  if (!reply.ok) {
    const error = new Error(body.error || reply.statusText);
    error.status = reply.status;
    throw error;
  }
  return body;
}

async function poll() {
  let p;
  try {
    p = await getJson("/api/progress");
  } catch (e) {
    $("phase").textContent = "cannot reach the server: " + e.message;
    setTimeout(poll, 1000);
    return;
  }
  $("source").textContent = p.source;
  if (p.state === "indexing") {
    const share = p.total > 0 ? p.done / p.total : 0;
    // Steps share the bar equally.
    $("progress").value = ((p.step - 1) + share) / p.steps;
    $("phase").textContent = `step ${p.step} of ${p.steps}: ${p.phase}` +
      (p.total > 0 ? ` (${p.done} of ${p.total} ${p.unit})` : "") + "…";
    setTimeout(poll, 200);
    return;
  }
  if (p.state === "failed") {
    $("phase").textContent = "indexing failed";
    $("failure").hidden = false;
    $("failure").textContent = p.error;
    return;
  }
  last = p.last_tick;
  $("loading").hidden = true;
  $("main").hidden = false;
  $("last").textContent = last;
  $("tick-range").max = last;
  $("tick").max = last;
  $("tick-range").min = last > 0 ? 1 : 0;
  $("tick").min = 0;
  show(last > 0 ? 1 : 0);
}

async function show(t) {
  t = Math.max(0, Math.min(last, t));
  current = t;
  const mine = ++request;
  $("tick-range").value = t;
  $("tick").value = t;
  let data;
  let note = "";
  try {
    data = await getJson(tickUrl("/api/tick", t, observer));
  } catch (e) {
    if (observer !== null && e.status === 404) {
      note = `observer ${observer} at tick ${t}: ${e.message}`;
      try {
        data = await getJson(tickUrl("/api/tick", t, null));
      } catch (e2) {
        note = e2.message;
      }
    } else {
      note = e.message;
    }
  }
  if (mine !== request) return;
  $("note").hidden = note === "";
  $("note").textContent = note;
  if (!data) return;
  $("digest").textContent = data.digest;
  fillObservers(data.observers, data.observer);
  $("picture").src = tickUrl("/api/tick.svg", t, data.observer);
  const events = $("events");
  events.replaceChildren(...data.events.map(line));
  events.dataset.tick = data.tick;
  events.dataset.observer = data.observer === null ? "" : data.observer;
  $("events-tick").textContent = data.tick;
  $("events-observer").textContent = data.observer === null ? "no observer" : "observer " + data.observer;
  $("rejected").replaceChildren(
    ...data.rejected.map((r) => line(`${r.command} ${r.entity}: ${r.reason}`)));
  await timeline(t);
}

function line(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}

function tickUrl(path, t, id) {
  return `${path}?t=${t}` + (id === null || id === undefined ? "" : `&observer=${id}`);
}

function fillObservers(ids, chosen) {
  const select = $("observer");
  const wanted = ids;
  const have = Array.from(select.options, (o) => o.value);
  if (wanted.join() !== have.join()) {
    select.replaceChildren(...ids.map((id) => {
      const o = document.createElement("option");
      o.value = id;
      o.textContent = id;
      return o;
    }));
  }
  select.value = chosen === null ? "" : chosen;
}

async function timeline(t) {
  if (last === 0) return;
  if (t < listed.from || t > listed.to) {
    const from = Math.max(1, t - WINDOW);
    const page = await getJson(`/api/ticks?from=${from}&to=${t + WINDOW}`);
    listed = { from: page.from, to: page.to };
    $("timeline").tBodies[0].replaceChildren(...page.ticks.map((k) => {
      const row = document.createElement("tr");
      row.dataset.tick = k.tick;
      for (const v of [k.tick, k.digest, k.view_events, k.rejected]) {
        const cell = document.createElement("td");
        cell.textContent = v;
        row.appendChild(cell);
      }
      row.addEventListener("click", () => { pause(); show(k.tick); });
      return row;
    }));
  }
  for (const row of $("timeline").tBodies[0].rows) {
    const here = Number(row.dataset.tick) === t;
    row.classList.toggle("current", here);
    if (here) row.scrollIntoView({ block: "nearest" });
  }
}

function pause() {
  if (player !== null) clearInterval(player);
  player = null;
  $("play").textContent = "play";
}

function play() {
  if (player !== null) return pause();
  if (current >= last) show(last > 0 ? 1 : 0);
  $("play").textContent = "pause";
  player = setInterval(() => {
    if (current >= last) return pause();
    show(current + 1);
  }, 250);
}

$("play").addEventListener("click", play);
$("prev").addEventListener("click", () => { pause(); show(current - 1); });
$("next").addEventListener("click", () => { pause(); show(current + 1); });
$("tick-range").addEventListener("input", (e) => { pause(); show(Number(e.target.value)); });
$("tick").addEventListener("change", (e) => { pause(); show(Number(e.target.value)); });
$("observer").addEventListener("change", (e) => {
  observer = e.target.value === "" ? null : e.target.value;
  show(current);
});
document.addEventListener("keydown", (e) => {
  if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
  if (e.key === "ArrowLeft") { pause(); show(current - 1); }
  if (e.key === "ArrowRight") { pause(); show(current + 1); }
  if (e.key === " ") { e.preventDefault(); play(); }
});
poll();
