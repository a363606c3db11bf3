// One Plotly chart that stays on the page between reruns (app_pages/shared/plot.py).
//
// st.plotly_chart gives a chart a new identity whenever its figure changes, so every slider move unmounts it and
// draws it again from nothing. Here the chart's <div> is kept and Plotly.react updates it in place, and a figure
// that did not change is not touched at all. Plotly itself is plotly.min.js from the plotly Python package, served
// from a declared component folder (plot.py) and loaded once per page as a classic script (it sets window.Plotly).

let library = null;

function plotlyLibrary(source) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (library === null) {
    // `source` is relative to the app's root; Streamlit's own scripts live in <root>/static/js/.
    const own = document.querySelector('script[src*="static/js/"]');
    const url = new URL(source, own ? new URL("../../", own.src) : document.baseURI).href;
    library = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = () => {
        if (window.Plotly && typeof window.Plotly.react === "function") resolve(window.Plotly);
        else reject(new Error("the file loaded is not Plotly"));
      };
      script.onerror = () => reject(new Error("Plotly did not load"));
      document.head.appendChild(script);
    });
    library.catch(() => {
      library = null; // a later chart may try again
    });
  }
  return library;
}

// Text and hover colours follow the page (light or dark theme); backgrounds stay transparent (the template).
function followPage(layout, element) {
  const style = getComputedStyle(element);
  const text = style.color;
  layout.font = Object.assign({ family: style.fontFamily }, layout.font || {});
  layout.title = Object.assign({}, layout.title || {});
  layout.title.font = Object.assign({ color: text }, layout.title.font || {});
  layout.legend = Object.assign({}, layout.legend || {});
  layout.legend.font = Object.assign({ color: text }, layout.legend.font || {});
  let background = "";
  for (let node = element; node && !background; node = node.parentElement) {
    const colour = getComputedStyle(node).backgroundColor;
    if (colour && colour !== "transparent" && !colour.endsWith(", 0)")) background = colour;
  }
  layout.hoverlabel = Object.assign({ bgcolor: background || "#fff", font: { color: text } }, layout.hoverlabel || {});
}

// Below this width a chart is narrow: a trace's meta.narrow_text replaces its labels (fewer, so they never pile up),
// its meta.narrow_size its marker sizes (smaller, so bubbles leave the names readable),
// the layout's meta.narrow_annotation_text its annotations' (shorter), and long titles are broken into lines
// (fitTitles).
const NARROW_PX = 600;

// Plotly does not wrap titles: on a narrow chart, a long title or x-axis title is broken into lines at spaces.
function wrapped(text, maxChars) {
  if (typeof text !== "string" || text.length <= maxChars || text.includes("<br>")) return [text, 1];
  const lines = [""];
  for (const word of text.split(" ")) {
    const line = lines[lines.length - 1];
    if (line && `${line} ${word}`.length > maxChars) lines.push(word);
    else lines[lines.length - 1] = line ? `${line} ${word}` : word;
  }
  return [lines.join("<br>"), lines.length];
}

function fitTitles(layout, width) {
  const title = typeof layout.title === "string" ? { text: layout.title } : layout.title || {};
  const [text, lines] = wrapped(title.text, Math.floor((width - 20) / 8.5)); // 16 px title: about 8.5 px a character
  layout.title = Object.assign(title, { text });
  if (lines > 1) {
    layout.margin = Object.assign({}, layout.margin, { t: ((layout.margin || {}).t ?? 50) + 19 * (lines - 1) + 10 });
    // held at the top of the chart: Plotly centres a title in the top margin, and a taller margin alone left its last
    // line on a label that sits above the plot (a capacity line's)
    Object.assign(layout.title, { yref: "container", y: 1, yanchor: "top", pad: Object.assign({}, layout.title.pad, { t: 22 }) });
  }
  for (const key of Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k))) {
    const axis = layout[key];
    const axisTitle = typeof axis.title === "string" ? { text: axis.title } : axis.title;
    if (axisTitle) axis.title = Object.assign(axisTitle, { text: wrapped(axisTitle.text, Math.floor((width - 40) / 7.5))[0] });
  }
}

// The chart's toolbar (Plotly's modebar: 7 buttons, about 200 px) sits at the top right, over the title's line: a
// title that would run under it (a phone, a half-width chart, the presenter view's large type) is moved below it.
const TOOLBAR_PX = 210;

function clearOfToolbar(layout, width, scale) {
  const title = layout.title || {};
  if (typeof title.text !== "string" || !title.text) return;
  const longest = Math.max(...title.text.split("<br>").map((line) => line.length));
  const size = ((title.font || {}).size || 16) * scale;
  if (14 + longest * size * 0.56 <= width - TOOLBAR_PX) return;
  const lines = title.text.split("<br>").length;
  // Plotly lifts a title of several lines by the lines after the first: the padding gives them back
  // the toolbar is about 28 px tall, 31 px at the presenter view's type
  const pad = Object.assign({}, title.pad, { t: 40 * scale + (lines - 1) * size * 1.2 });
  Object.assign(title, { yref: "container", y: 1, yanchor: "top", pad });
  const margin = layout.margin || {};
  layout.margin = Object.assign({}, margin, { t: Math.max(margin.t ?? 50, 40 * scale + lines * size * 1.3 + 10) });
}

