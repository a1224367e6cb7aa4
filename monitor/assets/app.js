// The onceflow status page: polls api/page and draws the header, the plan,
// the charts (uPlot) and the table of recent batches. Text is set with
// textContent only; nothing from the server is parsed as HTML.
(function () {
  'use strict';

  var POLL_MS = 2000;
  var TABLE_ROWS = 50;
  // Dark, distinguishable strokes (Okabe-Ito, darkened for white).
  var PALETTE = ['#0b5fa5', '#c2410c', '#11652f', '#7e22ce', '#a16207', '#0e7490', '#be185d', '#374151'];
  var charts = {}; // figure id -> {plot, key}

  function byId(id) { return document.getElementById(id); }

  function setText(id, text, value) {
    var e = byId(id);
    e.textContent = text;
    if (value !== undefined) { e.setAttribute('data-value', String(value)); }
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }

  function fmtInt(n) { return Number(n).toLocaleString('en-US', { maximumFractionDigits: 0 }); }
  function fmtRate(n) { return Number(n).toLocaleString('en-US', { maximumFractionDigits: 1 }); }

  function fmtSI(v) {
    if (v === null || v === undefined) { return ''; }
    var a = Math.abs(v);
    if (a >= 1e9) { return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + 'G'; }
    if (a >= 1e6) { return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M'; }
    if (a >= 1e3) { return (v / 1e3).toFixed(a >= 1e4 ? 0 : 1) + 'k'; }
    return String(Math.round(v * 100) / 100);
  }

  // axisValues labels a y axis: SI units, with as many decimals as the
  // step between ticks needs (29.41M, 29.42M, not 29M, 29M).
  function axisValues(u, splits) {
    var maxAbs = 0;
    splits.forEach(function (v) { maxAbs = Math.max(maxAbs, Math.abs(v)); });
    var unit = 1, suffix = '';
    if (maxAbs >= 1e9) { unit = 1e9; suffix = 'G'; } else if (maxAbs >= 1e6) { unit = 1e6; suffix = 'M'; } else if (maxAbs >= 1e3) { unit = 1e3; suffix = 'k'; }
    var step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) / unit : 1;
    var decimals = step > 0 ? Math.min(4, Math.max(0, Math.ceil(-Math.log10(step) - 1e-9))) : 0;
    return splits.map(function (v) { return v === null ? '' : (v / unit).toFixed(decimals) + suffix; });
  }

  function fmtAge(s) {
    if (s < 1) { return Math.round(s * 1000) + ' ms ago'; }
    if (s < 120) { return s.toFixed(1) + ' s ago'; }
    if (s < 7200) { return Math.round(s / 60) + ' min ago'; }
    return (s / 3600).toFixed(1) + ' h ago';
  }

  // --- header and plan ---

  function drawHeader(doc) {
    var st = doc.status;
    setText('q-name', st.name || '(unnamed query)');
    document.title = (st.name || 'query') + ' · onceflow status';
    var badge = byId('q-state');
    badge.textContent = st.state;
    badge.className = 'badge ' + st.state;
    setText('q-id', st.id, st.id);
    setText('q-run', st.runId || 'not recorded', st.runId);
    setText('q-trigger', st.trigger || 'not recorded in the checkpoint', st.trigger);
    var lp = st.lastProgress;
    if (lp) {
      setText('q-last-batch', String(lp.batchId), lp.batchId);
      setText('q-last-rows', fmtInt(lp.numInputRows), lp.numInputRows);
      setText('q-last-duration', fmtInt(lp.batchDuration) + ' ms', lp.batchDuration);
      setText('q-last-rate', fmtRate(lp.processedRowsPerSecond) + ' rows/s', lp.processedRowsPerSecond);
    } else {
      ['q-last-batch', 'q-last-rows', 'q-last-duration', 'q-last-rate'].forEach(function (id) { setText(id, 'none yet', ''); });
    }
    setText('q-since', st.lastCommit ? fmtAge(st.secondsSinceLastCommit) : 'no commit yet', st.secondsSinceLastCommit);
    setText('q-health', st.healthy ? 'healthy' : (st.healthReason || 'unhealthy'), st.healthy);
    setText('q-from', doc.from === 'checkpoint' ? 'the checkpoint (read-only)' : 'the running query', doc.from);
    setText('q-note', doc.note || '');
    setText('q-error', st.lastError ? 'Last error: ' + st.lastError : '');
  }

  function drawPlan(plan) {
    var dl = byId('plan');
    dl.replaceChildren();
    if (!plan) { return; }
    function row(term, items) {
      dl.appendChild(el('dt', term));
      var dd = el('dd');
      if (!items || items.length === 0) {
        dd.textContent = 'none';
      } else if (items.length === 1) {
        dd.textContent = items[0];
      } else {
        var ul = el('ul');
        items.forEach(function (t) { ul.appendChild(el('li', t)); });
        dd.appendChild(ul);
      }
      dl.appendChild(dd);
    }
    var fromCheckpoint = byId('q-from').getAttribute('data-value') === 'checkpoint';
    row('Sources', plan.sources);
    if (plan.watermark) { row('Watermark', [plan.watermark]); }
    row('Steps', plan.steps && plan.steps.length ? plan.steps : [fromCheckpoint ? 'not recorded in the checkpoint' : 'none']);
    row('Stateful operators', (plan.operators || []).map(function (o) {
      var t = o.id + ' (' + o.kind + ')';
      if (o.keys && o.keys.length) { t += ' by ' + o.keys.join(', '); }
      if (o.emits) { t += ', emits ' + o.emits; }
      return t;
    }));
    if (plan.statePartitions) { row('State partitions', [String(plan.statePartitions)]); }
    if (plan.outputMode) { row('Output mode', [plan.outputMode]); }
    row('Sinks', (plan.sinks || []).map(function (s) { return s.description + ': ' + s.guarantee; }));
    if (plan.lateRows) { row('Late rows to', [plan.lateRows.description + ': ' + plan.lateRows.guarantee]); }
    if (plan.warnings && plan.warnings.length) { row('Warnings', plan.warnings); }
  }

  // --- charts ---

  // chartSpecs turns the batches into one spec per chart: the series'
  // labels and values, aligned with xs (the batch ids).
  function chartSpecs(batches) {
    function per(fn) { return batches.map(fn); }
    function keyed(collect) {
      // collect(b) returns {label: value}; one series per label seen.
      var labels = {};
      var rows = batches.map(function (b) {
        var m = collect(b) || {};
        Object.keys(m).forEach(function (k) { labels[k] = true; });
        return m;
      });
      return Object.keys(labels).sort().map(function (k) {
        return { label: k, values: rows.map(function (m) { return k in m ? m[k] : null; }) };
      });
    }
    function ops(field) {
      return keyed(function (b) {
        var m = {};
        (b.state || []).forEach(function (o) { m[o.id] = o[field]; });
        return m;
      });
    }
    var phases = ['plan', 'wal', 'read', 'state', 'sink', 'commit'];
    return [
      { id: 'chart-rates', y: 'rows/s', series: [
        { label: 'input rate', values: per(function (b) { return b.inputRowsPerSecond; }) },
        { label: 'processing rate', values: per(function (b) { return b.processedRowsPerSecond; }) }] },
      { id: 'chart-phases', y: 'ms', series: [{ label: 'total', values: per(function (b) { return b.batchDuration; }) }].concat(
        phases.map(function (p) { return { label: p, values: per(function (b) { return b.phases[p] || 0; }) }; })) },
      { id: 'chart-state-rows', y: 'rows', series: ops('rows') },
      { id: 'chart-state-bytes', y: 'bytes', series: ops('bytes') },
      { id: 'chart-lag', y: 'records', series: keyed(function (b) { return b.lag; }) },
      { id: 'chart-watermark', y: 's', series: [{ label: 'watermark delay', values: per(function (b) {
        return b.watermarkDelayMs === undefined || b.watermarkDelayMs === null ? null : b.watermarkDelayMs / 1000; }) }]
        .filter(function (s) { return s.values.some(function (v) { return v !== null; }); }) },
      { id: 'chart-late', y: 'rows', series: ops('lateRowsDropped') }
    ];
  }

  function drawChart(spec, xs) {
    var fig = byId(spec.id);
    var box = fig.querySelector('.plot');
    var points = 0;
    spec.series.forEach(function (s) { s.values.forEach(function (v) { if (v !== null && v !== undefined) { points++; } }); });
    fig.setAttribute('data-points', String(points));
    fig.setAttribute('data-series', String(spec.series.length));
    var c = charts[spec.id];
    if (points === 0) {
      if (c) { c.plot.destroy(); delete charts[spec.id]; }
      box.replaceChildren(el('p', 'No data in these batches.', 'empty'));
      return;
    }
    var key = spec.series.map(function (s) { return s.label; }).join('\u0000');
    var data = [xs].concat(spec.series.map(function (s) { return s.values; }));
    if (c && c.key === key) {
      c.plot.setData(data);
      return;
    }
    if (c) { c.plot.destroy(); }
    box.replaceChildren();
    var opts = {
      width: Math.max(300, box.clientWidth || 400),
      height: 220,
      scales: { x: { time: false } },
      series: [{ label: 'batch' }].concat(spec.series.map(function (s, i) {
        return { label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2, spanGaps: true, value: function (u, v) { return v === null ? '–' : fmtSI(v); } };
      })),
      axes: [
        { label: 'batch id', values: function (u, splits) { return splits.map(function (v) { return Number.isInteger(v) ? String(v) : ''; }); } },
        { label: spec.y, size: 70, values: axisValues }
      ]
    };
    var plot = new uPlot(opts, data, box); // eslint-disable-line no-undef
    charts[spec.id] = { plot: plot, key: key };
  }

  function drawCharts(batches) {
    var xs = batches.map(function (b) { return b.batchId; });
    setText('n-batches', String(batches.length), batches.length);
    chartSpecs(batches).forEach(function (spec) { drawChart(spec, xs); });
  }

  function resize() {
    Object.keys(charts).forEach(function (id) {
      var box = byId(id).querySelector('.plot');
      charts[id].plot.setSize({ width: Math.max(300, box.clientWidth), height: 220 });
    });
  }

  // --- table ---

  function drawTable(batches) {
    var tbody = byId('batches').querySelector('tbody');
    var rows = [];
    for (var i = batches.length - 1; i >= 0 && rows.length < TABLE_ROWS; i--) {
      var b = batches[i];
      var tr = el('tr');
      tr.setAttribute('data-batch', String(b.batchId));
      var td = el('td');
      var a = el('a', String(b.batchId) + (b.recovered ? ' (re-run)' : ''));
      a.setAttribute('href', 'api/progress/' + encodeURIComponent(String(b.batchId)));
      td.appendChild(a);
      tr.appendChild(td);
      tr.appendChild(el('td', b.timestamp));
      tr.appendChild(el('td', fmtInt(b.numInputRows), 'num'));
      tr.appendChild(el('td', fmtInt(b.batchDuration), 'num'));
      tr.appendChild(el('td', fmtRate(b.processedRowsPerSecond), 'num'));
      tr.appendChild(el('td', (b.offsets || []).join('; '), 'offsets'));
      rows.push(tr);
    }
    tbody.replaceChildren.apply(tbody, rows);
  }

  // --- polling ---

  function poll() {
    fetch('api/page', { cache: 'no-store' }).then(function (r) {
      if (!r.ok) { return r.text().then(function (t) { throw new Error(r.status + ': ' + t); }); }
      return r.json();
    }).then(function (doc) {
      drawHeader(doc);
      drawPlan(doc.plan);
      drawCharts(doc.batches || []);
      drawTable(doc.batches || []);
      setText('updated', new Date().toISOString());
      document.body.setAttribute('data-polls', String(Number(document.body.getAttribute('data-polls') || 0) + 1));
    }).catch(function (err) {
      var badge = byId('q-state');
      badge.textContent = 'unreachable';
      badge.className = 'badge';
      setText('q-error', 'The status server does not answer (' + err.message + '); the query may have stopped. Retrying.');
    }).then(function () { setTimeout(poll, POLL_MS); });
  }

  window.addEventListener('resize', resize);
  poll();
}());
