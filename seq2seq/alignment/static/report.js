/* The corpus report's table (seq2seq-align report=DIR inlines this file after
   scale.js and attention.js): a split's sentences with their scores and attention
   numbers, sortable (a header's button; again for the other order), filtered by a
   text and by each number's bounds, and a sentence opened below the table with the
   views that attention.js draws (AttentionView.render, the viewer's own code).

   #table holds {rows, columns, means, method}; #maps-data per sentence its map
   records (the translation's, then the reference's where gold links exist), each
   matrix packed as {shape, f16: base64 of little-endian float16} and unpacked only
   when the sentence is opened. */
(function (root) {
  'use strict';
  var View = root.AttentionView, esc = View.esc;
  var data = JSON.parse(document.getElementById('table').textContent);
  var maps = null;  // parsed on the first opening
  var rows = data.rows, order = rows.map(function (_, k) { return k; });
  var sortKey = null, sortDir = 1, trs = [];

  /* float16 (as its 16 bits) to a number */
  function half(h) {
    var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }
  /* {shape, f16} to nested arrays of that shape */
  function unpack(p) {
    var bin = atob(p.f16), n = bin.length / 2, flat = new Array(n);
    for (var i = 0; i < n; i++) flat[i] = half(bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8));
    function build(dims, off) {
      if (dims.length === 1) return flat.slice(off, off + dims[0]);
      var size = dims.slice(1).reduce(function (a, b) { return a * b; }, 1), out = [];
      for (var k = 0; k < dims[0]; k++) out.push(build(dims.slice(1), off + k * size));
      return out;
    }
    return build(p.shape, 0);
  }
  function record(packedRec) {
    var rec = {};
    Object.keys(packedRec).forEach(function (key) {
      var v = packedRec[key];
      rec[key] = v && typeof v === 'object' && v.f16 !== undefined ? unpack(v) : v;
    });
    return rec;
  }

  var columns = data.columns.filter(function (c) {  // numbers that some sentence has
    return rows.some(function (r) { return r[c.key] !== null; });
  });
  function number(v, digits) { return v === null ? '\u2013' : v.toFixed(digits); }

  function skeleton() {
    var h = '<p class="summary">' + rows.length + ' sentences; means: ' + columns.map(function (c) {
      return esc(c.label) + ' ' + number(data.means[c.key], Math.max(c.digits, 1));
    }).join(', ') + (data.method ? '; attribution: ' + esc(data.method) : '') + '.</p>';
    h += '<div class="filters"><label>filter <input id="text-filter" type="search" ' +
      'placeholder="words in source, translation or reference"></label> ' +
      '<span id="shown" aria-live="polite"></span></div>';
    h += '<table class="report"><thead><tr><th><button data-key="i">#</button></th>' +
      '<th class="text">source / translation / reference</th>';
    columns.forEach(function (c) {
      h += '<th><button' + ' data-key="' + esc(c.key) + '">' + esc(c.label) + '</button></th>';
    });
    h += '</tr><tr class="bounds"><th></th><th class="text">bounds (min, max):</th>';
    columns.forEach(function (c) {
      h += '<th><input type="number" step="any" class="min" data-key="' + esc(c.key) +
        '" aria-label="' + esc(c.label) + ' at least">' + '<input type="number" step="any" ' +
        'class="max" data-key="' + esc(c.key) + '" aria-label="' + esc(c.label) + ' at most"></th>';
    });
    h += '</tr></thead><tbody>';
    rows.forEach(function (r, k) {
      h += '<tr data-k="' + k + '"><td><button class="open" aria-label="open sentence ' + r.i +
        '">' + r.i + '</button></td><td class="text"><div class="src">' + esc(r.src) +
        '</div><div class="hyp">' + esc(r.hyp) + '</div><div class="ref">' + esc(r.ref) + '</div></td>';
      columns.forEach(function (c) { h += '<td class="num">' + number(r[c.key], c.digits) + '</td>'; });
      h += '</tr>';
    });
    return h + '</tbody></table>';
  }

  function sortBy(key) {
    sortDir = sortKey === key ? -sortDir : 1;
    sortKey = key;
    order.sort(function (a, b) {
      var x = rows[a][key], y = rows[b][key];
      if (x === null || y === null) return (x === null) - (y === null);  // no value last
      return (x < y ? -1 : x > y ? 1 : a - b) * sortDir;
    });
    var body = document.querySelector('table.report tbody');
    order.forEach(function (k) { body.appendChild(trs[k]); });
    document.querySelectorAll('table.report thead button').forEach(function (b) {
      var on = b.getAttribute('data-key') === key;
      b.parentNode.setAttribute('aria-sort', on ? (sortDir > 0 ? 'ascending' : 'descending') : 'none');
    });
  }

  function filter() {
    var words = document.getElementById('text-filter').value.toLowerCase().trim();
    var bounds = [];
    document.querySelectorAll('tr.bounds input').forEach(function (el) {
      if (el.value !== '') bounds.push({key: el.getAttribute('data-key'), min: el.classList.contains('min'), v: +el.value});
    });
    var shown = 0;
    rows.forEach(function (r, k) {
      var ok = !words || (r.src + '\n' + r.hyp + '\n' + r.ref).toLowerCase().indexOf(words) >= 0;
      bounds.forEach(function (b) {
        var v = r[b.key];
        if (v === null || (b.min ? v < b.v : v > b.v)) ok = false;
      });
      trs[k].hidden = !ok;
      if (ok) shown++;
    });
    document.getElementById('shown').textContent = 'showing ' + shown + ' of ' + rows.length;
  }

  function open(k) {
    if (!maps) maps = JSON.parse(document.getElementById('maps-data').textContent);
    var r = rows[k], box = document.getElementById('detail');
    var h = '<h2 id="detail-title" tabindex="-1">Sentence ' + r.i + '</h2>' +
      '<p><button id="back">back to the table</button></p><dl class="texts">' +
      '<dt>source</dt><dd>' + esc(r.src) + '</dd><dt>translation</dt><dd>' + esc(r.hyp) +
      '</dd><dt>reference</dt><dd>' + esc(r.ref) + '</dd></dl><p class="note">' +
      columns.map(function (c) { return esc(c.label) + ' ' + number(r[c.key], c.digits); }).join(', ') +
      '</p><div id="maps"></div>';
    box.innerHTML = h;
    var mbox = document.getElementById('maps');
    maps[k].forEach(function (packedRec, x) {
      var rec = record(packedRec);
      var sec = View.render(mbox, rec, r.i + (x ? '-reference' : ''));
      if (rec.attribution_method === 'occlusion') {  // attention.js names gradient × input
        var h3 = sec.querySelectorAll('.views h3')[1];
        if (h3) h3.textContent = 'attribution (occlusion: each source word\u2019s share of the drops)';
      }
    });
    document.querySelectorAll('table.report tr.open-row').forEach(function (tr) { tr.classList.remove('open-row'); });
    trs[k].classList.add('open-row');
    document.getElementById('back').addEventListener('click', function () {
      trs[k].querySelector('button.open').focus();
    });
    document.body.setAttribute('data-open', String(r.i));
    document.getElementById('detail-title').focus();
  }

  document.getElementById('report').innerHTML = skeleton();
  trs = Array.prototype.slice.call(document.querySelectorAll('table.report tbody tr'));
  document.querySelector('table.report thead').addEventListener('click', function (e) {
    var b = e.target.closest('button');
    if (b) sortBy(b.getAttribute('data-key'));
  });
  document.querySelector('table.report tbody').addEventListener('click', function (e) {
    var tr = e.target.closest('tr');
    if (tr) open(+tr.getAttribute('data-k'));
  });
  document.getElementById('text-filter').addEventListener('input', filter);
  document.querySelectorAll('tr.bounds input').forEach(function (el) { el.addEventListener('input', filter); });
  View.tooltips();
  filter();
  root.CorpusReport = {open: open, sortBy: sortBy, filter: filter, unpack: unpack};
  root.reportReadyMs = performance.now();
  document.body.setAttribute('data-ready', '1');
})(window);
