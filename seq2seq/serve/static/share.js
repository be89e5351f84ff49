/* seq2seq-serve's page: save the attention shown and link to the view, beside
   serve.js. The buttons save the cross-attention map as drawn (its head, unit and
   scale: section #sentence-0's `shown`) as PNG or SVG (AttentionView.png / .svg,
   one drawing) or as JSON (the matrix and labels drawn, with the text and the
   translation). After each answer drawn, the view is kept in the URL's hash (text,
   reference, prefix, knock-outs, beam, n-best, attribution, occlusion, unit,
   scale, head); #link holds it, and a page opened on such a URL restores it. */
(function (root) {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var pendingHead = null;  // the head a restored view shows, once

  function shown() {
    var sec = $('sentence-0');
    return sec ? sec.shown : null;
  }

  function save(name, blob) {
    var a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 1000);
  }

  function fileName(v, ext) {
    return 'attention-' + v.unit + '-' + v.view.replace(/\s+/g, '') + '.' + ext;
  }

  /* The data drawn: the map's labels and weights, with what it is of. */
  function data(v) {
    var rec = root.ServePage.last();
    return {text: rec.text, translation: rec.translation, forced: rec.forced, title: v.title,
      view: v.view, unit: v.unit, scale: v.scale, src_tokens: v.src_tokens,
      tgt_tokens: v.tgt_tokens, weights: v.weights};
  }

  function install() {
    $('view').addEventListener('change', remember);  // a head or scale chosen
    $('save-svg').addEventListener('click', function () {
      var v = shown();
      if (v) save(fileName(v, 'svg'), new Blob([root.AttentionView.svg(v)], {type: 'image/svg+xml'}));
    });
    $('save-png').addEventListener('click', function () {
      var v = shown();
      if (v) root.AttentionView.png(v, function (blob) { save(fileName(v, 'png'), blob); });
    });
    $('save-json').addEventListener('click', function () {
      var v = shown();
      if (v) save(fileName(v, 'json'), new Blob([JSON.stringify(data(v))], {type: 'application/json'}));
    });
  }

  /* The view as URL parameters. */
  function params() {
    var p = new URLSearchParams(), w = root.WhatIf ? root.WhatIf.current() : {};
    var v = shown();
    p.set('text', $('src').value);
    if ($('ref').value) p.set('ref', $('ref').value);
    if ($('beam').value) p.set('beam', $('beam').value);
    p.set('nbest', $('nbest').value);
    p.set('attr', $('attr').checked ? '1' : '0');
    p.set('occ', $('occ').checked ? '1' : '0');
    p.set('unit', $('unit').value);
    if (v) { p.set('scale', v.scale); p.set('head', v.view); }
    if (w.prefix) p.set('prefix', JSON.stringify(w.prefix));
    if (w.words && (w.words.length || w.heads.length || w.selfHeads.length)) {
      p.set('ko', JSON.stringify({words: w.words, heads: w.heads, self_heads: w.selfHeads}));
    }
    return p;
  }

  /* Keep the view shown in the URL (no new history entry) and in #link. */
  function remember() {
    var url = location.pathname + '#' + params().toString();
    var key = (location.hash.match(/[#&]key=([^&]+)/) || [])[1];
    history.replaceState(null, '', key ? url + '&key=' + key : url);  // the key stays here,
    $('link').href = url;  // but never in a link to share
  }

  function json(text, fallback) {
    try { return JSON.parse(text); } catch (e) { return fallback; }
  }

  /* The view in the URL's hash, set on the page's controls and what-ifs; true when
     it holds a text (serve.js then asks for it). */
  function restore() {
    var p = new URLSearchParams(location.hash.replace(/^#/, ''));
    if (!p.get('text')) return false;
    $('src').value = p.get('text');
    $('ref').value = p.get('ref') || '';
    if (p.has('beam')) $('beam').value = p.get('beam');
    if (p.has('nbest')) $('nbest').value = p.get('nbest');
    if (p.has('attr')) $('attr').checked = p.get('attr') === '1';
    if (p.has('occ')) $('occ').checked = p.get('occ') === '1';
    if (p.has('unit')) $('unit').value = p.get('unit');
    if (p.has('scale')) root.AttentionView.scale(p.get('scale'));
    pendingHead = p.get('head');
    var ko = json(p.get('ko'), {}) || {};
    if (root.WhatIf) {
      root.WhatIf.restore({prefix: json(p.get('prefix'), null), words: ko.words, heads: ko.heads,
        selfHeads: ko.self_heads});
    }
    return true;
  }

  /* The head a restored view asked for, once. */
  function head() {
    var h = pendingHead;
    pendingHead = null;
    return h;
  }

  root.SharePage = {install: install, remember: remember, restore: restore, head: head};
})(window);
