// The Why tab in the page (playground/ui/why_page.py says what it holds): draws a new position, a head chosen in the
// list or by its bar, and a set of knocked out heads from the decks and knock-out numbers the page holds, and asks
// the server, through hidden boxes, for what it lacks. The headings it writes are the ones why_tab writes from the
// same numbers (knockText is why_views._knock_text: keep the two alike). Defines window.whyPage.
window.whyPage = window.whyPage || (() => {
  const {STRONGEST, KNOCK_HINT, LOOK_FOR_KNOCK, KNOCK_FOLD, KNOCK_NAMED, KNOCK_COLUMNS, KNOCK_BARELY, KNOCK_FALLS,
         KNOCK_BARELY_MOVES, HERE, DECK, HEADS_DECK, CIRCUITS_DECK, RANKING_DECK, EVERY_KEY, KEY_CHAR_PX, KEY_GAP_PX,
         KEY_GLYPHS, HEADING_ELEM_ID, NARROW_PX, HEAD_ELEM_ID, PARTS_ELEM_ID, PICKER_ELEM_ID, PICKED_ELEM_ID,
         PART_NOTE_ELEM_ID, KNOCKED_ELEM_ID, CHOSEN_LINE_PX, PART_NOTE_CLASS, PART_NOTES,
         PART_NOTE_STAYS} = window.playgroundConstants.why;
  const {TAP_EVENT} = window.playgroundConstants.chartDeck;
  const decks = () => window.chartDeck.decks;
  const columns = prefix => document.querySelectorAll('[id^="' + prefix + '-chart-"]');
  let last = [];  // the headings on screen: one unchanged is not sent again (the page would redraw it)
  const changed = texts => texts.map((text, i) => {
    if (i > 3 || text === undefined) return text;
    if (text === last[i]) return undefined;
    last[i] = text;
    return text;
  });
  // near: the sets whose neighbours (one head ticked or unticked) the server has sent; asked: those asked for
  let knock = {key: null, raw: null, sets: {}, labels: {}, targets: [], note: '', near: {}, asked: {}};
  function takeKnock(raw, more) {  // the knock-out numbers (why_tab._knock_json): sets added to those of the key
    if (!raw || raw === knock.raw) return;
    const sent = JSON.parse(raw);
    if (more && knock.key !== null && sent.key !== knock.key) return;  // late: the settings changed since
    if (sent.key !== knock.key) knock = {key: sent.key, sets: {}, labels: {}, near: {}, asked: {}};
    knock.raw = raw;
    Object.assign(knock.sets, sent.sets);
    (sent.near || []).forEach(names => { knock.near[names] = true; });
    Object.assign(knock.labels, sent.labels);
    knock.targets = sent.targets;
    knock.note = sent.note;
  }
  const fixed = value => value.toFixed(3);
  const signed = value => (value >= 0 ? '+' : '') + value.toFixed(3);
  function knockText(position, knocked) {  // why_views._knock_text, from the same numbers; null: not held
    const names = knocked.join(', '), named = KNOCK_NAMED;
    const titled = knocked.length > named ? knocked.slice(0, named - 1).join(', ') + ' and ' +
      (knocked.length - named + 1) + ' more' : names;
    const lines = ['### ' + (names ? 'Knocked out: ' + titled : 'Knock heads out') + '\n\n' + LOOK_FOR_KNOCK];
    if (names) {
      const intact = knock.sets[''], out = knock.sets[names];
      if (!intact || !out || knock.targets.length <= position) return null;
      const target = knock.targets[position];
      const guess = knock.labels[intact.guesses[position]], outGuess = knock.labels[out.guesses[position]];
      const p = intact.p[position], outP = out.p[position];
      const table = [KNOCK_COLUMNS, '|---|---|---|---|'];
      const change = intact.loss === null ? null : out.loss - intact.loss;
      if (change !== null) {
        table.push('| loss on the text | ' + fixed(intact.loss) + ' | ' + fixed(out.loss) + ' | ' + signed(change) +
                   ' |');
      }
      table.push('| guess at position ' + position + ' | `' + guess + '` | `' + outGuess + '` | ' +
                 (guess === outGuess ? 'same' : 'changed') + ' |');
      table.push('| p(`' + target + '`) | ' + fixed(p) + ' | ' + fixed(outP) + ' | ' + signed(outP - p) + ' |');
      lines.push(table.join('\n'));
      if (change !== null && Math.abs(change) < KNOCK_BARELY) {
        lines.push(KNOCK_BARELY_MOVES[knocked.length === 1 ? 0 : 1]);
      } else if (change !== null && change < 0) {
        lines.push(KNOCK_FALLS[knocked.length === 1 ? 0 : 1]);
      }
    } else {
      lines.push(KNOCK_HINT);
    }
    lines.push(KNOCK_FOLD[0] + knock.note + KNOCK_FOLD[1]);
    return lines.join('\n\n');
  }
  let current = null;  // the position, head and knocked heads on screen
  async function show(position, head, knocked) {
    const moved = current !== null && String(current.position) !== String(position);
    const turned = current !== null && !moved && current.head !== head && head !== STRONGEST;
    current = {position, head, knocked: knocked || []};
    const texts = changed(await compose(position, head, knocked || []));
    // a new position on a phone: its answer sat at 730-755 px of an 844 px screen, below the fold of the eye; a head
    // chosen in the list: its heading at 809 px (a bar clicked is taken there by listen already)
    const answer = moved ? HEADING_ELEM_ID : turned ? HEAD_ELEM_ID : null;
    if (answer && window.innerWidth < NARROW_PX) {
      requestAnimationFrame(() => document.querySelector('#' + answer)
        ?.scrollIntoView({behavior: 'instant', block: 'start'}));
    }
    return texts;
  }
  // the chosen head's bar outlined in the parts chart: the views under it are that bar's, and the chart says which
  // head the page has opened
  function markChosen(head) {
    const plot = [...document.querySelectorAll('#' + PARTS_ELEM_ID + ' .js-plotly-plot')].find(p => p.offsetParent);
    const bars = plot && plot.data && plot.data[0];
    if (!bars || !Array.isArray(bars.customdata) || !window.Plotly) return;
    const widths = bars.customdata.map(part => part === head ? CHOSEN_LINE_PX : 0);
    const drawn = bars.marker && bars.marker.line && bars.marker.line.width;
    if (JSON.stringify(drawn) === JSON.stringify(widths)) return;
    window.Plotly.restyle(plot, {'marker.line.width': [widths], 'marker.line.color': '#212529'}, [0]);
  }
  function pick(head) {  // a head's bar clicked: its charts drawn now (show() then only writes the headings)
    if (current) compose(current.position, head, current.knocked);
  }
  async function compose(position, head, knocked) {
    const why = decks()[DECK];
    if (!why || why.key === null) return Array(7).fill(undefined);
    const length = parseInt(why.key), asked = Math.trunc(Number(position));
    if (!(asked >= -length && asked < length)) {
      [DECK, HEADS_DECK, CIRCUITS_DECK].forEach(
        deck => columns(deck).forEach(block => { block.style.display = 'none'; }));
      return ['### No position ' + position + '\n\nThe text has ' + length + ' tokens: positions 0 to ' +
              (length - 1) + ', or -1 for the last.', '', '', '', undefined, undefined, undefined];
    }
    // the circuits' columns keep a host per head (chart_deck.hosts(views=...)): shown again, whatever the head
    columns(CIRCUITS_DECK).forEach(block => { block.style.display = ''; });
    const name = String(asked < 0 ? asked + length : asked), stamp = ' #' + Date.now();
    const view = await window.chartDeck.draw(DECK, name);
    // a part's note names its bar's value at the position it was clicked at: gone at another (or the other split)
    const note = document.querySelector('#' + PART_NOTE_ELEM_ID + ' p.' + PART_NOTE_CLASS);
    if (note && !note.hidden && note.dataset.view !== why.key + '|' + name) note.hidden = true;
    if (!view) return [undefined, undefined, undefined, undefined, 'position ' + name + stamp, undefined, undefined];
    const chosen = head && head !== STRONGEST ? head : view.texts[1];
    markChosen(chosen);
    const reading = await window.chartDeck.draw(HEADS_DECK, chosen + '@' + name);
    const circuits = await window.chartDeck.draw(CIRCUITS_DECK, chosen);
    if (circuits) outline(reading ? reading.texts[2] : null);
    await window.chartDeck.draw(RANKING_DECK, 'ranking');
    const knockHeading = knockText(Number(name), knocked);
    // heads ticked and drawn from the numbers held: the sets one tick away are asked for once, meanwhile, so the
    // next tick is drawn in the page too
    const knockNames = knocked.join(', ');
    const askNear = knockNames && knockHeading !== null && !knock.near[knockNames] && !knock.asked[knockNames];
    if (askNear) knock.asked[knockNames] = true;
    // a head chosen: its reading at every position, asked for once (an unchanged request is no change of the box)
    const views = decks()[HEADS_DECK].views;
    const everywhere = chosen === view.texts[1] || [...Array(length).keys()].every(p => views[chosen + '@' + p]);
    return [view.texts[0], reading ? reading.texts[0] : undefined, knockHeading === null ? undefined : knockHeading,
            circuits ? circuits.texts[0].replace(HERE, (reading && reading.texts[1]) || '')
              : undefined,
            reading && circuits ? undefined : 'head ' + chosen + ' at ' + name + stamp,
            knockHeading === null || askNear ? 'knock ' + knockNames + stamp : undefined,
            everywhere ? undefined : chosen + ' in ' + why.key];
  }
  // the cells of the tables this position reads, outlined (why_tab._cell_shapes: the QK table's, the OV table's);
  // a table already outlined so is left alone: each answer that followed a click outlined both tables again, and
  // the split switch's last change came 330 ms after its charts were drawn
  function outline(raw) {
    const shapes = raw ? JSON.parse(raw) : [[], []];
    [0, 1].forEach(slot => {
      const plot = [...document.querySelectorAll('#' + CIRCUITS_DECK + '-chart-' + slot + ' .js-plotly-plot')]
        .find(p => p.offsetParent && getComputedStyle(p).visibility !== 'hidden');
      if (!plot || !plot._fullLayout) return;
      const wanted = JSON.stringify(shapes[slot] || []);
      // a layout drawn anew (Plotly.react: another figure) holds no outline, whatever was outlined before
      if (plot.outlined && plot.outlined.shapes === wanted && plot.outlined.layout === plot.layout) return;
      window.Plotly.relayout(plot, {shapes: shapes[slot] || [], ...namedTicks(plot, shapes[slot] || [])});
      plot.outlined = {shapes: wanted, layout: plot.layout};
    });
  }
  // the outlined row and cell named on their axes, which label every other character of 65: the row the heading
  // names ("QK row `e`") had no label, found only by its outline. Their neighbours' labels make room
  function namedTicks(plot, [band, cell]) {
    if (!plot.baseTicks || plot.baseTicks.layout !== plot.layout) {
      plot.baseTicks = {layout: plot.layout, x: plot.layout.xaxis.tickvals, y: plot.layout.yaxis.tickvals};
    }
    const labels = (plot.data[0] && plot.data[0].x) || [];
    const keep = (ticks, at) => {
      if (!Array.isArray(ticks) || at === undefined || !labels[at]) return ticks;
      return labels.filter((label, i) => i === at || (Math.abs(i - at) > 1 && ticks.includes(label)));
    };
    return {'xaxis.tickvals': keep(plot.baseTicks.x, cell && cell.x0 + 0.5),
            'yaxis.tickvals': keep(plot.baseTicks.y, band && band.y0 + 0.5)};
  }
  // the chain's keys all named where they fit its plot at the host's width, each label centred under its bar (up to
  // EVERY_KEY keys: a desktop's 18-key chain had 8 labels, the server's ticks being thinned for a phone); past that the
  // server's ticks and the hover. Laid out before the chain is drawn (chart_deck's fits): the plot is the host's
  // width less the figure's own margins
  window.chartDeck.fits[HEADS_DECK] = (figure, width, slot) => {
    const labels = slot === 0 && figure.data[0] && figure.data[0].customdata;
    if (!labels || labels.length > EVERY_KEY) return figure;
    const glyphs = KEY_GLYPHS;
    const named = labels.map(label => glyphs[label] || String(label));
    const margin = figure.layout.margin || {};
    const step = (width - (margin.l ?? 80) - (margin.r ?? 80)) / labels.length;
    const px = label => label.length * KEY_CHAR_PX, gap = KEY_GAP_PX;
    const fits = named.every((label, i) => !i || (px(named[i - 1]) + px(label)) / 2 + gap <= step);
    if (!fits) return figure;
    const ticks = {tickvals: labels.map((_, i) => i), ticktext: named, tickangle: 0};
    const layout = {...figure.layout, xaxis: {...figure.layout.xaxis, ...ticks},
                    xaxis3: {...figure.layout.xaxis3, ...ticks}};
    return {...figure, layout};
  };
  const holdsKnock = names => Boolean(knock.sets[names]);  // the numbers of this set of heads are in the page
  function forget(texts) {  // the view taken off (its model could not read the text): these headings instead
    [DECK, HEADS_DECK, CIRCUITS_DECK, RANKING_DECK].forEach(
      deck => columns(deck).forEach(block => { block.style.display = 'none'; }));
    document.querySelector('#' + PART_NOTE_ELEM_ID + ' p')?.setAttribute('hidden', '');
    last = [...texts];  // the next view's headings are all written again
    return texts;
  }
  // the other split's decks (why_tab.why_split_spare), by the key of the parts deck they were made beside: a split
  // switched is drawn from them at once, and the decks it leaves become the way back
  const splits = {};
  function keepSplit(raw) {
    if (!raw) return;
    const sent = JSON.parse(raw);
    splits[sent.around] = {label: sent.label, from: sent.from, decks: sent.decks};
    const keys = Object.keys(splits);
    if (keys.length > 4) delete splits[keys[0]];
  }
  function switchSplit(label) {  // true where the decks kept for ``label`` now stand in the page
    const why = decks()[DECK], spare = why && splits[why.key];
    if (!spare || spare.label !== label || !Object.keys(spare.decks).every(name => decks()[name])) return false;
    const back = {label: spare.from, from: label, decks: {}};
    for (const [name, sent] of Object.entries(spare.decks)) {
      const deck = decks()[name];
      back.decks[name] = {key: deck.key, views: deck.views, bases: deck.bases};
      Object.assign(deck, {key: sent.key, views: {...sent.views}, bases: {...(sent.bases || {})}, raw: null});
    }
    splits[spare.decks[DECK].key] = back;
    return true;
  }
  const holdsSplit = label => {  // the decks of this split are in the page, for the deck on screen
    const why = decks()[DECK];
    return Boolean(why && splits[why.key] && splits[why.key].label === label);
  };

  // A click on a bar of the attribution chart (on a touch screen, the chart deck's tap): the bar whose row is under
  // the pointer names a part; a head's name goes into the hidden box, whose change opens that head. A part that is
  // not a head has no attention pattern to open: the note under the chart says so, and what its bar is.
  let listening = false;
  function listen() {
    if (listening) return;
    listening = true;
    const pick = (target, event) => {
      const chart = target.closest && target.closest('#' + PARTS_ELEM_ID + ' .js-plotly-plot');
      // the row under the click itself (y is the bar's index), not Plotly's last hover: a swipe's end left a bar's
      // hover behind, and a tap beside the plot later opened that bar's head
      const at = chart && window.chartDeck && window.chartDeck.pointAt(chart, event);
      const bars = at && (chart.data || []).find(trace => trace.type === 'bar' && Array.isArray(trace.customdata));
      const name = bars ? bars.customdata[Math.round(at.yval)] : undefined;
      const box = document.querySelector('#' + PICKED_ELEM_ID + ' textarea');
      const host = document.querySelector('#' + PART_NOTE_ELEM_ID);
      if (host && typeof name === 'string') {  // a part that is not a head: said what it is; a head: the note goes
        let note = host.querySelector('p.' + PART_NOTE_CLASS);
        if (!note) {
          note = host.appendChild(Object.assign(document.createElement('p'), {className: PART_NOTE_CLASS}));
        }
        const kind = /MLP$/.test(name) ? 'mlp' : /embedding$/.test(name) ? 'embedding' : 'bias';
        const index = bars.customdata.indexOf(name), value = Number(bars.x[index]);
        const widths = (bars.marker && bars.marker.line && bars.marker.line.width) || [];
        const open = Array.isArray(widths) ? bars.customdata[widths.findIndex(width => width > 0)] : undefined;
        const words = /^L\d+ H\d+$/.test(name) ? '' : PART_NOTES[kind].replace('{name}', name)
          .replace('{value}', (value >= 0 ? '+' : '') + value.toFixed(2)) +
          (open ? PART_NOTE_STAYS.replace('{head}', open) : '');
        // the note answers the tap: no value label beside it (a finger's label stayed over the bar for seconds)
        if (words) window.chartDeck?.picked(chart);
        const why = window.chartDeck?.decks?.[DECK];
        note.dataset.view = why ? why.key + '|' + why.shown : '';  // the position whose bar it names (compose)
        note.innerHTML = words.replace(/\*\*(.+?)\*\*/g, (_, bold) => '<b>' +
          bold.replace(/[&<>]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'})[c]) + '</b>');
        note.hidden = !words;
      }
      if (!box || typeof name !== 'string' || !/^L\d+ H\d+$/.test(name)) return;
      window.whyPage?.pick(name);  // its charts drawn at once; the head picker and the headings follow
      box.value = name + ' #' + Date.now();  // stamped: the same bar clicked again is a change again
      box.dispatchEvent(new Event('input', {bubbles: true}));
      // at once, not smoothly: the answer is there now (and Plotly's hover labels, under a pointer that a smooth
      // scroll moved over one bar after another, kept changing for a second after it was drawn)
      document.querySelector('#' + HEAD_ELEM_ID)?.scrollIntoView({behavior: 'instant', block: 'start'});
    };
    document.addEventListener('click', event => window.chartDeck?.touch || pick(event.target, event));
    document.addEventListener(TAP_EVENT, event => pick(event.target, event.detail));
    // a head pressed in the list with a mouse: its charts drawn as the button goes down, as a bar's are; the list's
    // own choice and input event (some 250 ms later: it closes and updates first) then only write the headings. Not
    // for a finger, whose press may start a scroll through the list rather than a choice.
    document.addEventListener('pointerdown', event => {
      if (event.pointerType !== 'mouse') return;
      const option = event.target.closest && event.target.closest('#' + PICKER_ELEM_ID + ' li[role="option"]');
      const name = option && option.getAttribute('aria-label');
      if (typeof name === 'string' && /^L\d+ H\d+$/.test(name)) window.whyPage?.pick(name);
    }, true);
  }

  // a head ticked in the knock-out list by a finger closes the list: a multiple choice stays open for the next, and
  // on a phone its 16 options covered the knock-out's answer below it (a mouse keeps it open, beside the answer)
  function knockChosen() {
    const box = document.activeElement;
    if (window.matchMedia('(pointer: coarse)').matches && box && box.closest('#' + KNOCKED_ELEM_ID)) box.blur();
  }

  // (the four decks, the knock-out numbers, the settings the page holds, position, head, knocked) -> the four
  // headings: keeps what arrived and draws the view on screen. An answer made for other settings than the page's now
  // is left. more: a follow-up, ignored where the settings changed since its first answer.
  // take's js= event: (the four decks, the knock-out numbers, checkpoint, text, target, split, position, head, knocked)
  // as Gradio hands them (why_page.take_js)
  function takeEvent(more, [raw, heads, circuits, ranking, knock, checkpoint, text, target, split, position, head,
                             knocked]) {
    return take(more, [raw, heads, circuits, ranking], knock, {checkpoint, text, target, split}, position, head, knocked);
  }
  async function take(more, [raw, heads, circuits, ranking], knock, settings, position, head, knocked) {
    if (window.chartDeck.late(raw, settings)) return [undefined, undefined, undefined, undefined];
    window.chartDeck.take(DECK, raw, more);
    window.chartDeck.take(HEADS_DECK, heads, more);
    window.chartDeck.take(CIRCUITS_DECK, circuits, more);
    window.chartDeck.take(RANKING_DECK, ranking, more);
    takeKnock(knock, more);
    return (await show(position, head, knocked)).slice(0, 4);
  }
  // a head's reading at every position arrived: kept, and the view drawn again
  async function takeHeads(heads, position, head, knocked) {
    window.chartDeck.take(HEADS_DECK, heads, true);
    return (await show(position, head, knocked)).slice(0, 4);
  }
  // a knock-out's numbers arrived: kept, and the view drawn again
  async function takeMoreKnock(knock, position, head, knocked) {
    takeKnock(knock, true);
    return (await show(position, head, knocked)).slice(0, 4);
  }
  // the split switched -> the four headings: drawn from the decks kept for it, where the page holds them; else left
  // as they are (the server's answer draws it)
  async function split(label, position, head, knocked) {
    if (!switchSplit(label)) return [undefined, undefined, undefined, undefined];
    return (await show(position, head, knocked)).slice(0, 4);
  }
  // a head's bar clicked ("L1 H0 #<click time>", written by listen): its name for the head picker; anything else
  // leaves the picker as it is
  function pickedHead(picked, current) {
    const name = typeof picked === 'string' ? picked.split(' #')[0] : '';
    return /^L\d+ H\d+$/.test(name) ? name : current;
  }
  // (checkpoint, text, heading): the heading of the head on screen, as the page shows it (why_tab.HEAD_ON_SCREEN_JS)
  function headOnScreen(checkpoint, text, heading) {
    return [checkpoint, text, document.querySelector('#' + HEAD_ELEM_ID + ' h3')?.innerText ?? heading];
  }
  // "Step through this head": the Attention tab marked as opening (its first view waits for these values), then the
  // head on screen (why_tab.STEP_THROUGH_JS)
  function stepThrough(checkpoint, text, heading) {
    window.attentionPage.opening(true);
    return headOnScreen(checkpoint, text, heading);
  }
  return {headOnScreen, stepThrough, show, pick, takeKnock, knockText, holdsKnock, forget, keepSplit, switchSplit, holdsSplit, listen, knockChosen,
          take, takeEvent, takeHeads, takeMoreKnock, split, pickedHead};
})();
