/* seq2seq-serve's what-ifs (issue #65), beside serve.js: each target piece's
   probability as a bar under it, its step's alternatives on hover and keyboard focus
   (choosing one continues the translation from the prefix that ends in it), source
   words, cross-attention heads and encoder self-attention heads to knock out
   (buttons, so Tab and Enter reach them), occlusion beside the attention, and what a
   what-if changed: the translation's pieces and the attention, new minus before.
   serve.js calls WhatIf.extend(request) before each POST /attention and
   WhatIf.shown(record) after drawing; WhatIf asks for a new one with
   ServePage.update(). Typing a new sentence clears the what-ifs.
   window.timing.asked: when the last what-if was clicked (performance.now(), ms);
   serve.js sets .drawn when its answer is drawn (the browser test prints the
   difference). */
(function (root) {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var esc = function (s) { return root.AttentionView.esc(s); };
  var EOS = '</s>';
  var TOP_K = 5;
  // prefix: pieces the translation starts with; words/heads/selfHeads ([layer,
  // head] pairs): knocked out; before: the record shown when the last what-if was
  // asked, last: the one shown now; selfShape: [layers, heads] of the encoder's
  // self-attention (a knocked-out model's answer carries none, its toggles stay)
  var state = {prefix: null, words: [], heads: [], selfHeads: [], before: null, last: null,
    selfShape: null};

  function reset() {
    state.prefix = null; state.words = []; state.heads = []; state.selfHeads = [];
    state.before = null;
  }

  function knocking() { return state.words.length || state.heads.length || state.selfHeads.length; }
  function active() { return !!(state.prefix || knocking()); }

  /* The request's what-ifs (serve.js builds the rest). */
  function extend(req) {
    req.top_k = TOP_K;
    if ($('occ') && $('occ').checked) req.occlusion = true;
    if (state.prefix && !req.reference) req.prefix_pieces = state.prefix.slice();
    if (knocking()) {
      req.knockout = {words: state.words.slice(), heads: state.heads.slice(),
        self_heads: state.selfHeads.map(function (p) { return p.slice(); })};
      req.attribution = false;  // they explain the whole model, not a knocked-out one
      req.occlusion = false;
    }
    return req;
  }

  /* Ask again with the what-ifs as they are now; the record now shown is "before". */
  function ask() {
    root.timing.asked = performance.now();
    state.before = state.last;
    root.ServePage.update();
  }

  function pct(p) { return (100 * p).toFixed(1) + '%'; }

  /* Each target piece: a button, a bar as long as its probability, and its step's
     alternatives (shown on hover and focus), each a button choosing it. */
  function drawSteps(rec) {
    var box = $('steps');
    if (!rec.steps) { box.innerHTML = ''; return; }
    var h = '';
    rec.steps.forEach(function (s, t) {
      var tip = s.piece + ': p = ' + s.prob.toFixed(3) + ', entropy ' + s.entropy.toFixed(2) + ' nats';
      h += '<span class="step" data-t="' + t + '"><button type="button" class="piece"' +
        ' aria-label="' + esc(tip + '; alternatives follow') + '" data-tip="' + esc(tip) + '">' +
        esc(s.piece) + '</button><span class="bar" aria-hidden="true"><span style="width:' +
        pct(s.prob) + '"></span></span><span class="alts" hidden>';
      s.alternatives.forEach(function (a) {
        var same = a.piece === s.piece, end = a.piece === EOS;
        h += '<button type="button" class="alt' + (same ? ' chosen' : '') + '" data-piece="' +
          esc(a.piece) + '"' + (same || end || rec.forced ? ' disabled' : '') + '>' + esc(a.piece) +
          ' <span class="p">' + a.prob.toFixed(3) + '</span></button>';
      });
      h += '</span></span>';
    });
    box.innerHTML = h;
  }

  function showAlts(step, on) {
    var alts = step.querySelector('.alts');
    if (alts) alts.hidden = !on;
  }

  function choose(button) {
    var t = +button.closest('.step').getAttribute('data-t');
    var pieces = state.last.tgt_tokens.slice(0, t);
    state.prefix = pieces.concat([button.getAttribute('data-piece')]);
    ask();
  }

  function hasPair(list, l, x) {
    return list.some(function (p) { return p[0] === l && p[1] === x; });
  }

  /* Source words, cross-attention heads and encoder self-attention heads (each
     layer's) as toggles (aria-pressed). */
  function drawKnock(rec) {
    var box = $('knock');
    if (rec.forced) { box.innerHTML = ''; return; }
    var h = '<span class="label">knock out</span> ';
    rec.src_words.forEach(function (w, i) {
      var on = state.words.indexOf(i) >= 0;
      h += '<button type="button" class="word" data-word="' + i + '" aria-pressed="' + on + '">' +
        esc(w.text) + '</button>';
    });
    (rec.heads || []).forEach(function (_, x) {
      var on = state.heads.indexOf(x) >= 0;
      h += '<button type="button" class="head" data-head="' + x + '" aria-pressed="' + on + '">head ' +
        (x + 1) + '</button>';
    });
    if (rec.self_attention) state.selfShape = [rec.self_attention.length, rec.self_attention[0].length];
    var shape = state.selfShape || [0, 0];
    for (var l = 0; l < shape[0]; l++) {
      for (var x = 0; x < shape[1]; x++) {
        var on = hasPair(state.selfHeads, l, x);
        h += '<button type="button" class="self-head" data-layer="' + l + '" data-head="' + x +
          '" aria-pressed="' + on + '" aria-label="encoder self-attention layer ' + (l + 1) +
          ', head ' + (x + 1) + '">self ' + (l + 1) + '.' + (x + 1) + '</button>';
      }
    }
    if (active()) h += ' <button type="button" id="whatif-reset">undo the what-ifs</button>';
    box.innerHTML = h;
  }

  function togglePair(list, l, x) {
    var k = -1;
    list.forEach(function (p, i) { if (p[0] === l && p[1] === x) k = i; });
    if (k >= 0) list.splice(k, 1); else list.push([l, x]);
    list.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
  }

  function toggle(list, value) {
    var k = list.indexOf(value);
    if (k >= 0) list.splice(k, 1); else list.push(value);
    list.sort(function (a, b) { return a - b; });
  }

  /* Occlusion beside the attention: each row's positive drops as shares (the
     heatmaps' scale), the drop in nats on hover; the Spearman ρ of each pair. */
  function drawOcclusion(rec) {
    var old = $('view').querySelector('.occ');
    if (old) old.remove();
    if (!rec.occlusion) return;
    var shares = rec.occlusion.map(function (row) {
      var pos = row.map(function (v) { return Math.max(v, 0); });
      var sum = pos.reduce(function (a, b) { return a + b; }, 0);
      return pos.map(function (v) { return sum > 0 ? v / sum : 0; });
    });
    var div = document.createElement('div');
    div.className = 'occ';
    var h = '<h3>occlusion (how much each piece\u2019s log p drops without each source word)</h3>';
    h += root.AttentionView.table(shares, rec.src_tokens, rec.tgt_tokens, {tip: function (i, j) {
      return rec.src_tokens[i] + ' \u2192 ' + rec.tgt_tokens[j] + ': drop ' +
        rec.occlusion[j][i].toFixed(3) + ' nats';
    }});
    var pairs = rec.correlations || {};
    Object.keys(pairs).forEach(function (k) {
      var v = pairs[k];
      h += '<p class="note">Spearman \u03c1(' + esc(k.replace('~', ', ')) + ') = ' +
        (v === null ? 'undefined' : v.toFixed(3)) + '</p>';
    });
    div.innerHTML = h;
    var views = $('view').querySelector('.views') || $('view');
    views.appendChild(div);
  }

  /* Longest common subsequence of two token lists: pairs [i in a, j in b]. */
  function lcs(a, b) {
    var n = a.length, m = b.length, L = [];
    for (var i = 0; i <= n; i++) { L.push(new Array(m + 1).fill(0)); }
    for (i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
      }
    }
    var pairs = [];
    i = 0; j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { pairs.push([i, j]); i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) i++; else j++;
    }
    return pairs;
  }

  /* Red where the new attention is higher, blue where lower (|Δ| 1: full colour). */
  function diverging(d) {
    var v = Math.min(1, Math.abs(d)), c = d > 0 ? [178, 24, 43] : [33, 102, 172];
    return 'rgb(' + c.map(function (x) { return Math.round(255 + (x - 255) * v); }).join(',') + ')';
  }

  /* What the last what-if changed: the pieces (new ones and dropped ones marked), the knock-out's
     change in the original translation's log-probability, and the attention of the
     rows both translations share (matched in order), new minus before. */
  function drawChange(rec) {
    var box = $('change');
    var before = state.before;
    if (!before || before.text !== rec.text) { box.innerHTML = ''; box.hidden = true; return; }
    var pairs = lcs(before.tgt_tokens, rec.tgt_tokens), kept = {}, stayed = {};
    pairs.forEach(function (p) { kept[p[1]] = p[0]; stayed[p[0]] = true; });
    var h = '<h3>what changed</h3><p class="diff-text">before: ' + before.tgt_tokens.map(function (p, i) {
        return i in stayed ? esc(p) : '<del>' + esc(p) + '</del>';
      }).join(' ') + '<br>now: ' + rec.tgt_tokens.map(function (p, j) {
        return j in kept ? esc(p) : '<ins>' + esc(p) + '</ins>';
      }).join(' ') + '</p>';
    if (rec.knockout) {
      var k = rec.knockout;
      h += '<p class="note">knocked out ' + esc(k.knocked_out) + ': log p of the original translation ' +
        k.original_log_prob.toFixed(3) + ' \u2192 ' + k.knocked_log_prob.toFixed(3) + ' (' +
        (k.change >= 0 ? '+' : '') + k.change.toFixed(3) + ')</p>';
    }
    h += '<table class="att diff"><tr><th></th>';
    rec.src_tokens.forEach(function (s) { h += '<th class="src">' + esc(s) + '</th>'; });
    h += '</tr>';
    rec.tgt_tokens.forEach(function (p, j) {
      var old = j in kept ? before.weights[kept[j]] : null;
      h += '<tr' + (old ? '' : ' class="added"') + '><th class="tgt">' + esc(p) + '</th>';
      rec.weights[j].forEach(function (w, i) {
        if (!old) { h += '<td class="cell new" data-tip="' + esc(p + ': a new row') + '"></td>'; return; }
        var d = w - old[i];
        h += '<td class="cell" style="background:' + diverging(d) + '" data-tip="' +
          esc(rec.src_tokens[i] + ' \u2192 ' + p + ': ' + old[i].toFixed(3) + ' \u2192 ' + w.toFixed(3)) + '"></td>';
      });
      h += '</tr>';
    });
    box.innerHTML = h + '</table><p class="note">attention now minus before: red higher, blue lower; ' +
      'rows without a match in the translation before are new.</p>';
    box.hidden = false;
  }

  /* rec: the answer; view: it as drawn (over pieces or words), for occlusion. */
  function shown(rec, view) {
    state.last = rec;
    drawSteps(rec);
    drawKnock(rec);
    drawOcclusion(view || rec);
    drawChange(rec);
  }

  function install() {
    var steps = $('steps'), knock = $('knock');
    steps.addEventListener('mouseover', function (e) {
      var s = e.target.closest('.step');
      steps.querySelectorAll('.step').forEach(function (x) { showAlts(x, x === s); });
    });
    steps.addEventListener('focusin', function (e) {
      var s = e.target.closest('.step');
      steps.querySelectorAll('.step').forEach(function (x) { showAlts(x, x === s); });
    });
    steps.addEventListener('keydown', function (e) {
      if (e.key === 'Escape') steps.querySelectorAll('.step').forEach(function (x) { showAlts(x, false); });
    });
    steps.addEventListener('click', function (e) {
      var b = e.target.closest('button.alt');
      if (b && !b.disabled) choose(b);
    });
    knock.addEventListener('click', function (e) {
      var b = e.target.closest('button');
      if (!b) return;
      if (b.id === 'whatif-reset') { reset(); root.timing.asked = performance.now(); state.before = state.last; root.ServePage.update(); return; }
      if (b.classList.contains('word')) toggle(state.words, +b.getAttribute('data-word'));
      if (b.classList.contains('head')) toggle(state.heads, +b.getAttribute('data-head'));
      if (b.classList.contains('self-head')) {
        togglePair(state.selfHeads, +b.getAttribute('data-layer'), +b.getAttribute('data-head'));
      }
      ask();
    });
    $('src').addEventListener('input', function () { reset(); state.last = null; state.selfShape = null; });
    $('ref').addEventListener('input', function () { state.prefix = null; });
    if ($('occ')) $('occ').addEventListener('change', function () { root.ServePage.update(); });
  }

  /* The what-ifs as they are (share.js keeps them in the URL), and restored. */
  function current() {
    return {prefix: state.prefix, words: state.words.slice(), heads: state.heads.slice(),
      selfHeads: state.selfHeads.slice()};
  }
  function restore(saved) {
    reset();
    state.prefix = saved.prefix || null;
    state.words = saved.words || []; state.heads = saved.heads || [];
    state.selfHeads = saved.selfHeads || [];
  }

  root.WhatIf = {extend: extend, shown: shown, install: install, reset: reset, current: current,
    restore: restore};
})(window);
