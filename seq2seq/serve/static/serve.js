/* seq2seq-serve's page: translate as you type (debounced), the n-best list, and the
   attention drawn by attention.js (the HTML viewer's drawing code). Each change
   sends one POST /attention (translation, n-best, heatmap, heads, self-attention,
   attribution); a request older than the latest is aborted (AbortController: the
   server drops it before its search if it still waits). A key in the address's
   fragment (#key=KEY, never sent to the server as such) goes as Authorization.
   The switch #unit draws the maps over pieces or words (AttentionView.words); with
   a reverse model the answer's reverse record and two_way links are drawn in
   #twoway. share.js saves the view (PNG, SVG, JSON) and keeps it in the URL.
   window.timing.render: how long the last answer took to draw (DOM and layout,
   ms), for the browser test's log.
   window.timing.typed / .drawn: when the last keystroke came and when its heatmap
   was drawn (performance.now(), ms), for the browser test's log. */
(function () {
  'use strict';
  var DEBOUNCE_MS = 120;
  var $ = function (id) { return document.getElementById(id); };
  var seq = 0, timer = null, inflight = null, last = null;
  var key = (location.hash.match(/[#&]key=([^&]+)/) || [])[1];
  var auth = key ? {'Authorization': 'Bearer ' + decodeURIComponent(key)} : {};
  window.timing = {typed: 0, drawn: 0, asked: 0};

  function abortStale() {
    if (inflight) inflight.abort();
    inflight = null;
  }

  function post(path, body, signal) {
    var headers = Object.assign({'Content-Type': 'application/json'}, auth);
    return fetch(path, {method: 'POST', headers: headers, signal: signal,
      body: JSON.stringify(body)}).then(answered);
  }

  function answered(r) {  // the JSON, or the server's one-line error thrown
    return r.json().then(function (data) {
      if (!r.ok) throw new Error(data.error || ('HTTP ' + r.status));
      return data;
    });
  }

  function status(text, error) {
    var s = $('status');
    s.textContent = text;
    s.className = error ? 'note error' : 'note';
  }

  function showNbest(candidates) {
    var list = $('nbest-list');
    list.innerHTML = '';
    candidates.forEach(function (c) {
      var li = document.createElement('li');
      li.textContent = c.text;
      var score = document.createElement('span');
      score.className = 'score';
      score.textContent = c.score.toFixed(3);
      li.appendChild(score);
      list.appendChild(li);
    });
  }

  /* The record as the page draws it: over pieces, or over words. */
  function inUnits(rec) { return $('unit').value === 'words' ? AttentionView.words(rec) : rec; }

  function showAttention(rec) {
    $('translation').textContent = rec.translation;
    var view = $('view');
    var before = view.querySelector('select.head');
    var head = before ? before.value : (window.SharePage ? SharePage.head() : null);
    view.innerHTML = '';
    rec.title = rec.forced ? 'forced through the reference' : 'the model\'s translation';
    var shown = inUnits(rec);
    var sec = AttentionView.render(view, shown, 0);
    var sel = sec.querySelector('select.head');
    if (sel && head && Array.prototype.some.call(sel.options, function (o) { return o.value === head; })) {
      sel.value = head;
      sel.dispatchEvent(new Event('change'));
    }
    $('attr-explain').hidden = !rec.attribution;
    showTwoWay(rec);
    return shown;
  }

  /* The reverse model's attention and both directions' word links (two_way, over
     the text's and the translation's whitespace words). */
  function showTwoWay(rec) {
    var box = $('twoway');
    box.innerHTML = '';
    box.hidden = !('reverse' in rec);  // absent: the server has no reverse model
    var h = '<h2>both directions</h2>';
    if (!rec.reverse) {
      box.innerHTML = h + '<p class="note">the translation is empty: nothing for the reverse model to read</p>';
      return;
    }
    var tw = rec.two_way, langs = window.reverseLanguages || 'the other way';
    if (tw) {
      h += '<p class="note">word links of ' + AttentionView.esc(tw.rule) + ' (' + AttentionView.esc(tw.readout) +
        '): the two models\' word attention, each mixed with its lexicon, combined as seq2seq-align does</p>';
      h += AttentionView.links(rec.text.trim().split(/\s+/), rec.translation.trim().split(/\s+/), [
        {name: 'forward', cls: 'forward', links: tw.forward_links},
        {name: 'reverse', cls: 'reverse', links: tw.reverse_links},
        {name: tw.rule, cls: 'combined', links: tw.links}]);
    } else {
      h += '<p class="note">no word links: a piece of one model is not a word of the text (an unknown piece?)</p>';
    }
    box.innerHTML = h;
    var back = rec.reverse;
    back.title = 'the reverse model (' + langs + ') reading the translation, forced through the text';
    AttentionView.render(box, inUnits(back), 1);
  }

  function update() {
    var text = $('src').value, ref = $('ref').value;
    var mine = ++seq;
    if (!text.trim()) { $('out').hidden = true; status(''); return; }
    var req = {text: text, attribution: $('attr').checked, nbest: +$('nbest').value};
    if ($('beam').value) req.beam_size = +$('beam').value;
    if (ref.trim()) req.reference = ref;
    if (window.WhatIf) WhatIf.extend(req);
    status('translating…');
    abortStale();
    inflight = new AbortController();
    post('/attention', req, inflight.signal).then(function (rec) {
      if (mine !== seq) return;
      var t0 = performance.now();
      last = rec;
      $('out').hidden = false;
      var shown = showAttention(rec);
      showNbest(rec.nbest);
      if (window.WhatIf) WhatIf.shown(rec, shown);
      void document.body.offsetHeight;  // the layout, part of the drawing's time
      window.timing.drawn = performance.now();
      window.timing.render = window.timing.drawn - t0;
      if (window.SharePage) SharePage.remember();
      document.body.setAttribute('data-drawn', String(mine));
      status('');
    }, function (err) {
      if (mine === seq && err.name !== 'AbortError') status(err.message, true);
    });
  }

  function later() {
    seq++;  // an answer to the text before this keystroke is stale
    abortStale();
    window.timing.typed = performance.now();
    clearTimeout(timer);
    timer = setTimeout(update, DEBOUNCE_MS);
  }

  ['src', 'ref'].forEach(function (id) { $(id).addEventListener('input', later); });
  ['beam', 'nbest', 'attr'].forEach(function (id) { $(id).addEventListener('change', update); });
  $('unit').addEventListener('change', function () {  // the same answer, redrawn
    if (!last) return;
    var shown = showAttention(last);
    if (window.WhatIf) WhatIf.shown(last, shown);
    if (window.SharePage) SharePage.remember();
  });
  AttentionView.tooltips();
  window.ServePage = {update: update, last: function () { return last; }};
  if (window.WhatIf) WhatIf.install();
  if (window.SharePage) SharePage.install();
  if (window.SharePage && SharePage.restore()) update();
  fetch('/info', {headers: auth}).then(answered).then(function (info) {
    var lang = info.languages ? info.languages.source + ' \u2192 ' + info.languages.target + ', ' : '';
    $('model').textContent = lang + info.model.checkpoints.join(' + ') + ' (step ' + info.model.step +
      ', ' + info.model.parameters.toLocaleString() + ' parameters), beam ' + info.decoding.beam_size +
      ', seq2seq ' + info.version;
    if (info.reverse) {
      var rl = info.reverse.languages;
      window.reverseLanguages = rl ? rl.source + ' \u2192 ' + rl.target : 'the other way';
      $('model').textContent += '; the other way: ' + window.reverseLanguages + ', ' +
        info.reverse.checkpoints.join(' + ') + ' (step ' + info.reverse.step + ')';
    }
    if (!info.attribution) { $('attr').checked = false; $('attr').disabled = true; }
    document.body.setAttribute('data-ready', '1');
  }, function (err) {
    status(err.message + (key ? '' : ' (this page takes the key as #key=KEY)'), true);
  });
})();
