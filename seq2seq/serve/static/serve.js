/* seq2seq-serve's page: translate as you type (debounced), the n-best list, and the
   attention drawn by attention.js (the HTML viewer's drawing code). Each change
   sends one POST /attention (translation, n-best, heatmap, heads, self-attention,
   attribution); a request older than the latest is aborted (AbortController: the
   server drops it before its search if it still waits). A key in the address's
   fragment (#key=KEY, never sent to the server as such) goes as Authorization.
   window.timing.typed / .drawn: when the last keystroke came and when its heatmap
   was drawn (performance.now(), ms), for the browser test's log. */
(function () {
  'use strict';
  var DEBOUNCE_MS = 120;
  var $ = function (id) { return document.getElementById(id); };
  var seq = 0, timer = null, inflight = null;
  var key = (location.hash.match(/[#&]key=([^&]+)/) || [])[1];
  var auth = key ? {'Authorization': 'Bearer ' + decodeURIComponent(key)} : {};
  window.timing = {typed: 0, drawn: 0};

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

  function showAttention(rec) {
    $('translation').textContent = rec.translation;
    var view = $('view');
    var before = view.querySelector('select.head');
    var head = before ? before.value : null;
    view.innerHTML = '';
    rec.title = rec.forced ? 'forced through the reference' : 'the model\'s translation';
    var sec = AttentionView.render(view, rec, 0);
    var sel = sec.querySelector('select.head');
    if (sel && head && Array.prototype.some.call(sel.options, function (o) { return o.value === head; })) {
      sel.value = head;
      sel.dispatchEvent(new Event('change'));
    }
    $('attr-explain').hidden = !rec.attribution;
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
      showAttention(rec);
      showNbest(rec.nbest);
      if (window.WhatIf) WhatIf.shown(rec);
      $('out').hidden = false;
      window.timing.drawn = performance.now();
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
  AttentionView.tooltips();
  window.ServePage = {update: update};
  if (window.WhatIf) WhatIf.install();
  fetch('/info', {headers: auth}).then(answered).then(function (info) {
    var lang = info.languages ? info.languages.source + ' \u2192 ' + info.languages.target + ', ' : '';
    $('model').textContent = lang + info.model.checkpoints.join(' + ') + ' (step ' + info.model.step +
      ', ' + info.model.parameters.toLocaleString() + ' parameters), beam ' + info.decoding.beam_size +
      ', seq2seq ' + info.version;
    if (!info.attribution) { $('attr').checked = false; $('attr').disabled = true; }
    document.body.setAttribute('data-ready', '1');
  }, function (err) {
    status(err.message + (key ? '' : ' (this page takes the key as #key=KEY)'), true);
  });
})();