// The presenter view sets a larger root font (style.PRESENTER_CSS): every font of the figure grows with it.
function scaleFonts(node, scale) {
  if (!node || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node)) {
    if (/font$/i.test(key) && value && typeof value === "object" && typeof value.size === "number") value.size *= scale;
    if (value && typeof value === "object" && key !== "data") scaleFonts(value, scale);
  }
}

// Labels on a scatter chart are spaced in pixels, on the chart as drawn: a text label that overlaps one drawn before
// it (the names run cheapest first) is hidden, at any width, and shown again when a redraw leaves it room.
function declutter(div) {
  const kept = [];
  for (const text of div.querySelectorAll(".scatterlayer .textpoint text")) {
    text.style.display = "";
    if (!text.textContent.trim()) continue;
    const box = text.getBoundingClientRect();
    if (box.width === 0) continue;
    if (kept.some((k) => box.left < k.right + 2 && box.right > k.left - 2 && box.top < k.bottom && box.bottom > k.top)) text.style.display = "none";
    else kept.push(box);
  }
}

// Plotly.react tells a changed data array from an unchanged one by identity, not content: every array of a figure
// parsed from new JSON counts as changed, and the whole chart is computed and drawn again (a base64 array, which
// Plotly writes for numpy data, always counts as changed). An array equal to the one drawn is swapped for it, and a
// base64 array is decoded once and kept while its bytes stay the same, so a figure whose data did not change (a
// marker moved: style.vmarker is a shape, not a trace) is redrawn in a third of the time (bench/latency.py).
const TYPED = { f8: Float64Array, f4: Float32Array, i4: Int32Array, i2: Int16Array, i1: Int8Array, u4: Uint32Array, u2: Uint16Array, u1: Uint8Array };

function decoded(value) {
  const Typed = TYPED[value.dtype];
  if (!Typed || (value.shape !== undefined && String(value.shape).includes(","))) return null; // 1-D numbers only
  const text = atob(value.bdata);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  if (bytes.length % Typed.BYTES_PER_ELEMENT !== 0) return null;
  const array = new Typed(bytes.buffer);
  array.llmgpBdata = value.bdata;
  array.llmgpDtype = value.dtype;
  return array;
}

function samePrimitives(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i] || (typeof a[i] === "object" && a[i] !== null)) return false;
  return true;
}

function keepUnchanged(traces, drawn) {
  traces.forEach((trace, i) => {
    const old = (Array.isArray(drawn) && drawn[i]) || {};
    for (const [key, value] of Object.entries(trace)) {
      if (value && typeof value === "object" && typeof value.bdata === "string") {
        if (old[key] && old[key].llmgpBdata === value.bdata && old[key].llmgpDtype === value.dtype) trace[key] = old[key];
        else trace[key] = decoded(value) || value;
      } else if (samePrimitives(value, old[key])) trace[key] = old[key];
    }
  });
}

// The layout's template (style.py, the same for every chart) is compared by identity too: a new copy of it made every
// redraw a full one.
function keepTemplate(layout, div) {
  if (!layout.template) return;
  const text = JSON.stringify(layout.template);
  if (div.layout && div.layout.template && div.llmgpTemplate === text) layout.template = div.layout.template;
  div.llmgpTemplate = text;
}

function draw(Plotly, div, parentElement, spec, config) {
  const figure = JSON.parse(spec);
  const layout = figure.layout || {};
  const narrow = div.clientWidth > 0 && div.clientWidth < NARROW_PX;
  if (narrow) {
    for (const trace of figure.data || []) {
      if (trace.meta && Array.isArray(trace.meta.narrow_text)) trace.text = trace.meta.narrow_text;
      if (trace.meta && Array.isArray(trace.meta.narrow_size) && trace.marker) trace.marker.size = trace.meta.narrow_size;
    }
    // a layout's short labels (style.capacity_line): annotation index -> text
    for (const [i, text] of Object.entries((layout.meta || {}).narrow_annotation_text || {})) {
      if (layout.annotations && layout.annotations[i]) layout.annotations[i].text = text;
    }
    fitTitles(layout, div.clientWidth);
  }
  // the presenter view's charts read at --llmgp-chart-scale (style.PRESENTER_CSS: 1.4x, for the back of a room), else
  // at the root font's scale
  const root = getComputedStyle(document.documentElement);
  const scale = parseFloat(root.getPropertyValue("--llmgp-chart-scale")) || parseFloat(root.fontSize) / 16 || 1;
  if (Math.abs(scale - 1) > 0.01) {
    if (!(layout.font && layout.font.size)) layout.font = Object.assign({}, layout.font, { size: 12 });
    scaleFonts(layout, scale);
  }
  if (div.clientWidth > 0) clearOfToolbar(layout, div.clientWidth, scale);
  keepUnchanged(figure.data || [], div.data); // after the narrow labels are in: on a phone they are what was drawn
  keepTemplate(layout, div);
  followPage(layout, parentElement);
  layout.autosize = true;
  delete layout.width;
  div.llmgpNarrow = narrow;
  div.llmgpWidth = div.clientWidth;
  const drawn = Plotly.react(div, figure.data || [], layout, config);
  if (!div.llmgpDeclutter) {
    div.llmgpDeclutter = true;
    div.on("plotly_afterplot", () => declutter(div));
  }
  return drawn;
}

