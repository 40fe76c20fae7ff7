// The Attention tab in the page (playground/ui/attention_tab.py): a click or tap on a heatmap's row makes it the query,
// a new query position drawn from the steps the page holds (window.attentionPositions), the title of the chart
// scrolled under the stage's heading, and a row sent from the Why tab brought into view. Defines window.attentionPage.

// The page's store of attention_positions' answers (a few settings' steps) and the draw of a new query position from
// them: the view's figures are the step's held heatmaps with the new frame and the position's bars, laid over as the
// chart deck lays changes over its bases; its texts are the step's heading and notes and the position's sentence. The
// deck then holds that view under the key the server gives those settings, so its answers for them (the other steps,
// the spare decks) add to what is drawn and draw nothing again. Where nothing is held for the step and the deck on
// screen, or the box holds no position of the text (past its end, a decimal), null: the server answers.
window.attentionPositions = window.attentionPositions || (() => {
  const {DECK, POSITIONS_HELD} = window.playgroundConstants.attention;
  const {HOST_CLASS} = window.playgroundConstants.chartDeck;
  const held = [];  // newest last
  const merge = (base, changes) => window.chartDeck.merge(base, changes);  // objects key by key, traces one by one
  function keep(raw) {
    if (!raw) return;
    const sent = JSON.parse(raw);
    sent.known = new Set(Object.values(sent.keys));
    const same = held.findIndex(each => each.step === sent.step && each.keys['-1'] === sent.keys['-1']);
    if (same >= 0) held.splice(same, 1);
    held.push(sent);
    if (held.length > POSITIONS_HELD) held.shift();
  }
  async function move(value, step) {
    const deck = window.chartDeck.decks[DECK];
    const shown = deck && deck.views[step];
    const sent = shown && held.find(each => each.step === step && each.known.has(deck.key));
    const asked = value === null || value === '' ? NaN : Number(value);
    if (!sent || !Number.isInteger(asked) || asked < -1 || asked >= sent.length) return null;
    const at = sent.positions[asked < 0 ? sent.length - 1 : asked];
    const figures = at.changes.map((changes, slot) => {
      const base = sent.bases[slot] || shown.figures[slot];
      return changes === null || !base ? null : merge(base, changes);
    });
    if (figures.some((figure, slot) => !figure !== (at.changes[slot] === null))) return null;
    deck.key = sent.keys[String(asked)];
    deck.views = {[step]: {texts: [shown.texts[0], shown.texts[1], at.text], figures}};
    deck.raw = null;
    // a heatmap drawn with the step's data has only its frame moved (Plotly.relayout, a few ms: Plotly.react draws the
    // whole heatmap again); the deck is told it is drawn, and draws the rest
    const moved = [];
    at.changes.forEach((changes, slot) => {
      if (!changes || sent.bases[slot] || Object.keys(changes).join() !== 'layout'
          || Object.keys(changes.layout).join() !== 'shapes') return;
      const host = document.querySelector('#' + DECK + '-chart-' + slot + ' .' + HOST_CLASS);
      if (!host || !host._fullLayout || !host.signatures || host.dataset.stamp === undefined) return;
      if (signatures(shown.figures[slot]).join('\n') !== host.signatures.join('\n')) return;
      host.dataset.stamp = deck.key + '|' + step;
      moved.push([host, figures[slot].layout.shapes]);
    });
    const drawn = await window.chartDeck.draw(DECK, step);
    moved.forEach(([host, shapes]) => window.Plotly.relayout(host, {shapes}));
    return drawn;
  }
  const known = new WeakMap();  // a figure's traces as JSON (the deck's signatures of what a host draws), by data
  function signatures(figure) {
    if (!known.has(figure.data)) known.set(figure.data, figure.data.map(trace => JSON.stringify(trace)));
    return known.get(figure.data);
  }
  return {keep, move, held};
})();

