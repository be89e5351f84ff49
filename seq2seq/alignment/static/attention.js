/* Attention maps drawn from their JSON records, the one drawing code of the HTML
   viewer (seq2seq-align format=html inlines this file) and of seq2seq-serve's page
   (which loads it from the package).

   A record is AttentionMap.to_dict()'s: src_tokens, tgt_tokens, weights (T, S), and
   when present heads (H, T, S), attribution (T, S) with spearman, self_attention
   (L, H, S, S: rows the querying source piece, columns the attended one), title;
   gold_cells [[i, j, "sure" | "possible"], ...] (source, target piece) when the
   viewer knows gold links.

   AttentionView.render(container, record, k) draws one section #sentence-k: the
   heatmap (a selector for each head and their mean), the attribution beside it, the
   two-row view, the self-attention heatmap with its layer and head selectors, and
   the colour bar with the scale's switch (linear, power, log).
   Hovering a cell or a line shows "source → target: weight" in #tip; hovering a
   target piece lights its source pieces by weight.

   A map of more than BIG cells (long sentences: 250 pieces a side) is drawn as one
   image (a canvas's pixels, a cell per 4×4 block, its dot in the middle) on a grid
   of labels instead of a table of cells, so it draws in milliseconds; hovering it
   reads the cell under the mouse. AttentionView.words(record) regroups a record's
   pieces into words (a source word sums its pieces' columns, a target word averages
   its pieces' rows, so rows still sum to 1); svg(view) and png(view, done) draw a
   section's shown map (section.shown) as a file; links(...) draws word links.

   Colours come from scale.js (window.AttentionScale, made from alignment/static/
   scale.json), which must load first: the PNGs' table, so a weight has one colour
   everywhere. 0 is white (the background); where a matrix has exact zeros, a dot
   marks its cells above 0 (the support). */
