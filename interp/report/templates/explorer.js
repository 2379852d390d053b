// Attention explorer (interp/report/explorer.py): a click on a head in the grid shows its facts and
// its pattern on the chosen text; the query under the pointer colours the tokens it attends to.
(function () {
  var root = document.getElementById("explorer-root");
  if (!root) return;
  var data = JSON.parse(root.getAttribute("data-explorer"));
  var nHeads = data.shape[1];
  var byId = function (id) { return document.getElementById(id); };
  var sources = data.sources.map(function (s) {
    var raw = atob(s.data), bytes = new Uint8Array(raw.length), index = {};
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    (s.heads || []).forEach(function (key, slot) { index[key] = slot; });
    return { name: s.name, note: s.note, tokens: s.tokens, n: s.tokens.length, bytes: bytes, all: !s.heads, index: index };
  });
  var state = { key: data.selected, source: 0, query: null, pinned: false };
  var fmt = function (v, digits) { return v === null || v === undefined ? "" : v.toFixed(digits === undefined ? 3 : digits); };
  var signed = function (v) { return v === null || v === undefined ? "" : (v >= 0 ? "+" : "") + v.toPrecision(3); };

  // weights(row q) of the selected head on the selected text, or null when not stored
  var pattern = function () {
    var src = sources[state.source], parts = state.key.split(".");
    var slot = src.all ? (+parts[0]) * nHeads + (+parts[1]) : src.index[state.key];
    if (slot === undefined) return null;
    var n = src.n, offset = slot * n * n;
    return function (q, k) { return src.bytes[offset + q * n + k] / 255; };
  };

  var cell = function (row, text, numeric) {
    var td = document.createElement("td");
    td.textContent = text;
    if (numeric) td.className = "num";
    row.appendChild(td);
  };
  var fill = function (id, rows) {
    var body = byId(id).tBodies[0];
    body.textContent = "";
    rows.forEach(function (values) {
      var tr = document.createElement("tr");
      values.forEach(function (v) { cell(tr, v[0], v[1]); });
      body.appendChild(tr);
    });
    byId(id).hidden = rows.length === 0;
  };

  var showHead = function () {
    var parts = state.key.split("."), facts = data.heads[state.key] || {};
    byId("explorer-title").textContent = "L" + parts[0] + "H" + parts[1] + (facts.role ? " · " + facts.role : "");
    var role = [];
    if (facts.role) role.push("primary role " + facts.role + (facts.confidence !== null && facts.confidence !== undefined ? " (confidence " + fmt(facts.confidence, 2) + ")" : ""));
    if (facts.second) role.push("second role " + facts.second);
    if (facts.stability !== null && facts.stability !== undefined) role.push("stability " + fmt(facts.stability, 2));
    if (facts.sink !== null && facts.sink !== undefined) role.push("sink mass " + fmt(facts.sink, 2));
    if (facts.unmeasured) role.push("not measured: " + facts.unmeasured);
    if (facts.evidence) role.push("decided by " + facts.evidence);
    if (facts.looks) role.push("looks: " + facts.looks + (facts.components ? " (" + facts.components + ")" : ""));
    if (facts.writes) role.push("writes: " + facts.writes);
    if (facts.output_size !== null && facts.output_size !== undefined) role.push("output size " + fmt(facts.output_size, 3) + " of the residual stream");
    if (facts.task_role) role.push("on task " + facts.task + ": " + facts.task_role + (facts.task_key ? " (attends to " + facts.task_key + ")" : "") + (facts.partner ? ", composes into " + facts.partner : ""));
    byId("explorer-role").textContent = role.length ? role.join(" · ") : "The run has no roles table for this head.";
    fill("explorer-weights", (facts.weights || []).map(function (w) {
      return [[w[0]], [fmt(w[1]), 1], [w[2] === null ? "" : fmt(w[2]) + " … " + fmt(w[3]), 1]];
    }));
    fill("explorer-partners", (facts.partners || []).map(function (c) {
      return [[c[0] + " (" + c[1] + ")"], [c[2]], [fmt(c[3]), 1], [fmt(c[4]), 1]];
    }));
    fill("explorer-features", (facts.features || []).map(function (f) { return [[f[0]], [fmt(f[1]), 1], [fmt(f[2]), 1], [fmt(f[3]), 1]]; }));
    fill("explorer-effects", (facts.effects || []).map(function (e) {
      return [[e[0]], [signed(e[1]), 1], [e[2] === null ? "" : signed(e[2]) + " … " + signed(e[3]), 1], [e[4]]];
    }));
    byId("explorer-effect-note").textContent = facts.effects ? data.effect_note : "";
    root.querySelectorAll("#explorer-grid button").forEach(function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-head") === state.key ? "true" : "false");
    });
  };

  var quote = function (t) { return "\u201c" + t + "\u201d"; };
  var showTokens = function () {
    var src = sources[state.source], w = pattern(), box = byId("explorer-tokens");
    var q = state.query === null ? src.n - 1 : state.query;
    box.textContent = "";
    src.tokens.forEach(function (token, k) {
      var span = document.createElement("span");
      span.textContent = token;
      span.setAttribute("data-pos", k);
      if (w) {
        var v = w(q, k);
        span.setAttribute("data-w", v.toFixed(3));
        span.title = "position " + k + ": " + v.toFixed(3) + " of query " + q + "'s attention";
        span.style.background = "rgba(31, 95, 191, " + v.toFixed(3) + ")";
        span.style.color = v > 0.55 ? "#fff" : "";
      }
      if (k === q) span.className = "q";
      box.appendChild(span);
    });
    var readout = byId("explorer-readout");
    if (!w) {
      readout.textContent = "This head's pattern is not stored for this text (interp show stored only the heads it printed).";
      return;
    }
    var keys = [];
    for (var k = 0; k < src.n; k++) keys.push([k, w(q, k)]);
    keys.sort(function (a, b) { return b[1] - a[1] || a[0] - b[0]; });
    readout.textContent = "Query " + q + " " + quote(src.tokens[q]) + (state.pinned ? " (kept)" : "") + " attends to: " +
      keys.slice(0, 5).filter(function (p, i) { return i === 0 || p[1] >= 0.005; }).map(function (p) { return quote(src.tokens[p[0]]) + " (" + p[0] + ") " + p[1].toFixed(2); }).join(" · ");
  };

  var canvas = byId("explorer-heatmap"), layout = null;
  var drawHeatmap = function () {
    var src = sources[state.source], w = pattern(), n = src.n;
    var size = Math.max(3, Math.min(28, Math.floor(520 / n)));
    var margin = size >= 10 ? 90 : 0, ratio = window.devicePixelRatio || 1;
    layout = { size: size, margin: margin, n: n };
    canvas.style.width = (margin + n * size) + "px";
    canvas.style.height = (margin + n * size) + "px";
    canvas.width = Math.round((margin + n * size) * ratio);
    canvas.height = Math.round((margin + n * size) * ratio);
    var ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, margin + n * size, margin + n * size);
    if (margin) {
      ctx.fillStyle = "#5f6368";
      ctx.font = "11px system-ui, sans-serif";
      var label = function (t) { return t.length > 12 ? t.slice(0, 11) + "\u2026" : t; };
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      for (var r = 0; r < n; r++) ctx.fillText(label(src.tokens[r]), margin - 4, margin + (r + 0.5) * size);
      for (var c = 0; c < n; c++) {
        ctx.save();
        ctx.translate(margin + (c + 0.5) * size, margin - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = "left";
        ctx.fillText(label(src.tokens[c]), 0, 0);
        ctx.restore();
      }
    }
    if (!w) return;
    for (var q = 0; q < n; q++) {
      for (var k = 0; k < n; k++) {
        var v = w(q, k);
        if (v <= 0) continue;
        ctx.fillStyle = "rgba(31, 95, 191, " + v.toFixed(3) + ")";
        ctx.fillRect(margin + k * size, margin + q * size, size, size);
      }
    }
    var row = state.query === null ? n - 1 : state.query;
    ctx.strokeStyle = "#d62728";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(margin + 0.75, margin + row * size + 0.75, n * size - 1.5, size - 1.5);
  };

  var showSource = function () {
    byId("explorer-note").textContent = sources[state.source].note || "";
    showTokens();
    drawHeatmap();
  };
  var setQuery = function (q, pin) {
    if (pin) { state.pinned = !(state.pinned && state.query === q); }
    else if (state.pinned) return;
    state.query = q;
    showTokens();
    drawHeatmap();
  };

  root.querySelectorAll("#explorer-grid button").forEach(function (b) {
    b.addEventListener("click", function () {
      state.key = b.getAttribute("data-head");
      showHead();
      showSource();
    });
  });
  byId("explorer-source").addEventListener("change", function (e) {
    state.source = +e.target.value;
    state.query = null;
    state.pinned = false;
    showSource();
  });
  var tokens = byId("explorer-tokens");
  var posOf = function (e) { var p = e.target.getAttribute && e.target.getAttribute("data-pos"); return p === null || p === undefined ? null : +p; };
  tokens.addEventListener("mouseover", function (e) { var p = posOf(e); if (p !== null) setQuery(p, false); });
  tokens.addEventListener("click", function (e) { var p = posOf(e); if (p !== null) setQuery(p, true); });
  var rowAt = function (e) {
    var box = canvas.getBoundingClientRect(), scale = box.width / (layout.margin + layout.n * layout.size);
    var x = (e.clientX - box.left) / scale - layout.margin, y = (e.clientY - box.top) / scale - layout.margin;
    if (x < 0 || y < 0) return null;
    var q = Math.floor(y / layout.size), k = Math.floor(x / layout.size);
    return q < layout.n && k < layout.n ? [q, k] : null;
  };
  canvas.addEventListener("mousemove", function (e) { var at = rowAt(e); if (at) setQuery(at[0], false); });
  canvas.addEventListener("click", function (e) { var at = rowAt(e); if (at) setQuery(at[0], true); });
  showHead();
  showSource();
})();
