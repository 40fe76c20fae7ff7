// The chart deck: the page draws a deck's views itself from the JSON the server sent once (playground/ui/chart_deck.py
// says what a deck holds). Defines window.chartDeck: take(name, raw) keeps a deck's views, draw(name, view) draws one;
// drawEvent and adoptEvent are what the js= events of chart_deck.draw_js and adopt_js call.
window.chartDeck = window.chartDeck || (() => {
  const {TAP_READ_MS, LABEL_STEPS, TAP_EVENT, DRAWN_EVENT, HOST_CLASS, WIDE_CLASS, PINNED_CLASS, TICKED_CLASS,
         NARROW_WIDTH, WAITING_ATTR, PHONE_WIDTH, REVEAL_BELOW} = window.playgroundConstants.chartDeck;
  const decks = {};
  const touch = window.matchMedia('(pointer: coarse)').matches;
    const TAP_SLOP_PX = 10;  // a finger that moved further is a swipe, not a tap
  const TAP_SCROLL_PX = 80;  // the page scrolled this far from a value shown: it is put away
  const SWIPE_CLICK_MS = 1000;  // a click this soon after a swipe over the chart ends that swipe
  const WIDE_MARGIN_PX = 90;  // a wide heatmap's margins beside its columns (the row labels, and 20 px)
  const WIDE_BAR_PX = 44;  // the room its level colour bar takes over the plot
  const WIDE_LINE_PX = 20;  // a title line's
  const STACK_BELOW_PX = 560, STACK_MOST = 6;  // a grid of at most 6 panels, in a host narrower: one a row
  const STACK_GAP_PX = 56, STACK_BAR_PX = 40;  // a stacked panel's title and tick labels; the colour bar's room
  const plotly = () => new Promise(resolve => {
    const wait = () => window.Plotly ? resolve(window.Plotly) : setTimeout(wait, 20);
    wait();
  });
  function take(name, raw, more) {  // more: views added to those of the same key, never replacing them
    const deck = decks[name] = decks[name] || {key: null, views: {}, raw: null, shown: null, bases: {}};
    if (raw && raw !== deck.raw) {
      const sent = JSON.parse(raw);
      if (more && deck.key !== null && sent.key !== deck.key) return deck;  // late: the settings changed since
      deck.raw = raw;
      if (sent.key !== deck.key) {
        if (sent.label !== undefined) {  // a deck naming its settings: the spares of the deck left still neighbour it
          const here = deck.labels && deck.labels[deck.key];
          if (deck.key !== deck.invalid && here !== undefined && carry(deck, deck.key, here, sent.key, sent.label)) {
            deck.spares[sent.key][here] = deck.spares[sent.key][here] || {key: deck.key, views: deck.views};
          }
          deck.labels = deck.labels || {};
          deck.labels[sent.key] = sent.label;
        }
        if (sent.key === deck.invalid) deck.invalid = null;  // those settings are back: their spares are right again
        deck.key = sent.key; deck.views = {}; deck.bases = {};
      }
      Object.assign(deck.views, sent.views);
      Object.assign(deck.bases, sent.bases || {});
    }
    return deck;
  }
  function merge(base, changes, key) {  // objects key by key, a figure's traces one by one; the rest replaced
    if (changes === undefined) return base;
    const object = value => value && typeof value === 'object' && !Array.isArray(value);
    if (key === 'data' && Array.isArray(base) && Array.isArray(changes)) {
      return changes.map((trace, i) => merge(base[i] || {}, trace));
    }
    if (!object(base) || !object(changes)) return changes;
    const out = {...base};
    for (const k of Object.keys(changes)) {
      if (changes[k] === null) delete out[k];  // a key the new figure has not
      else out[k] = merge(base[k], changes[k], k);
    }
    return out;
  }
  function figureOf(deck, figure) {  // {base, changes}: a figure sent once (the deck's bases) with these changes
    return figure && figure.base !== undefined ? merge(deck.bases[figure.base], figure.changes) : figure;
  }
  function touchLayout(layout) {  // a swipe over the chart scrolls the page: no drag, no zoom
    const out = {...layout, dragmode: false};
    if (layout.meta && layout.meta.touch_height) out.height = layout.meta.touch_height;  // rows a finger picks
    for (const axis of Object.keys(layout)) {
      if (/^[xy]axis\d*$/.test(axis)) out[axis] = {...layout[axis], fixedrange: true};
    }
    return out;
  }
  function pointAt(host, event) {  // the subplot under a pointer event, and where in its data: {subplot, xval, yval}
    const layout = host._fullLayout, svg = host.querySelector('.main-svg');
    if (!layout || !svg) return null;
    const box = svg.getBoundingClientRect(), x = event.clientX - box.left, y = event.clientY - box.top;
    const inside = axis => axis._offset <= (axis._id[0] === 'x' ? x : y) &&
                           (axis._id[0] === 'x' ? x : y) <= axis._offset + axis._length;
    const subplot = Object.values(layout._plots || {}).find(plot => inside(plot.xaxis) && inside(plot.yaxis));
    return subplot ? {subplot, xval: subplot.xaxis.p2c(x - subplot.xaxis._offset),
                      yval: subplot.yaxis.p2c(y - subplot.yaxis._offset)} : null;
  }
  // a tap on a touch screen shows the value under it, as a hover would; a finger that moved is a swipe, which shows
  // none, and the value shown goes at the next touch anywhere else or once the page has scrolled on, so no label stays
  // over the cells; a tap that picks something in its chart (picked(host): a heatmap's row made the query) shows
  // none, as its chart is redrawn for the pick and the tapped cell's value would sit over the new frame
  const tapped = new Set();  // the charts showing a tap's value
  let tappedAt = 0;  // the page's scroll then
  function hide(Plotly, host) { Plotly.Fx.unhover(host); tapped.delete(host); }
  function picked(host) {
    host.pickedAt = performance.now();
    if (window.Plotly && host._fullLayout) hide(window.Plotly, host);
  }
  function putAway(Plotly, keep) {
    for (const host of tapped) if (host !== keep) hide(Plotly, host);
  }
  function readTaps(Plotly, host) {
    if (!window.chartDeckTaps) {  // once per page: touches elsewhere, and scrolls
      window.chartDeckTaps = true;
      document.addEventListener('pointerdown', event => putAway(Plotly, event.target.closest &&
                                                                  event.target.closest('.js-plotly-plot')), true);
      window.addEventListener('scroll', () => {
        if (tapped.size && Math.abs(window.scrollY - tappedAt) > TAP_SCROLL_PX) putAway(Plotly, null);
      }, {passive: true});
    }
    // only the tap reader shows a value: Plotly's own hover, from the mouse events a browser makes up after a touch,
    // drew the tapped cell's value over the frame a picking tap had moved, once the chart was scrolled sideways
    host.on('plotly_beforehover', () => false);
    host.addEventListener('pointerdown', event => {
      host.tapFrom = [event.clientX, event.clientY];
      host.downAt = performance.now();
      host.swipedAt = null;  // a new touch: its click is its own
    }, true);
    // a swipe: the page takes the touch over, and the click that Chromium may still send at its end is no click
    // (Plotly drew the value under the finger for it, and a row or bar under it would have been picked)
    host.addEventListener('pointercancel', () => { host.tapFrom = null; host.swipedAt = performance.now(); }, true);
    host.addEventListener('click', event => {
      if (!(performance.now() - (host.swipedAt || -Infinity) < SWIPE_CLICK_MS)) return;
      host.swipedAt = null;
      event.stopPropagation();
      hide(Plotly, host);
    }, true);
    host.addEventListener('pointerup', event => {
      const [x, y] = host.tapFrom || [NaN, NaN];
      host.tapFrom = null;
      const at = Math.hypot(event.clientX - x, event.clientY - y) <= TAP_SLOP_PX ? pointAt(host, event) : null;
      if (!at) { hide(Plotly, host); return; }  // a swipe, or a tap beside the plot
      host.dispatchEvent(new CustomEvent(TAP_EVENT, {
        bubbles: true, detail: {clientX: event.clientX, clientY: event.clientY}}));  // a pick calls picked(host)
      // after the tap's own events: Plotly's end of a touch takes any hover label away, and its click picks
      const down = host.downAt;
      setTimeout(() => {
        if (!host._fullLayout || host.pickedAt >= down) return;
        Plotly.Fx.hover(host, {xval: at.xval, yval: at.yval}, at.subplot.id);
        tapped.add(host);
        tappedAt = window.scrollY;
      }, TAP_READ_MS);
    }, true);
  }
  function hostOf(block, view) {  // a slot's host for a view: its own where the slot keeps one per view
    if (!block) return null;
    const own = [...block.querySelectorAll('.' + HOST_CLASS + '[data-view]')];
    if (!own.length) return block.querySelector('.' + HOST_CLASS);
    return own.find(host => host.dataset.view === view) || own[0];
  }
  function place(host, shown) {  // a view's own host: in the page while its view shows, else drawn out of sight
    const away = {position: 'absolute', top: '0', left: '0', right: '0', visibility: 'hidden',
                  pointerEvents: 'none'};
    for (const [property, value] of Object.entries(away)) host.style[property] = shown ? '' : value;
  }
  // fits[deck](figure, width, slot) -> the figure to draw at the host's width, laid out before it is drawn (a layout
  // changed after, by Plotly.relayout, drew the chart twice: 100 ms more for the Why tab's chain at each answer)
  const fits = {};
  function fitted(name, figure, host, slot) {
    return figure && fits[name] && host && host.clientWidth ? fits[name](figure, host.clientWidth, slot) : figure;
  }
  // On a touch screen a heatmap whose layout.meta.touch_columns is {count, px} gives each column at least px where
  // its slot is too narrow for that: it is drawn wider and scrolls sideways in its slot, from its left edge (the row
  // labels, and a row's frame, which spans its width), with its title and a level colour bar over that edge (a phone
  // fitted an 86-token pattern's columns into 160 px and labelled every sixth key)
  function widen(host) {  // the width to draw at, setting the host's own where it is wider than its slot
    const wants = touch && host.touchColumns, slot = host.parentElement;
    const room = slot ? slot.clientWidth : 0;
    const needed = wants && room ? Math.ceil(wants.count * wants.px + WIDE_MARGIN_PX) : 0;
    const wide = needed > room;
    host.style.width = wide ? needed + 'px' : '';
    host.classList.toggle(WIDE_CLASS, wide);  // every key's label kept (the page's CSS thins others)
    host.wide = wide ? room : 0;
    if (slot) slot.style.overflowX = wide ? 'auto' : '';
    return host.clientWidth;
  }
  // a wide heatmap's row labels and its y title stay at its slot's left edge as the slot scrolls sideways, the labels
  // over a strip of the page's background, so the rows stay named when swiped to the last keys
  function pinRows(host) {
    const labels = host.querySelector('.yaxislayer-above'), title = host.querySelector('.g-ytitle');
    const slot = host.parentElement, size = host._fullLayout && host._fullLayout._size;
    if (!labels || !slot || !size) return;
    let strip = labels.querySelector('rect.' + PINNED_CLASS);
    if (!host.wide) {
      for (const group of [labels, title]) if (group) group.removeAttribute('transform');
      if (strip) strip.remove();
      return;
    }
    if (!strip) {
      strip = labels.insertBefore(document.createElementNS('http://www.w3.org/2000/svg', 'rect'), labels.firstChild);
      strip.setAttribute('class', PINNED_CLASS);
    }
    const place = {x: 0, y: size.t, width: size.l, height: size.h,
                   fill: host._fullLayout.paper_bgcolor || '#fff'};
    for (const [name, value] of Object.entries(place)) strip.setAttribute(name, value);
    for (const group of [labels, title]) if (group) group.setAttribute('transform', `translate(${slot.scrollLeft},0)`);
  }
  function pinning(host) {  // once per host: its labels pinned after every drawing and every sideways scroll
    if (host.pins) return;
    host.pins = true;
    host.on('plotly_afterplot', () => pinRows(host));
    const slot = host.parentElement;
    if (slot && !slot.pins) {
      slot.pins = true;
      slot.addEventListener('scroll', () => {
        for (const wide of slot.querySelectorAll('.' + WIDE_CLASS)) pinRows(wide);
      }, {passive: true});
    }
  }
  function wideLayout(layout, count) {  // its title says the chart goes on sideways
    const margin = layout.margin || {}, title = layout.title || {};
    const text = (title.text ? title.text + '<br>' : '') + 'swipe sideways: all ' + count + ' keys';
    return {...layout, title: {...title, text, x: 0, xref: 'container', xanchor: 'left', pad: {l: 12}},
            margin: {...margin, t: (margin.t ?? 80) + WIDE_BAR_PX + WIDE_LINE_PX, r: 20}};
  }
  function wideBar(trace, room, left) {  // the colour bar, level, under the title from the plot's left edge
    return {...trace, colorbar: {...trace.colorbar, orientation: 'h', x: 0, xref: 'paper', xanchor: 'left',
                                 xpad: 0, y: 1, yref: 'paper', yanchor: 'bottom', ypad: 6, thickness: 10,
                                 len: Math.min(260, room - left - 30), lenmode: 'pixels'}};
  }
  // A grid of a few panels (layout.meta.grid, plots.heads_grid) on a screen too narrow for two side by side is drawn
  // one panel under another, each as wide as the plot: a phone drew notebook 003's four heads at 100 x 100 px in a
  // 744 px chart, white above each pair
  function stacked(figure, width) {
    const grid = figure && figure.layout.meta && figure.layout.meta.grid;
    if (!grid || !width || width >= STACK_BELOW_PX || grid.panels < 2 || grid.panels > STACK_MOST) return figure;
    const n = grid.panels, layout = {...figure.layout}, margin = layout.margin || {};
    const side = Math.max(120, width - (margin.l ?? 80) - (margin.r ?? 80) - STACK_BAR_PX);  // a square panel
    const each = side + STACK_GAP_PX, plot = n * each;
    layout.height = (margin.t ?? 100) + (margin.b ?? 80) + plot;
    const tops = [...Array(n).keys()].map(i => 1 - (i * each + STACK_GAP_PX) / plot);
    tops.forEach((top, i) => {
      const x = 'xaxis' + (i ? i + 1 : ''), y = 'yaxis' + (i ? i + 1 : '');
      layout[x] = {...layout[x], domain: [0, 1]};
      layout[y] = {...layout[y], domain: [Math.max(0, top - side / plot), top], showticklabels: true};
    });
    layout.annotations = (layout.annotations || []).map(note => {  // make_subplots' titles: "head 3"
      const head = /^head (\d+)$/.exec(note.text || '');
      return head && +head[1] < n ? {...note, x: 0.5, y: tops[+head[1]], yanchor: 'bottom'} : note;
    });
    return {...figure, layout};
  }
  // Bars of characters whose labels the server chose for a desktop's width (layout.meta: important, label_px,
  // room_px): chosen again where the plot is narrower, the important ones first (the largest weights, the query),
  // then every k-th clear of them
  function thinned(figure, width) {
    const meta = figure && figure.layout.meta, labels = figure && figure.data[0] && figure.data[0].customdata;
    if (!meta || !meta.important || !meta.label_px || !Array.isArray(labels) || !width) return null;
    const margin = figure.layout.margin || {}, room = width - (margin.l ?? 80) - (margin.r ?? 80);
    // the server's choice where it fits, and wherever the page's CSS leaves every label (wider screens)
    if (room >= meta.room_px || window.innerWidth > NARROW_WIDTH) return null;
    const fits = Math.max(1, Math.floor(room / meta.label_px)), n = labels.length;
    const spacing = LABEL_STEPS.find(step => Math.ceil(n / step) <= fits) || Math.ceil(n / fits);
    const picked = [];
    const every = [...Array(Math.ceil(n / spacing)).keys()].map(k => k * spacing);
    for (const at of [...meta.important, ...every]) {
      if (at >= 0 && at < n && picked.every(other => Math.abs(other - at) >= spacing)) picked.push(at);
    }
    picked.sort((a, b) => a - b);
    const xaxis = {...figure.layout.xaxis, tickvals: picked, ticktext: picked.map(i => labels[i])};
    return {...figure, layout: {...figure.layout, xaxis}};
  }
  function paint(Plotly, host, figure, stamp) {
    if (!host || host.dataset.stamp === stamp) return;
    host.dataset.stamp = stamp;
    if (host.watch) { host.watch.disconnect(); host.watch = null; }  // a fit pending for the chart replaced here
    // a slot with no figure is hidden (its column) and emptied, never purged: Plotly finishes a drawing's automatic
    // margins later, and a chart purged before then threw "Cannot read properties of undefined" (a what-if drawn
    // from a spare deck, then turned back at once)
    host.touchColumns = figure && figure.layout.meta && figure.layout.meta.touch_columns;
    if (!figure) { widen(host); Plotly.react(host, [], {}); host.signatures = []; return; }
    const width = widen(host);
    figure = stacked(figure, width);
    const ticked = thinned(figure, width);
    host.classList.toggle(TICKED_CLASS, Boolean(ticked));  // the page's CSS leaves its labels be
    figure = ticked || figure;
    let layout = {...figure.layout, autosize: true, width: width || undefined};
    if (host.wide) layout = wideLayout(layout, host.touchColumns.count);
    // a trace equal to the one drawn keeps the drawn object: Plotly.react then skips it (a new query position
    // moves a heatmap's frame without computing the heatmap again)
    const signatures = figure.data.map(trace => JSON.stringify(trace));
    const before = host.data || [], known = host.signatures || [];
    const bar = trace => wideBar(trace, host.wide, layout.margin.l ?? 80);  // a wide heatmap's, level at its top
    const data = figure.data.map((trace, i) => known[i] === signatures[i] && before[i] ? before[i] :
                                                 host.wide && !i ? bar(trace) : trace);
    host.signatures = signatures;
    // a chart turning wide or back is drawn from an empty one: Plotly.react turning a colour bar level left the
    // upright bar's ticks drawn, and the room it had taken squeezed a phone's 42-row heatmap into 63 px
    if (Boolean(host.wide) !== Boolean(host.drawnWide) && host._fullLayout) Plotly.react(host, [], {});
    host.drawnWide = Boolean(host.wide);
    Plotly.react(host, data, touch ? touchLayout(layout) : layout,
                 {displaylogo: false, scrollZoom: false});
    if (host.wide || host.pins) { pinning(host); pinRows(host); }
    if (touch && !host.readsTaps) {  // Plotly shows no value on a tap once a swipe scrolls the page (no drag)
      host.readsTaps = true;
      readTaps(Plotly, host);
    }
    if (!host.clientWidth) {  // drawn while its tab was hidden: fit it once it has a width
      const watch = host.watch = new ResizeObserver(() => {
        if (!host.clientWidth) return;
        watch.disconnect();
        host.watch = null;
        if (host._fullLayout) Plotly.relayout(host, {width: widen(host)});  // still a chart (not purged)
      });
      watch.observe(host);
    }
  }
  async function draw(name, view, early) {
    const deck = decks[name];
    if (!deck) return null;
    if (view !== undefined) deck.shown = String(view);
    if (!deck.views[deck.shown]) return null;
    // ``early``: while the chart library still loads (a tab opened just after the page), the view's texts now and its
    // charts once it is in (the Attention tab showed no heading for 2-3.5 s)
    if (early && !window.Plotly) {
      plotly().then(() => draw(name));
      return deck.views[deck.shown];
    }
    // Plotly first: draws waiting for it (a tab opened before the chart library loaded) resume in any order, and each
    // then draws the view asked for last, never an older one over it
    const Plotly = await plotly();
    const shown = deck.views[deck.shown];
    if (!shown) return null;
    const stamp = deck.key + '|' + deck.shown;
    const slots = shown.figures.map((sent, slot) => {
      const figure = figureOf(deck, sent);
      const block = document.getElementById(name + '-chart-' + slot);
      return {figure, block, host: hostOf(block, deck.shown),
              own: block ? [...block.querySelectorAll('.' + HOST_CLASS + '[data-view]')] : []};
    });
    // columns shown or hidden first, so each chart is drawn at the width it keeps; a slot with a host per view
    // keeps its column (its views are drawn at its width) and shows the view's own host only
    slots.forEach(({figure, block, host, own}) => {
      if (!block) return;
      if (own.length) own.forEach(each => place(each, each === host && Boolean(figure)));  // an empty view: none
      else block.style.display = figure ? '' : 'none';
    });
    slots.forEach(({figure, host}, slot) => paint(Plotly, host, fitted(name, figure, host, slot), stamp));
    deck.drawn = stamp;  // the view on screen, as draw_js(more=True) asks
    document.dispatchEvent(new CustomEvent(DRAWN_EVENT, {detail: {name}}));
    prepare(name, Plotly);
    return shown;
  }
  function prepare(name, Plotly) {  // hosts per view: the views not on screen drawn out of sight, one chart
    // whenever the page is idle (never in the way of a click)
    const deck = decks[name];
    if (!deck || deck.preparing) return;
    const todo = [];
    for (const [view, each] of Object.entries(deck.views)) {
      each.figures.forEach((figure, slot) => {
        const host = hostOf(document.getElementById(name + '-chart-' + slot), view);
        const stamp = deck.key + '|' + view;
        if (host && host.dataset.view === view && host.dataset.stamp !== stamp) {
          todo.push({host, figure: figureOf(deck, figure), stamp, slot});
        }
      });
    }
    if (!todo.length) return;
    deck.preparing = true;
    const idle = window.requestIdleCallback || (next => setTimeout(next, 50));
    const next = () => {
      const item = todo.shift();
      if (!item) { deck.preparing = false; prepare(name, Plotly); return; }  // views that arrived meanwhile
      if (item.stamp.startsWith(deck.key + '|')) {  // not stale
        paint(Plotly, item.host, fitted(name, item.figure, item.host, item.slot), item.stamp);
      }
      idle(next);
    };
    idle(next);
  }
  let resizing = null;  // the charts are drawn at their host's width: a new window width (a phone turned) redraws
  window.addEventListener('resize', () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => document.querySelectorAll('.' + HOST_CLASS + '.js-plotly-plot').forEach(host => {
      if (host.clientWidth && host._fullLayout && window.Plotly) {
        window.Plotly.relayout(host, {width: widen(host)});
      }
    }), 150);
  });
  // Spare decks: views made ahead for settings one switch away, kept by the key of the deck they neighbour and
  // named by the page's own label of those settings. adopt() draws one at once where the page holds it (a what-if
  // switch answered without asking the server); the server's answer for those settings then has the same key and
  // draws nothing again. The deck left behind becomes the new deck's spare under its own label (a switch turned
  // back is drawn at once too).
  function keep(name, raw) {
    const deck = decks[name] = decks[name] || {key: null, views: {}, raw: null, shown: null, bases: {}};
    if (!raw) return deck;
    const sent = JSON.parse(raw);
    if (sent.key === deck.invalid) return deck;  // made around settings changed since (arriving after forget)
    deck.spares = deck.spares || {};
    deck.labels = deck.labels || {};
    deck.labels[sent.key] = sent.label;
    const held = deck.spares[sent.key] = deck.spares[sent.key] || {};
    const bases = sent.bases || {};  // figures the spares are sent as changes to (spare_json's bases)
    const whole = figure => figure && figure.base !== undefined && bases[figure.base] !== undefined
      ? merge(bases[figure.base], figure.changes) : figure;
    for (const [label, spare] of Object.entries(sent.spares)) {
      for (const view of Object.values(spare.views)) view.figures = view.figures.map(whole);
      held[label] = held[label] || {key: spare.key, views: {}};
      if (held[label].key === spare.key) Object.assign(held[label].views, spare.views);
    }
    const keys = Object.keys(deck.spares);
    if (keys.length > 8) delete deck.spares[keys[0]];  // a few settings' neighbours are enough
    return deck;
  }
  // a deck waiting for the server's view of settings the page has moved to (wait_js): the page's html element names
  // it in WAITING_ATTR until that view is drawn (draw_js's settings) or refused (settle_js); waiting_css shows it
  function waiting(name, on) {
    const root = document.documentElement;
    const names = new Set((root.getAttribute(WAITING_ATTR) || '').split(' ').filter(Boolean));
    if (on) names.add(name); else names.delete(name);
    if (names.size) root.setAttribute(WAITING_ATTR, [...names].join(' '));
    else root.removeAttribute(WAITING_ATTR);
  }
  function isWaiting(name) {  // the server is making ``name``'s view of settings the page has moved to
    return (document.documentElement.getAttribute(WAITING_ATTR) || '').split(' ').includes(name);
  }
  // a js= event that asks the server for a deck's view of new settings: the deck waits, the inputs pass on (wait_js)
  function waitEvent(name, values) {
    waiting(name, true);
    return values;
  }
  function forget(name) {  // the settings the spares were made around are changing: none of them is right now,
    // nor any made around them still on the way
    if (decks[name]) { decks[name].spares = {}; decks[name].invalid = decks[name].key; }
  }
  // A label names a spare's settings in full, fields joined by '|' (a layer, a head, a query position), and a spare
  // differs from the deck it neighbours only in those fields. A spare drawn differs from the deck it leaves only in
  // them too, so every spare of the deck left neighbours the new deck as well: a query position's spares stay when
  // another position is drawn from them. So does a deck the server sends with its label (deck_json's ``label``), as
  // long as no other setting changed since (``forget`` marks the deck left ``invalid``).
  function carry(deck, fromKey, from, toKey, to) {  // true where the two are labels of one kind
    const fields = label => String(label).split('|').length;
    if (from === undefined || fromKey === toKey || fields(from) !== fields(to)) return false;
    deck.spares = deck.spares || {};
    const out = deck.spares[toKey] = deck.spares[toKey] || {};
    for (const [label, spare] of Object.entries(deck.spares[fromKey] || {})) {
      if (label !== to && !out[label]) out[label] = spare;
    }
    return true;
  }
  function late(raw, now) {  // an answer made for inputs other than the page's ``now`` (deck_json's settings)
    const made = raw ? JSON.parse(raw).settings : undefined;
    return Boolean(made) && Object.keys(made).some(name => made[name] !== now[name]);
  }
  function held(name) {  // the labels of the spares around the deck on screen
    const deck = decks[name];
    return deck && deck.spares && deck.spares[deck.key] ? Object.keys(deck.spares[deck.key]) : [];
  }
  function heldJson(name) {  // held's labels as JSON, for a textbox the server reads (held_js)
    return JSON.stringify(held(name));
  }
  async function adopt(name, label, view) {
    const deck = decks[name];
    const spare = deck && deck.spares && deck.spares[deck.key] && deck.spares[deck.key][label];
    if (!spare || !spare.views[String(view)]) return null;
    const here = deck.labels[deck.key];
    deck.spares[spare.key] = deck.spares[spare.key] || {};
    carry(deck, deck.key, here, spare.key, label);
    if (here !== undefined) deck.spares[spare.key][here] = {key: deck.key, views: deck.views};
    deck.labels[spare.key] = label;
    deck.key = spare.key; deck.views = {...spare.views}; deck.raw = null;
    return draw(name, view);
  }
  function redraw(name) {  // a host just mounted (its tab opened): draw what the deck shows
    const deck = decks[name];
    if (!deck || deck.shown === null) return;
    document.querySelectorAll('[id^="' + name + '-chart-"] .' + HOST_CLASS)
      .forEach(host => { delete host.dataset.stamp; });
    draw(name);
  }
  const revealing = {};  // deck -> {view, id}: a view asked for before it was held, to reveal once drawn
  const unchanged = texts => Array(texts).fill(undefined);  // every Markdown output left as it is
  // A js= event's draw (chart_deck.draw_js): takes the textbox's deck and draws ``view``; returns the view's texts.
  // more: the textbox holds more views for the settings of the last first answer (ignored where those changed, or
  // where the view asked for is already drawn: drawing it again set its texts over a control clicked since).
  // settings: ``now`` holds the values the deck names, and an answer made for values the page has left is not drawn.
  // reveal: the id of the element that starts the answer, scrolled to on a phone where it lands low on the screen.
  async function drawEvent({deck, texts, reveal, more, settings}, raw, view, now) {
    let heldKey = null;
    if (more) {
      const held = decks[deck];
      heldKey = held && raw && raw !== held.raw && held.drawn === held.key + '|' + String(view) ? held.key : null;
    }
    if (settings) {
      if (late(raw, now)) return unchanged(texts);
      waiting(deck, false);
    }
    take(deck, raw, more);
    if (more && heldKey !== null && decks[deck].key === heldKey) return unchanged(texts);
    const shown = await draw(deck, view, true);
    // a view asked for with ``reveal`` that was not held yet is revealed by the draw that brings it (the server's
    // answer): on a phone a level picked before its deck arrived was drawn later, below the screen
    let wanted;
    if (reveal) {
      wanted = reveal;
      if (shown) delete revealing[deck]; else revealing[deck] = {view: String(view), id: wanted};
    } else {
      wanted = revealing[deck] && revealing[deck].view === String(view) ? revealing[deck].id : '';
      if (shown && wanted) delete revealing[deck];
    }
    const start = wanted && document.getElementById(wanted);
    const typing = document.activeElement && document.activeElement.matches(
      'textarea, input:not([type=radio]):not([type=checkbox]):not([type=range])');
    if (shown && start && !typing && window.innerWidth < PHONE_WIDTH &&
        start.getBoundingClientRect().top > window.innerHeight * REVEAL_BELOW) {
      start.scrollIntoView({behavior: 'smooth', block: 'start'});
    }
    return shown ? shown.texts : unchanged(texts);
  }
  // A js= event's spare drawn in the page (chart_deck.adopt_js): the spare that ``label`` (a function of the
  // settings' values) names, where the page holds it; the last value is the view's name.
  async function adoptEvent(deck, texts, label, values) {
    const shown = await adopt(deck, label(values.slice(0, -1)), values[values.length - 1]);
    return shown ? shown.texts : unchanged(texts);
  }
  return {take, draw, redraw, decks, keep, forget, waiting, isWaiting, adopt, merge, held, late, pointAt, picked, revealing,
          fits, touch, drawEvent, adoptEvent, waitEvent, heldJson};
})();