(function (root) {
  'use strict';

  var SCALE = root.AttentionScale;
  if (!SCALE) throw new Error('attention.js: load scale.js first (window.AttentionScale)');
  var state = {scale: 'linear'};  // the scale a section opens with: the last one chosen
  var rootStyle = root.document.documentElement.style;
  rootStyle.setProperty('--ink', SCALE.colors[SCALE.colors.length - 1]);
  rootStyle.setProperty('--mark-light', SCALE.mark.light);
  rootStyle.setProperty('--mark-dark', SCALE.mark.dark);

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c];
    });
  }
  function at(n, v) { return ' ' + n + '="' + esc(v) + '"'; }
  function shown(v) { return v === 0 ? 'exactly 0' : v.toFixed(3); }

  /* Where weight v sits on the scale `kind`, in [0, 1]: alignment/scale.py's
     position, the same formula. */
  function position(v, kind) {
    var spec = SCALE.scales[kind || 'linear'];
    v = Math.min(1, Math.max(0, v));
    if (spec.gamma) return Math.pow(v, spec.gamma);
    if (spec.floor) return Math.min(1, Math.log10(Math.max(v, spec.floor) / spec.floor) / -Math.log10(spec.floor));
    return v;
  }
  function stop(v, kind) {
    var n = SCALE.colors.length;
    return Math.min(n - 1, Math.floor(position(v, kind) * n));
  }
  /* The colour of weight v: white (0) to dark blue (1), as the PNGs draw it. */
  function color(v, kind) { return SCALE.colors[stop(v, kind)]; }

  function hasZero(m) {
    return m.some(function (row) { return row.some(function (v) { return v === 0; }); });
  }

  /* A heatmap: rows (with their labels) by columns; opts.tip(col, row, shown) the
     hover text of a cell, opts.marks {"i,j": "sure" | "possible"}, opts.scale the
     colour scale. Where m has exact zeros, its cells above 0 get a dot (support).
     Over BIG cells: one image on a grid of labels (grid). */
  function table(m, cols, rows, opts) {
    if (rows.length * cols.length > BIG) return grid(m, cols, rows, opts);
    var kind = opts.scale || state.scale, dots = hasZero(m);
    var h = '<table class="att"><tr><th></th>';
    cols.forEach(function (c, i) { h += '<th class="src"' + at('data-col', i) + '>' + esc(c) + '</th>'; });
    h += '</tr>';
    rows.forEach(function (r, j) {
      h += '<tr><th class="tgt"' + at('data-row', j) + '>' + esc(r) + '</th>';
      cols.forEach(function (c, i) {
        var v = m[j][i], mark = (opts.marks || {})[i + ',' + j], k = stop(v, kind);
        var cls = 'cell' + (mark ? ' ' + mark : '') + (dots && v > 0 ? ' support' : '') +
          (k >= SCALE.mark.dark_from ? ' dark' : '');
        h += '<td' + at('class', cls) + at('style', 'background-color:' + SCALE.colors[k]) +
          at('data-tip', opts.tip(i, j, shown(v))) + '></td>';
      });
      h += '</tr>';
    });
    return h + '</table>';
  }

  var BIG = 3600, PX = 4;  // cells above which a map is an image; its pixels a cell
  var RGB = SCALE.colors.map(function (c) {
    return [1, 3, 5].map(function (k) { return parseInt(c.slice(k, k + 2), 16); });
  });
  var MARK = [SCALE.mark.light, SCALE.mark.dark].map(function (c) {
    return [1, 3, 5].map(function (k) { return parseInt(c.slice(k, k + 2), 16); });
  });
  var grids = {}, gridCount = 0;  // each drawn image's matrix and hover text, by id

  /* The pixels of a map, PX × PX per cell, the support's dot in the middle: a PNG
     data URL (one canvas, whatever the number of cells). */
  function pixels(m, kind) {
    var T = m.length, S = T ? m[0].length : 0, dots = hasZero(m);
    var canvas = document.createElement('canvas');
    canvas.width = S * PX; canvas.height = T * PX;
    var ctx = canvas.getContext('2d'), img = ctx.createImageData(S * PX, T * PX), d = img.data;
    for (var j = 0; j < T; j++) {
      for (var i = 0; i < S; i++) {
        var v = m[j][i], k = stop(v, kind), c = RGB[k];
        var mark = dots && v > 0 ? MARK[k >= SCALE.mark.dark_from ? 1 : 0] : null;
        for (var y = 0; y < PX; y++) {
          for (var x = 0; x < PX; x++) {
            var inner = mark && x > 0 && x < PX - 1 && y > 0 && y < PX - 1;
            var q = 4 * ((j * PX + y) * S * PX + i * PX + x), col = inner ? mark : c;
            d[q] = col[0]; d[q + 1] = col[1]; d[q + 2] = col[2]; d[q + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(img, 0, 0);
    return canvas.toDataURL('image/png');
  }

  /* A large heatmap: its labels on a CSS grid and its cells as one image; the
     image's hover text is read from the cell under the mouse (tooltips). */
  function grid(m, cols, rows, opts) {
    var kind = opts.scale || state.scale, id = 'g' + (++gridCount);
    Object.keys(grids).forEach(function (g) { if (!document.getElementById(g)) delete grids[g]; });
    grids[id] = {m: m, tip: opts.tip};
    var h = '<div class="att big"' + at('style', 'grid-template-columns:max-content repeat(' +
      cols.length + ',var(--cell));grid-template-rows:max-content repeat(' + rows.length + ',var(--cell))') +
      '><span></span>';
    cols.forEach(function (c, i) { h += '<span class="src"' + at('data-col', i) + '>' + esc(c) + '</span>'; });
    rows.forEach(function (r, j) {
      h += '<span class="tgt"' + at('data-row', j) + at('style', 'grid-row:' + (j + 2)) + '>' + esc(r) + '</span>';
    });
    h += '<img class="grid" alt=""' + at('id', id) + at('src', pixels(m, kind)) + at('style', 'grid-row:2/span ' +
      rows.length + ';grid-column:2/span ' + cols.length) + '>';
    return h + (hasZero(m) ? '<i class="support" hidden></i>' : '') + '</div>';
  }

  /* The hover text of the cell under the mouse on a grid's image, or null. */
  function gridTip(el, e) {
    var g = grids[el.id];
    if (!g) return null;
    var r = el.getBoundingClientRect(), T = g.m.length, S = g.m[0].length;
    var i = Math.min(S - 1, Math.floor((e.clientX - r.left) / r.width * S));
    var j = Math.min(T - 1, Math.floor((e.clientY - r.top) / r.height * T));
    return g.tip(i, j, shown(g.m[j][i]));
  }

  /* The colour bar: the scale's stops, its ticks (weights), its name, the dot. */
  function legend(kind, zeros) {
    var spec = SCALE.scales[kind], n = 64, h = '<div class="legend"><div><div class="bar">';
    for (var k = 0; k < n; k++) {
      h += '<i style="background-color:' + SCALE.colors[Math.floor((k + 0.5) * SCALE.colors.length / n)] + '"></i>';
    }
    h += '</div><div class="ticks">';
    spec.ticks.forEach(function (t) {  // [weight, its label]
      h += '<span' + at('style', 'left:' + (100 * position(t[0], kind)).toFixed(2) + '%') + '>' + esc(t[1]) + '</span>';
    });
    h += '</div></div><span class="note">attention weight, ' + esc(spec.label);
    if (zeros > 0) h += '; <span class="dot"></span> above 0, blank exactly 0';
    return h + '</span></div>';
  }

  /* The two-row view: source pieces above, target pieces below, a line per weight
     of at least 0.02 (thickness and opacity its weight), gold links dashed. */
  function two(d, m) {
    var L = d.src.concat(d.tgt).map(function (s) { return s.length; });
    var step = Math.max(64, 8 * Math.max.apply(null, L)), n = Math.max(d.src.length, d.tgt.length);
    var w = n * step + 20, H = 150, ys = 26, yt = H - 24, y1 = ys + 6, y2 = yt - 16;
    function xs(i) { return 10 + step * (i + 0.5) + (n - d.src.length) * step / 2; }
    function xt(j) { return 10 + step * (j + 0.5) + (n - d.tgt.length) * step / 2; }
    function line(c, i, j, extra) {
      return '<line' + at('class', c) + at('x1', xs(i)) + at('y1', y1) + at('x2', xt(j)) +
        at('y2', y2) + at('data-row', j) + extra + '></line>';
    }
    var h = '<svg' + at('class', 'two') + at('width', w) + at('height', H) + '>';
    d.tgt.forEach(function (t, j) {
      d.src.forEach(function (s, i) {
        var v = m[j][i];
        if (v < 0.02) return;
        h += line('w', i, j, at('stroke-width', (0.5 + 5 * v).toFixed(2)) +
          at('stroke-opacity', v.toFixed(3)) + at('data-tip', s + ' \u2192 ' + t + ': ' + v.toFixed(3)));
      });
    });
    d.gold.forEach(function (g) {
      h += line(g[2], g[0], g[1], at('data-tip', 'gold ' + g[2] + ': ' + d.src[g[0]] + ' \u2192 ' + d.tgt[g[1]]));
    });
    d.src.forEach(function (s, i) {
      h += '<text' + at('class', 'src') + at('data-col', i) + at('x', xs(i)) + at('y', ys) +
        ' text-anchor="middle">' + esc(s) + '</text>';
    });
    d.tgt.forEach(function (t, j) {
      h += '<text' + at('class', 'tgt') + at('data-row', j) + at('x', xt(j)) + at('y', yt) +
        ' text-anchor="middle">' + esc(t) + '</text>';
    });
    return h + '</svg>';
  }

  /* The selectable cross-attention matrices: the attention, or each head and the mean. */
  function matrices(rec) {
    var mats = {}, keys;
    if (rec.heads) {
      keys = ['mean'];
      mats.mean = rec.weights;
      rec.heads.forEach(function (m, h) { keys.push('head ' + (h + 1)); mats['head ' + (h + 1)] = m; });
    } else {
      keys = ['attention'];
      mats.attention = rec.weights;
    }
    return {keys: keys, mats: mats};
  }

  function meanOf(ms) {
    return ms[0].map(function (row, r) {
      return row.map(function (_, c) {
        var s = 0;
        ms.forEach(function (m) { s += m[r][c]; });
        return s / ms.length;
      });
    });
  }

  /* The share of exactly-0 weights (sparse attention), over heads when present. */
  function zeroShare(rec) {
    var ms = rec.heads || [rec.weights], zeros = 0, total = 0;
    ms.forEach(function (m) { m.forEach(function (row) { row.forEach(function (v) { total++; if (v === 0) zeros++; }); }); });
    return total ? zeros / total : 0;
  }

  /* The hover text of a target piece: its strongest sources with their weights. */
  function sourcesTip(d, m, j) {
    var order = d.src.map(function (_, i) { return i; }).sort(function (a, b) { return m[j][b] - m[j][a]; });
    return d.tgt[j] + ' \u2190 ' + order.slice(0, 4).map(function (i) {
      return d.src[i] + ' ' + m[j][i].toFixed(3);
    }).join(', ');
  }

  function options(names) {
    return names.map(function (n) { return '<option' + at('value', n) + '>' + esc(n) + '</option>'; }).join('');
  }

  function skeleton(rec, k, d, sel) {
    var h = '<h2>' + esc(rec.title || 'Sentence ' + (k + 1)) + '</h2>';
    if (sel.keys.length > 1) h += '<label>show <select class="head">' + options(sel.keys) + '</select></label> ';
    h += '<label>scale <select class="scale">' + Object.keys(SCALE.scales).map(function (n) {
      return '<option' + at('value', n) + (n === state.scale ? ' selected' : '') + '>' + esc(n) + '</option>';
    }).join('') + '</select></label>';
    h += '<div class="views"><div><h3>attention</h3><div class="heat"></div></div>';
    if (rec.attribution) {
      h += '<div><h3>attribution (gradient \u00d7 input)</h3><div class="attr"></div>';
      if (typeof rec.spearman === 'number' && !isNaN(rec.spearman)) {
        h += '<p class="note">Spearman \u03c1(attention, attribution) = ' + rec.spearman.toFixed(3) + '</p>';
      }
      h += '</div>';
    }
    h += '</div><div class="legend-box"></div><div class="two-row"></div>';
    if (rec.self_attention) {
      var layers = rec.self_attention.map(function (_, l) { return 'layer ' + (l + 1); });
      var heads = ['mean'].concat(rec.self_attention[0].map(function (_, x) { return 'head ' + (x + 1); }));
      h += '<div class="self"><h3>encoder self-attention (rows: the reading source piece; ' +
        'columns: the piece it reads)</h3><label>' + '<select class="self-layer">' + options(layers) +
        '</select></label> <label><select class="self-head">' + options(heads) +
        '</select></label><div class="self-heat"></div></div>';
    }
    var zeros = zeroShare(rec);
    if (zeros > 0) {
      h += '<p class="note">' + Math.round(100 * zeros) + '% of the weights are exactly 0 ' +
        '(blank cells without a dot, no line): the attention is sparse.</p>';
    }
    if (d.gold.length) h += '<p class="note">Gold links: red (outline; dashed line) sure, orange possible.</p>';
    return h;
  }

  /* Light the source pieces of target piece j (or none: j < 0) by its weights. */
  function light(sec, m, j, kind) {
    sec.querySelectorAll('.heat .src[data-col], svg.two text.src').forEach(function (el) {
      var i = +el.getAttribute('data-col');
      if (j < 0) {
        el.classList.remove('lit', 'dark');
        el.style.background = el.style.fill = '';
        el.removeAttribute('data-weight');
        return;
      }
      var v = m[j][i];
      el.classList.add('lit');
      el.classList.toggle('dark', stop(v, kind) >= SCALE.mark.dark_from);
      el.setAttribute('data-weight', v.toFixed(3));
      if (el.tagName === 'text') el.style.fill = v > 0.1 ? color(0.3 + 0.7 * v) : '';
      else el.style.background = color(v, kind);
    });
  }

  function render(container, rec, k) {
    var d = {src: rec.src_tokens.map(String), tgt: rec.tgt_tokens.map(String), gold: rec.gold_cells || []};
    var sel = matrices(rec), marks = {};
    d.gold.forEach(function (g) { if (!marks[g[0] + ',' + g[1]] || g[2] === 'sure') marks[g[0] + ',' + g[1]] = g[2]; });
    var sec = document.createElement('section');
    sec.id = 'sentence-' + k;
    sec.innerHTML = skeleton(rec, k, d, sel);
    var current = null, kind = state.scale;
    function cross(i, j, v) { return d.src[i] + ' \u2192 ' + d.tgt[j] + ': ' + v; }
    function show() {
      var s = sec.querySelector('select.head');
      current = sel.mats[s ? s.value : sel.keys[0]];
      sec.querySelector('.heat').innerHTML = table(current, d.src, d.tgt, {marks: marks, tip: cross, scale: kind});
      sec.querySelectorAll('.heat .tgt[data-row]').forEach(function (th) {
        th.setAttribute('data-tip', sourcesTip(d, current, +th.getAttribute('data-row')));
      });
      sec.querySelector('.two-row').innerHTML = two(d, current);
      sec.shown = {title: rec.title || 'Sentence ' + (k + 1), view: s ? s.value : sel.keys[0],
        unit: rec.unit || 'pieces', scale: kind, src_tokens: d.src, tgt_tokens: d.tgt, weights: current};
      showLegend();
    }
    function showLegend() {
      sec.querySelector('.legend-box').innerHTML = legend(kind, sec.querySelector('td.support, i.support') ? 1 : 0);
    }
    function showAttr() {
      sec.querySelector('.attr').innerHTML = table(rec.attribution, d.src, d.tgt, {tip: cross, scale: kind});
    }
    function showSelf() {
      var l = sec.querySelector('select.self-layer').selectedIndex;
      var hs = rec.self_attention[l], x = sec.querySelector('select.self-head').selectedIndex;
      var m = x === 0 ? meanOf(hs) : hs[x - 1];
      sec.querySelector('.self-heat').innerHTML = table(m, d.src, d.src, {tip: function (i, j, v) {
        return d.src[j] + ' reads ' + d.src[i] + ': ' + v;
      }, scale: kind});
      showLegend();
    }
    function rescale() {
      kind = state.scale = this.value;
      show();
      if (rec.attribution) showAttr();
      if (rec.self_attention) showSelf();
    }
    sec.querySelectorAll('select.head').forEach(function (s) { s.addEventListener('change', show); });
    sec.querySelector('select.scale').addEventListener('change', rescale);
    sec.querySelectorAll('select.self-layer, select.self-head').forEach(function (s) {
      s.addEventListener('change', showSelf);
    });
    sec.addEventListener('mouseover', function (e) {
      var t = e.target.closest ? e.target.closest('.heat .tgt[data-row], svg.two text.tgt') : null;
      light(sec, current, t ? +t.getAttribute('data-row') : -1, kind);
    });
    if (rec.attribution) showAttr();
    if (rec.self_attention) showSelf();
    show();
    container.appendChild(sec);
    return sec;
  }


  /* ---------------------------------------------------------- words */
  /* A side's units: its words (pieces listed by the record), and each piece no
     word holds (</s>) as its own, in order. */
  function units(tokens, words) {
    var held = {}, out = (words || []).map(function (w) {
      w.pieces.forEach(function (p) { held[p] = 1; });
      return {text: w.text, pieces: w.pieces};
    });
    tokens.forEach(function (t, i) { if (!held[i]) out.push({text: t, pieces: [i]}); });
    return out.sort(function (a, b) { return a.pieces[0] - b.pieces[0]; });
  }

  /* m (rows, cols) over pieces → over units: a row unit averages its pieces' rows,
     a column unit sums its pieces' columns (a row's sum is kept). */
  function regroup(m, rowUnits, colUnits) {
    return rowUnits.map(function (r) {
      return colUnits.map(function (c) {
        var s = 0;
        r.pieces.forEach(function (j) { c.pieces.forEach(function (i) { s += m[j][i]; }); });
        return s / r.pieces.length;
      });
    });
  }

  /* A record over words (src_words / tgt_words), the maps regrouped: weights,
     heads, attribution, occlusion (T, S) and self_attention (rows and columns
     source). Gold cells are over pieces and are dropped. */
  function words(rec) {
    var src = units(rec.src_tokens, rec.src_words), tgt = units(rec.tgt_tokens, rec.tgt_words);
    var out = {}, cross = function (m) { return m ? regroup(m, tgt, src) : m; };
    Object.keys(rec).forEach(function (key) { out[key] = rec[key]; });
    out.unit = 'words';
    out.src_tokens = src.map(function (u) { return u.text; });
    out.tgt_tokens = tgt.map(function (u) { return u.text; });
    out.weights = cross(rec.weights);
    out.heads = rec.heads ? rec.heads.map(cross) : rec.heads;
    out.attribution = cross(rec.attribution);
    out.occlusion = cross(rec.occlusion);
    out.self_attention = rec.self_attention ? rec.self_attention.map(function (layer) {
      return layer.map(function (m) { return regroup(m, src, src); });
    }) : rec.self_attention;
    delete out.gold_cells;
    return out;
  }

  /* ---------------------------------------------------------- files */
  /* A shown map (section.shown: title, src_tokens, tgt_tokens, weights, scale) as
     one SVG: the title, the labels, each colour's cells as one path, the dots of
     the support as one path per dot colour. What png draws, and the page's SVG. */
  function svg(v) {
    var S = v.src_tokens.length, T = v.tgt_tokens.length, c = S * T > BIG ? 8 : 16;
    var longest = function (ts) { return Math.max.apply(null, ts.map(function (t) { return String(t).length; }).concat([1])); };
    var left = 12 + 7 * longest(v.tgt_tokens), top = 34 + 7 * longest(v.src_tokens);
    var head = esc(v.title) + (v.view ? ' (' + esc(v.view) + ', ' + esc(SCALE.scales[v.scale].label) + ')' : '');
    var W = Math.max(left + S * c + 12, 24 + 7 * head.length), H = top + T * c + 12, fs = c > 8 ? 11 : 7;
    var paths = {}, dots = {}, zero = hasZero(v.weights), r = c / 6;
    v.weights.forEach(function (row, j) {
      row.forEach(function (w, i) {
        var k = stop(w, v.scale), x = left + i * c, y = top + j * c;
        paths[k] = (paths[k] || '') + 'M' + x + ' ' + y + 'h' + c + 'v' + c + 'h-' + c + 'z';
        if (zero && w > 0) {
          var mk = k >= SCALE.mark.dark_from ? SCALE.mark.dark : SCALE.mark.light;
          dots[mk] = (dots[mk] || '') + 'M' + (x + c / 2 - r) + ' ' + (y + c / 2 - r) + 'h' + 2 * r + 'v' + 2 * r + 'h-' + 2 * r + 'z';
        }
      });
    });
    var h = '<svg xmlns="http://www.w3.org/2000/svg"' + at('width', W) + at('height', H) +
      at('viewBox', '0 0 ' + W + ' ' + H) + ' font-family="sans-serif"' + at('font-size', fs) + '>' +
      '<rect width="100%" height="100%" fill="#fff"/><text x="12" y="18" font-size="13">' + head + '</text>';
    Object.keys(paths).forEach(function (k) { h += '<path' + at('fill', SCALE.colors[k]) + at('d', paths[k]) + '/>'; });
    Object.keys(dots).forEach(function (k) { h += '<path' + at('fill', k) + at('d', dots[k]) + '/>'; });
    v.src_tokens.forEach(function (t, i) {
      var x = left + i * c + c / 2 + fs / 3;
      h += '<text' + at('transform', 'translate(' + x + ' ' + (top - 4) + ') rotate(-90)') + '>' + esc(t) + '</text>';
    });
    v.tgt_tokens.forEach(function (t, j) {
      h += '<text text-anchor="end"' + at('x', left - 4) + at('y', top + j * c + c / 2 + fs / 3) + '>' + esc(t) + '</text>';
    });
    return h + '</svg>';
  }

  /* The same drawing as a PNG (the SVG drawn on a canvas at twice its size):
     done(blob). */
  function png(v, done) {
    var text = svg(v), img = new Image();
    var url = URL.createObjectURL(new Blob([text], {type: 'image/svg+xml'}));
    img.onload = function () {
      var canvas = document.createElement('canvas');
      canvas.width = 2 * img.width; canvas.height = 2 * img.height;
      var ctx = canvas.getContext('2d');
      ctx.scale(2, 2);
      ctx.drawImage(img, 0, 0);
      URL.revokeObjectURL(url);
      canvas.toBlob(done, 'image/png');
    };
    img.src = url;
  }

  /* ---------------------------------------------------------- word links */
  /* Word links as a two-row view: source words above, target words below, one
     line per link of each set ({name, cls, links: "i-j ..."}), later sets drawn
     over earlier ones; the sets' names in a legend. */
  function links(src, tgt, sets) {
    var L = src.concat(tgt).map(function (s) { return String(s).length; });
    var step = Math.max(48, 8 * Math.max.apply(null, L.concat([1]))), n = Math.max(src.length, tgt.length);
    var w = n * step + 20, H = 130, ys = 22, yt = H - 14, y1 = ys + 6, y2 = yt - 16;
    function xs(i) { return 10 + step * (i + 0.5) + (n - src.length) * step / 2; }
    function xt(j) { return 10 + step * (j + 0.5) + (n - tgt.length) * step / 2; }
    var h = '<svg' + at('class', 'links') + at('width', w) + at('height', H) + '>';
    sets.forEach(function (set) {
      (set.links ? set.links.split(' ') : []).forEach(function (p) {
        var ij = p.split('-').map(Number);
        h += '<line' + at('class', set.cls) + at('x1', xs(ij[0])) + at('y1', y1) + at('x2', xt(ij[1])) +
          at('y2', y2) + at('data-tip', set.name + ': ' + src[ij[0]] + ' \u2014 ' + tgt[ij[1]]) + '></line>';
      });
    });
    src.forEach(function (s, i) { h += '<text class="src"' + at('x', xs(i)) + at('y', ys) + ' text-anchor="middle">' + esc(s) + '</text>'; });
    tgt.forEach(function (t, j) { h += '<text class="tgt"' + at('x', xt(j)) + at('y', yt) + ' text-anchor="middle">' + esc(t) + '</text>'; });
    h += '</svg><p class="note links-legend">' + sets.map(function (set) {
      return '<span' + at('class', 'key ' + set.cls) + '></span> ' + esc(set.name);
    }).join(' &nbsp; ') + '</p>';
    return h;
  }

  var tipInstalled = false;
  /* One document-wide handler: the element under the mouse with a data-tip shows it in #tip. */
  function tooltips() {
    if (tipInstalled) return;
    tipInstalled = true;
    document.addEventListener('mousemove', function (e) {
      var tip = document.getElementById('tip');
      var el = e.target.closest ? e.target.closest('[data-tip]') : null;
      if (!tip) return;
      var text = el ? el.getAttribute('data-tip') : null;
      if (e.target.classList && e.target.classList.contains('grid')) text = gridTip(e.target, e);
      if (!text) { tip.style.display = 'none'; return; }
      tip.textContent = text;
      tip.style.display = 'block';
      tip.style.left = (e.clientX + 12) + 'px';
      tip.style.top = (e.clientY + 12) + 'px';
    });
  }

  /* The viewer: every record of the page's #data, one section each, drawn on the
     colour scale `scale` (a name of SCALE.scales; default linear). */
  function page(scale) {
    if (scale) state.scale = scale;
    tooltips();
    var records = JSON.parse(document.getElementById('data').textContent);
    var box = document.getElementById('maps');
    records.forEach(function (rec, k) { render(box, rec, k); });
    document.body.setAttribute('data-ready', '1');
  }

  root.AttentionView = {render: render, page: page, tooltips: tooltips, table: table, color: color,
    position: position, esc: esc, words: words, svg: svg, png: png, links: links, BIG: BIG,
    scale: function (name) { if (SCALE.scales[name]) state.scale = name; return state.scale; }};
})(window);