// A chart out of view is not redrawn on every rerun: it is drawn when it comes into view (or the page is printed), so
// a slider move waits only for the charts a person can see. Each Plotly.react costs 15-30 ms of the browser's main
// thread (bench/latency.py); at 1440 x 900, two of the Memory page's three charts sit below the fold.
const waiting = new Set(); // charts whose latest figure is not drawn yet

// A chart whose top edge only peeks in (its title's strip, under 48 px) counts as out of view until scrolled to: at
// 1440 x 900 Memory's second chart starts 20 px above the fold, and redrawing it on every slider move took Memory from
// 1.1 to 1.6 times the bare page's wait (bench/latency.py).
const PEEK_PX = 48;

function inView(div) {
  const box = div.getBoundingClientRect();
  if (box.width === 0 && box.height === 0) return false; // hidden: a closed expander, another tab
  return box.bottom > PEEK_PX && box.top < window.innerHeight - PEEK_PX;
}

const FAILED = "This chart could not be drawn. Reload the page to try again.";

function drawLatest(Plotly, div) {
  const latest = div.llmgpLatest;
  waiting.delete(div);
  if (div.dataset.digest !== latest.digest) {
    try {
      draw(Plotly, div, div.llmgpParent, latest.spec, latest.config);
    } catch {
      if (!div._fullLayout) div.textContent = FAILED;
      return;
    }
    div.dataset.digest = latest.digest;
  }
  if (latest.clicks && !div.llmgpClicks) {
    div.on("plotly_click", (event) => {
      const point = event.points[0];
      div.llmgpSend({ curve: point.curveNumber, point: point.pointNumber, customdata: point.customdata ?? null });
    });
    div.llmgpClicks = true;
  }
}

// Observers are made once per chart element: Streamlit calls the module again on every new figure but runs the
// returned clean-up only when the chart leaves the page.
function watch(Plotly, div) {
  if (div.llmgpObservers) return;
  const seen = new IntersectionObserver(
    (entries) => {
      if (entries.some((entry) => entry.isIntersecting) && waiting.has(div)) drawLatest(Plotly, div);
    },
    { rootMargin: `-${PEEK_PX}px 0px` },
  );
  const resized = new ResizeObserver(() => {
    const width = div.clientWidth;
    if (width <= 0 || !div._fullLayout || waiting.has(div)) return;
    if (width < NARROW_PX !== div.llmgpNarrow || Math.abs(width - div.llmgpWidth) > 40) draw(Plotly, div, div.llmgpParent, div.llmgpLatest.spec, div.llmgpLatest.config);
    else if (Math.abs(div._fullLayout.width - width) > 1) Plotly.Plots.resize(div);
  });
  div.llmgpObservers = [seen, resized];
  for (const observer of div.llmgpObservers) observer.observe(div);
}

window.addEventListener("beforeprint", () => {
  if (window.Plotly) for (const div of [...waiting]) drawLatest(window.Plotly, div);
});

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let div = parentElement.querySelector("div.llmgp-chart");
  if (!div) {
    div = document.createElement("div");
    div.className = "llmgp-chart";
    div.setAttribute("role", "figure"); // named by its title; the chart's tools inside stay reachable
    parentElement.appendChild(div);
  }
  div.setAttribute("aria-label", data.title);
  div.style.minHeight = `${data.height}px`; // the chart's room is kept before Plotly has drawn it
  div.llmgpSend = (value) => setTriggerValue("click", value); // the setter of the latest run
  div.llmgpLatest = data;
  div.llmgpParent = parentElement;
  let gone = false;
  plotlyLibrary(data.library)
    .then((Plotly) => {
      if (gone) return;
      // in view, or back to the figure already drawn (it leaves the waiting list): drawn now; else when seen
      if (inView(div) || div.dataset.digest === div.llmgpLatest.digest) drawLatest(Plotly, div);
      else waiting.add(div);
      watch(Plotly, div);
    })
    .catch(() => {
      if (!div._fullLayout) div.textContent = FAILED;
    });
  return () => {
    gone = true;
    waiting.delete(div);
    for (const observer of div.llmgpObservers || []) observer.disconnect();
    delete div.llmgpObservers;
  };
}