window.attentionPage = window.attentionPage || (() => {
  const {DECK, QUERY_ELEM_ID, STAGE_ELEM_ID, ROW_FOOT_PX, STEP_TITLES} = window.playgroundConstants.attention;
  const {TAP_EVENT, DRAWN_EVENT} = window.playgroundConstants.chartDeck;
  const {scrollToStart} = window.playgroundPage;
  const OPENING_MOST_MS = 30000;  // an opening never ended (the page missed its answer) holds the first view no longer
  const CHARTS = "[id^='" + DECK + "-chart-'] .js-plotly-plot";  // the deck's drawn charts

  // The query position written by another tab (the Why tab's "Step through"), drawn as a typed one is (the box
  // answers its input event, not a change), and the page at the stage; once the framed row is drawn for that query,
  // where it lies outside the screen or under the stage's heading, which stays at the top of a wide screen (ui.CSS),
  // the chart's top is scrolled to the heading, or the row to the screen's foot where it would not be on screen then.
  // Where the heading does not stick (a phone), it is scrolled to the top of the screen, and pinned there where the
  // row would be below the screen, the row brought to the foot.
  // the Why tab's "Step through this head" under way (opening(true)) until its values are in this tab's controls
  // (queryShown, or opening(false) on a refusal): the tab's first view, held until the tab is shown
  // (events.once_shown), waits for them too (whenOpened), else it could read the defaults and draw last
  let openingSince = 0;
  // A first answer (attention_page) drawn where it was made for the inputs on screen, the query box among them, and
  // only then the position it shows written to the box (the last value of ``values``: -1 stays -1, a position past
  // the text's end comes back as its last token). An answer made for the box's value before the Why tab's
  // step-through (or a click on a row) wrote a new one leaves the box as it is.
  async function drawFirst(options, raw, view, values) {
    const now = values.slice(0, -1), shown = values[values.length - 1];
    const late = window.chartDeck.late(raw, now);
    const texts = await window.chartDeck.drawEvent(options, raw, view, now);
    return [...texts, late ? undefined : shown];
  }
  function opening(on) {
    openingSince = on ? Date.now() : 0;
  }
  function whenOpened() {
    return new Promise(resolve => {
      const opened = () => !openingSince || Date.now() - openingSince > OPENING_MOST_MS ? resolve()
        : setTimeout(opened, 50);
      opened();
    });
  }
  function queryShown() {
    opening(false);
    const box = document.querySelector('#' + QUERY_ELEM_ID + ' input');
    box?.dispatchEvent(new Event('input', {bubbles: true}));
    const stage = document.getElementById(STAGE_ELEM_ID);
    scrollToStart(STAGE_ELEM_ID);
    const query = box ? box.value : '';
    let tries = 0;
    const framed = () => {
      const plot = [...document.querySelectorAll(CHARTS)]
        .find(p => p.offsetParent && p._fullLayout && (p.layout.shapes || []).length);
      const trace = plot && plot.data.find(t => t.type === 'heatmap' && Array.isArray(t.customdata));
      const shape = plot && plot.layout.shapes[0], row = shape && Math.round((shape.y0 + shape.y1) / 2);
      const cells = trace && trace.customdata[row];
      if (cells && String(cells[0]).startsWith('row ' + query + ' ')) {
        if (!stage) return;
        const rowAt = () => plot.getBoundingClientRect().top + plot._fullLayout._size.t + plot._fullLayout.yaxis.l2p(row);
        // a heatmap wider than its slot (a phone's) scrolled sideways to the row's heaviest key: it opened at key 0,
        // and the row the Why tab sent read as white there (its cells' hovers end "value <number>")
        const slot = plot.parentElement;
        if (plot.wide && slot) {
          let best = -1, most = -Infinity;
          cells.forEach((cell, column) => {
            const value = /value (\S+)$/.exec(String(cell));
            if (value && Number(value[1]) > most) { most = Number(value[1]); best = column; }
          });
          if (best >= 0) {
            const x = plot._fullLayout._size.l + plot._fullLayout.xaxis.l2p(best);
            slot.scrollLeft = Math.max(0, x - (slot.clientWidth + plot._fullLayout._size.l) / 2);
          }
        }
        if (getComputedStyle(stage).position !== 'sticky') {
          // the heading again, where the view drawn put it; where the row is then below the screen, the heading is
          // pinned at the top (data-pinned, ui.CSS) and the row goes to the screen's foot: on a phone both are in sight
          scrollToStart(STAGE_ELEM_ID);
          if (rowAt() <= window.innerHeight - 40) return;
          stage.dataset.pinned = '';
        }
        const top = plot.getBoundingClientRect().top, y = rowAt();
        const under = stage.getBoundingClientRect().bottom, foot = window.innerHeight - ROW_FOOT_PX;
        // the chart's top (its title) just under the heading where the row is on screen then; else the row near the
        // screen's foot, as much of the chart above it in sight as fits (its title written under the heading)
        if (y < under || y > window.innerHeight - 40) {
          window.scrollBy({top: y - (top - under) <= foot ? top - under : y - foot});
        }
      } else if (++tries < 50) setTimeout(framed, 100);
    };
    setTimeout(framed, 100);
  }

  // A click (or a tap) on a heatmap's row makes that row's token the query. The row is the one the cell's hover
  // names ("row 12 (e), column ..."), so a window of a long text's rows picks the right position; the box's input
  // event then draws it as a typed position is drawn (query). On a touch screen a tap is read from the chart deck's
  // tap event, not from a click: after a sideways swipe Chromium sent no click with a place for a third of the taps.
  let picking = false;
  function listenForRowPicks() {
    if (picking) return;
    picking = true;
    const pick = (target, where) => {
      const host = target.closest && target.closest(CHARTS);
      const at = host && window.chartDeck && window.chartDeck.pointAt(host, where);
      if (!at) return;
      const [xaxis, yaxis] = [at.subplot.xaxis._id, at.subplot.yaxis._id];
      const trace = (host.data || []).find(t => t.type === 'heatmap' && Array.isArray(t.customdata) &&
                                                (t.xaxis || 'x') === xaxis && (t.yaxis || 'y') === yaxis);
      const cells = trace && trace.customdata[Math.round(at.yval)];
      const named = cells && /^row (\d+) /.exec(cells[Math.round(at.xval)] || '');
      const box = document.querySelector('#' + QUERY_ELEM_ID + ' input');
      if (!named || !box || box.value === named[1]) return;  // the query already: a tap reads the cell's value
      window.chartDeck.picked(host);
      box.value = named[1];
      box.dispatchEvent(new Event('input', {bubbles: true}));
    };
    document.addEventListener('click', event => window.chartDeck?.touch || pick(event.target, event));
    document.addEventListener(TAP_EVENT, event => pick(event.target, event.detail));
  }

  // Where the stage's heading sticks to the top of a wide screen (ui.CSS), or is pinned there on a phone
  // (queryShown), the title of the chart whose top has scrolled under it is written under the heading (the stage's
  // data-under, which ui.CSS shows).
  let marking = false;
  function listenUnderHeading() {
    if (marking) return;
    marking = true;
    let queued = false;
    const title = plot => String((plot.layout && plot.layout.title && (plot.layout.title.text ?? plot.layout.title))
      || '').replace(/<br\s*\/?>/g, ' ').replace(/<[^>]+>/g, '').replace(/\s+/g, ' ').trim();
    const mark = () => {
      queued = false;
      const stage = document.getElementById(STAGE_ELEM_ID);
      if (!stage) return;
      let under = '';
      if (stage.offsetParent && getComputedStyle(stage).position === 'sticky') {
        const edge = stage.getBoundingClientRect().bottom;
        const plot = [...document.querySelectorAll(CHARTS)].find(p => {
          if (!p.offsetParent || getComputedStyle(p).visibility === 'hidden' || !p.layout) return false;
          const box = p.getBoundingClientRect(), named = p.querySelector('.gtitle');
          // its title gone under the heading, and enough of the chart still below it to be read
          return (named ? named.getBoundingClientRect().bottom : box.top) <= edge + 1 && box.bottom > edge + 60;
        });
        under = plot ? title(plot) : '';
      }
      // a heading pinned for a row sent from the Why tab (QUERY_SHOWN_JS) goes back to its place once no chart is
      // under it (scrolled back up to the chart's top, or away from the charts, or the tab left)
      if (!under && stage.hasAttribute('data-pinned')) stage.removeAttribute('data-pinned');
      if ((stage.dataset.under || '') !== under) {
        if (under) stage.dataset.under = under;
        else delete stage.dataset.under;
      }
    };
    const queue = () => { if (!queued) { queued = true; requestAnimationFrame(mark); } };
    window.addEventListener('scroll', queue, {passive: true});
    window.addEventListener('resize', queue);
    document.addEventListener(DRAWN_EVENT, queue);
  }

  // (query box, step) -> (heading, what-if notes, query sentence, asked of the server, drawn in the page): one of the
  // last two stamped, so the server is asked for the view, or for the rest of it (the other steps, the spare decks)
  async function query(value, step) {
    // while the server makes the view of new settings (a head changed, the Why tab's step-through), the positions
    // held are the old settings': the server answers the new position with them
    const shown = window.chartDeck.isWaiting(DECK) ? null : await window.attentionPositions.move(value, step);
    const stamp = ' #' + Date.now();
    if (shown) return [...shown.texts, undefined, value + stamp];
    window.chartDeck.forget(DECK);  // its spares are of the query leaving
    return [undefined, undefined, undefined, value + stamp, undefined];
  }

  // the step picker moved by ``delta`` without asking the server (attention_tab.move_step in the page)
  function moveStep(step, delta) {
    const i = Math.max(STEP_TITLES.indexOf(step), 0) + delta;
    return STEP_TITLES[Math.min(Math.max(i, 0), STEP_TITLES.length - 1)];
  }

  // the tab's listeners, once: a click on a heatmap's row, the chart under the heading (attention_tab.LISTEN_JS)
  function listen() {
    listenForRowPicks();
    listenUnderHeading();
  }

  // the page's name for a setting of the what-if switches, [scale, mask, mask before scaling, temperature] -> "110|1.00"
  // (attention_tab.switch_label says the same in Python)
  function switchLabel(v) {
    return `${v[0] ? 1 : 0}${v[1] ? 1 : 0}${v[2] ? 1 : 0}|${Number(v[3]).toFixed(2)}`;
  }

  return {drawFirst, opening, whenOpened, queryShown, listen, listenForRowPicks, listenUnderHeading, query, moveStep, switchLabel};
})();
