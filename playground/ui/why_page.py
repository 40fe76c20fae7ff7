"""The Why tab's page script: what runs in the browser, kept apart from the handlers (playground.ui.why_tab) that
send it numbers and figures.

The page holds the decks why_tab sends (chart_deck: every position's parts, heads' chains, circuits, the ranking)
and the knock-out numbers, and draws a new position, a head chosen in the list or by its bar, and a set of knocked
out heads from them without asking the server; what it lacks it asks for through hidden boxes. The headings it
writes are the ones why_tab writes from the same numbers (why_tab._knock_text and SHOW_JS's knockText: keep the two
alike). This module holds the deck names, the elements' ids, the words both sides write and the scripts; no handler.
"""

from __future__ import annotations

import json

from playground.ui import chart_deck

# the words the server and the page both write
STRONGEST = "the head that pushed most"  # the head list's value (an API caller's too)
STRONGEST_SHOWN = "the head with the longest bar"  # its label: a learner read "pushed most" as toward the guess, and a
# head that pushed against it has the longest bar where no head decides
# the list sits above the heading; a bar left of 0 said while nothing is knocked out (an eighth learner found those
# bars unexplained; with heads knocked out, a sentence says so where the loss falls)
KNOCK_HINT = ("Choose heads in the **knock out** list above to knock them out. A bar left of 0: the loss falls "
              "without that head.")
# a bar to the left is a head the text does better without: a learner read the longest bar, one to the left, as the
# head the text needed most
LOOK_FOR_KNOCK = "**Look for:** heads the text needs (right) or does better without (left)."
KNOCK_FOLD = ("<details><summary>more</summary>\n\n", "\n\n</details>")  # around the ranking's words
# Pictures first: the knock-out block showed about 65 words before its fold with a head knocked out (the heads' names
# three times over). The heading names up to KNOCK_NAMED heads (past that the first three, then "and 2 more": the
# list above names every one), the table's column says "knocked out", and the loss falling is said without the names.
KNOCK_NAMED = 4
# "as above": the charts above this block stay the intact model's (a tenth learner found nothing saying so)
KNOCK_COLUMNS = "| | intact, as above | knocked out | change |"
# A change in the loss smaller than this (nats) is said as none: over a short text, a head replaced by its mean moved
# the loss by a few thousandths either way, and a learner read "the loss falls" as the head being broken
KNOCK_BARELY = 0.01
KNOCK_FALLS = ("**Without it the loss falls**: trained to help, it hurts this text.",  # one head, several
               "**Without them the loss falls**: trained to help, they hurt this text.")
KNOCK_BARELY_MOVES = (f"**The loss barely moves** (under {KNOCK_BARELY}): this text hardly needs it.",
                      f"**The loss barely moves** (under {KNOCK_BARELY}): this text hardly needs them.")
# where the circuits' heading (one per head) takes the line on this position's query and key in its tables (the
# head's reading at the position carries it: why_tab._in_the_tables)
HERE = "<!-- here -->"

DECK, HEADS_DECK, CIRCUITS_DECK, RANKING_DECK = "why", "why-heads", "why-circuits", "why-ranking"
EVERY_KEY = 256  # the chain names every key, up to this many, where they fit the plot drawn: side by side they read
# as the text itself (the default text's 86 keys on a desktop), where the server's ticks named one key in eight
KEY_CHAR_PX, KEY_GAP_PX = 7, 4  # a character's width (plots.LABEL_CHAR_PX), and the least gap between two labels
KEY_GLYPHS = {"\\n": "⏎", "\\t": "⇥"}  # two-character labels named by one glyph where every key is named

HEADING_ELEM_ID = "why-heading"  # the position's heading, which a new position on a phone scrolls to
NARROW_PX = 700  # a screen narrower than this is a phone's: the answer is scrolled into view
HEAD_ELEM_ID = "why-head"  # the chosen head's heading, where a clicked bar takes the page
PARTS_ELEM_ID = f"{DECK}-chart-0"  # the attribution chart's host, whose head bars open their head
PICKER_ELEM_ID = "why-head-picker"  # the head list, whose options draw their head as they are pressed
PICKED_ELEM_ID = "why-picked-head"  # the hidden box a click on a head's bar writes the head's name into
PART_NOTE_ELEM_ID = "why-part-note"  # under the parts: what a clicked bar that is not a head means
KNOCKED_ELEM_ID = "why-knocked"  # the knock-out list
CHOSEN_LINE_PX = 2.5  # the outline of the chosen head's bar in the parts chart
# a head ticked in the knock-out list by a finger closes the list: a multiple choice stays open for the next, and on
# a phone its 16 options covered the knock-out's answer below it (a mouse keeps it open, beside the answer)
KNOCK_CHOSEN_JS = """() => {
  const box = document.activeElement;
  if (window.matchMedia('(pointer: coarse)').matches && box && box.closest('#""" + KNOCKED_ELEM_ID + """')) box.blur();
}"""
PART_NOTE_CLASS = "why-part-note"  # the note's paragraph in it (the element takes no room without one shown)
# A stranger clicked an MLP's bar and nothing happened: a part that is not a head has no attention pattern to open,
# and the page says so, and what its bar is, where it was clicked ({name}: the bar's)
PART_NOTES = {
    "mlp": "**{name}** has no attention pattern to open: an MLP reads only this position's own stream and writes "
           "back into it. Its bar, {value}, is what that write adds to the bars' total here.",
    "embedding": "The **{name}** has no attention pattern: it is what this character (or its place) writes before "
                 "any layer, read straight by the final norm and the LM head. Its bar: {value}.",
    "bias": "**{name}**: a constant, the same whatever the text, with no pattern to open. Its bar: {value}.",
}
# after a part's note, which head the views below still show (a learner tapped an MLP's bar and found the head
# before it still outlined and open, and read the view as half changed); {head}: the outlined bar's
PART_NOTE_STAYS = " The views below stay **{head}**'s, outlined above."
# A click on a bar of the attribution chart (on a touch screen, the chart deck's tap: chart_deck.TAP_EVENT): the bar
# whose row is under the pointer names a part; a head's name goes into the hidden box, whose change opens that head.
PICK_JS = """
if (!window.whyBarPicks) {
  window.whyBarPicks = true;
  const pick = (target, event) => {
    const chart = target.closest && target.closest('#""" + PARTS_ELEM_ID + """ .js-plotly-plot');
    // the row under the click itself (y is the bar's index), not Plotly's last hover: a swipe's end left a bar's
    // hover behind, and a tap beside the plot later opened that bar's head
    const at = chart && window.chartDeck && window.chartDeck.pointAt(chart, event);
    const bars = at && (chart.data || []).find(trace => trace.type === 'bar' && Array.isArray(trace.customdata));
    const name = bars ? bars.customdata[Math.round(at.yval)] : undefined;
    const box = document.querySelector('#""" + PICKED_ELEM_ID + """ textarea');
    const host = document.querySelector('#""" + PART_NOTE_ELEM_ID + """');
    if (host && typeof name === 'string') {  // a part that is not a head: said what it is; a head: the note goes
      let note = host.querySelector('p.""" + PART_NOTE_CLASS + """');
      if (!note) {
        note = host.appendChild(Object.assign(document.createElement('p'), {className: '""" + PART_NOTE_CLASS + """'}));
      }
      const kind = /MLP$/.test(name) ? 'mlp' : /embedding$/.test(name) ? 'embedding' : 'bias';
      const index = bars.customdata.indexOf(name), value = Number(bars.x[index]);
      const widths = (bars.marker && bars.marker.line && bars.marker.line.width) || [];
      const open = Array.isArray(widths) ? bars.customdata[widths.findIndex(width => width > 0)] : undefined;
      const words = /^L\\d+ H\\d+$/.test(name) ? '' : """ + json.dumps(PART_NOTES) + """[kind].replace('{name}', name)
        .replace('{value}', (value >= 0 ? '+' : '') + value.toFixed(2)) +
        (open ? """ + json.dumps(PART_NOTE_STAYS) + """.replace('{head}', open) : '');
      // the note answers the tap: no value label beside it (a finger's label stayed over the bar for seconds)
      if (words) window.chartDeck?.picked(chart);
      const why = window.chartDeck?.decks?.['""" + DECK + """'];
      note.dataset.view = why ? why.key + '|' + why.shown : '';  // the position whose bar it names (compose)
      note.innerHTML = words.replace(/\\*\\*(.+?)\\*\\*/g, (_, bold) => '<b>' +
        bold.replace(/[&<>]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'})[c]) + '</b>');
      note.hidden = !words;
    }
    if (!box || typeof name !== 'string' || !/^L\\d+ H\\d+$/.test(name)) return;
    window.whyPage?.pick(name);  // its charts drawn at once; the head picker and the headings follow
    box.value = name + ' #' + Date.now();  // stamped: the same bar clicked again is a change again
    box.dispatchEvent(new Event('input', {bubbles: true}));
    // at once, not smoothly: the answer is there now (and Plotly's hover labels, under a pointer that a smooth
    // scroll moved over one bar after another, kept changing for a second after it was drawn)
    document.querySelector('#""" + HEAD_ELEM_ID + """')?.scrollIntoView({behavior: 'instant', block: 'start'});
  };
  document.addEventListener('click', event => window.chartDeck?.touch || pick(event.target, event));
  document.addEventListener('""" + chart_deck.TAP_EVENT + """', event => pick(event.target, event.detail));
  // a head pressed in the list with a mouse: its charts drawn as the button goes down, as a bar's are; the list's
  // own choice and input event (some 250 ms later: it closes and updates first) then only write the headings. Not
  // for a finger, whose press may start a scroll through the list rather than a choice.
  document.addEventListener('pointerdown', event => {
    if (event.pointerType !== 'mouse') return;
    const option = event.target.closest && event.target.closest('#""" + PICKER_ELEM_ID + """ li[role="option"]');
    const name = option && option.getAttribute('aria-label');
    if (typeof name === 'string' && /^L\\d+ H\\d+$/.test(name)) window.whyPage?.pick(name);
  }, true);
}
"""
# Draws the view on screen from the decks the page holds, for (position, head, knocked heads): (heading, head heading,
# knock-out heading, circuits heading, the view to ask the server for, the knock-out to ask for). A position past the
# text's end clears the view and says so; a position or head whose view has not arrived asks the server (a stamped
# value in the hidden "need" box), and a set of knocked-out heads whose numbers have not, asks for those alone.
SHOW_JS = chart_deck.DECK_JS + """
window.whyPage = window.whyPage || (() => {
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
  function knockText(position, knocked) {  // why_tab._knock_text, from the same numbers; null: not held
    const names = knocked.join(', '), named = """ + str(KNOCK_NAMED) + """;
    const titled = knocked.length > named ? knocked.slice(0, named - 1).join(', ') + ' and ' +
      (knocked.length - named + 1) + ' more' : names;
    const lines = ['### ' + (names ? 'Knocked out: ' + titled : 'Knock heads out') + '\\n\\n' + """ \
    + json.dumps(LOOK_FOR_KNOCK) + """];
    if (names) {
      const intact = knock.sets[''], out = knock.sets[names];
      if (!intact || !out || knock.targets.length <= position) return null;
      const target = knock.targets[position];
      const guess = knock.labels[intact.guesses[position]], outGuess = knock.labels[out.guesses[position]];
      const p = intact.p[position], outP = out.p[position];
      const table = [""" + json.dumps(KNOCK_COLUMNS) + """, '|---|---|---|---|'];
      const change = intact.loss === null ? null : out.loss - intact.loss;
      if (change !== null) {
        table.push('| loss on the text | ' + fixed(intact.loss) + ' | ' + fixed(out.loss) + ' | ' + signed(change) +
                   ' |');
      }
      table.push('| guess at position ' + position + ' | `' + guess + '` | `' + outGuess + '` | ' +
                 (guess === outGuess ? 'same' : 'changed') + ' |');
      table.push('| p(`' + target + '`) | ' + fixed(p) + ' | ' + fixed(outP) + ' | ' + signed(outP - p) + ' |');
      lines.push(table.join('\\n'));
      if (change !== null && Math.abs(change) < """ + str(KNOCK_BARELY) + """) {
        lines.push(""" + json.dumps(list(KNOCK_BARELY_MOVES)) + """[knocked.length === 1 ? 0 : 1]);
      } else if (change !== null && change < 0) {
        lines.push(""" + json.dumps(list(KNOCK_FALLS)) + """[knocked.length === 1 ? 0 : 1]);
      }
    } else {
      lines.push(""" + json.dumps(KNOCK_HINT) + """);
    }
    lines.push(""" + json.dumps(KNOCK_FOLD[0]) + """ + knock.note + """ + json.dumps(KNOCK_FOLD[1]) + """);
    return lines.join('\\n\\n');
  }
  let current = null;  // the position, head and knocked heads on screen
  async function show(position, head, knocked) {
    const moved = current !== null && String(current.position) !== String(position);
    const turned = current !== null && !moved && current.head !== head && head !== """ + json.dumps(STRONGEST) + """;
    current = {position, head, knocked: knocked || []};
    const texts = changed(await compose(position, head, knocked || []));
    // a new position on a phone: its answer sat at 730-755 px of an 844 px screen, below the fold of the eye; a head
    // chosen in the list: its heading at 809 px (a bar clicked is taken there by PICK_JS already)
    const answer = moved ? '""" + HEADING_ELEM_ID + """' : turned ? '""" + HEAD_ELEM_ID + """' : null;
    if (answer && window.innerWidth < """ + str(NARROW_PX) + """) {
      requestAnimationFrame(() => document.querySelector('#' + answer)
        ?.scrollIntoView({behavior: 'instant', block: 'start'}));
    }
    return texts;
  }
  // the chosen head's bar outlined in the parts chart: the views under it are that bar's (a learner clicked a bar and
  // saw nothing in the chart say which head the page had opened)
  function markChosen(head) {
    const plot = [...document.querySelectorAll('#""" + PARTS_ELEM_ID + """ .js-plotly-plot')].find(p => p.offsetParent);
    const bars = plot && plot.data && plot.data[0];
    if (!bars || !Array.isArray(bars.customdata) || !window.Plotly) return;
    const widths = bars.customdata.map(part => part === head ? """ + str(CHOSEN_LINE_PX) + """ : 0);
    const drawn = bars.marker && bars.marker.line && bars.marker.line.width;
    if (JSON.stringify(drawn) === JSON.stringify(widths)) return;
    window.Plotly.restyle(plot, {'marker.line.width': [widths], 'marker.line.color': '#212529'}, [0]);
  }
  function pick(head) {  // a head's bar clicked: its charts drawn now (show() then only writes the headings)
    if (current) compose(current.position, head, current.knocked);
  }
  async function compose(position, head, knocked) {
    const why = decks()['""" + DECK + """'];
    if (!why || why.key === null) return Array(7).fill(undefined);
    const length = parseInt(why.key), asked = Math.trunc(Number(position));
    if (!(asked >= -length && asked < length)) {
      ['""" + DECK + """', '""" + HEADS_DECK + """', '""" + CIRCUITS_DECK + """'].forEach(
        deck => columns(deck).forEach(block => { block.style.display = 'none'; }));
      return ['### No position ' + position + '\\n\\nThe text has ' + length + ' tokens: positions 0 to ' +
              (length - 1) + ', or -1 for the last.', '', '', '', undefined, undefined, undefined];
    }
    // the circuits' columns keep a host per head (chart_deck.hosts(views=...)): shown again, whatever the head
    columns('""" + CIRCUITS_DECK + """').forEach(block => { block.style.display = ''; });
    const name = String(asked < 0 ? asked + length : asked), stamp = ' #' + Date.now();
    const view = await window.chartDeck.draw('""" + DECK + """', name);
    // a part's note names its bar's value at the position it was clicked at: gone at another (or the other split)
    const note = document.querySelector('#""" + PART_NOTE_ELEM_ID + """ p.""" + PART_NOTE_CLASS + """');
    if (note && !note.hidden && note.dataset.view !== why.key + '|' + name) note.hidden = true;
    if (!view) return [undefined, undefined, undefined, undefined, 'position ' + name + stamp, undefined, undefined];
    const chosen = head && head !== """ + json.dumps(STRONGEST) + """ ? head : view.texts[1];
    markChosen(chosen);
    const reading = await window.chartDeck.draw('""" + HEADS_DECK + """', chosen + '@' + name);
    const circuits = await window.chartDeck.draw('""" + CIRCUITS_DECK + """', chosen);
    if (circuits) outline(reading ? reading.texts[2] : null);
    await window.chartDeck.draw('""" + RANKING_DECK + """', 'ranking');
    const knockHeading = knockText(Number(name), knocked);
    // heads ticked and drawn from the numbers held: the sets one tick away are asked for once, meanwhile, so the
    // next tick is drawn in the page too
    const knockNames = knocked.join(', ');
    const askNear = knockNames && knockHeading !== null && !knock.near[knockNames] && !knock.asked[knockNames];
    if (askNear) knock.asked[knockNames] = true;
    // a head chosen: its reading at every position, asked for once (an unchanged request is no change of the box)
    const views = decks()['""" + HEADS_DECK + """'].views;
    const everywhere = chosen === view.texts[1] || [...Array(length).keys()].every(p => views[chosen + '@' + p]);
    return [view.texts[0], reading ? reading.texts[0] : undefined, knockHeading === null ? undefined : knockHeading,
            circuits ? circuits.texts[0].replace(""" + json.dumps(HERE) + """, (reading && reading.texts[1]) || '')
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
      const plot = [...document.querySelectorAll('#""" + CIRCUITS_DECK + """-chart-' + slot + ' .js-plotly-plot')]
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
  window.chartDeck.fits['""" + HEADS_DECK + """'] = (figure, width, slot) => {
    const labels = slot === 0 && figure.data[0] && figure.data[0].customdata;
    if (!labels || labels.length > """ + str(EVERY_KEY) + """) return figure;
    const glyphs = """ + json.dumps(KEY_GLYPHS, ensure_ascii=False) + """;
    const named = labels.map(label => glyphs[label] || String(label));
    const margin = figure.layout.margin || {};
    const step = (width - (margin.l ?? 80) - (margin.r ?? 80)) / labels.length;
    const px = label => label.length * """ + str(KEY_CHAR_PX) + """, gap = """ + str(KEY_GAP_PX) + """;
    const fits = named.every((label, i) => !i || (px(named[i - 1]) + px(label)) / 2 + gap <= step);
    if (!fits) return figure;
    const ticks = {tickvals: labels.map((_, i) => i), ticktext: named, tickangle: 0};
    const layout = {...figure.layout, xaxis: {...figure.layout.xaxis, ...ticks},
                    xaxis3: {...figure.layout.xaxis3, ...ticks}};
    return {...figure, layout};
  };
  const holdsKnock = names => Boolean(knock.sets[names]);  // the numbers of this set of heads are in the page
  function forget(texts) {  // the view taken off (its model could not read the text): these headings instead
    ['""" + DECK + """', '""" + HEADS_DECK + """', '""" + CIRCUITS_DECK + """', '""" + RANKING_DECK + """'].forEach(
      deck => columns(deck).forEach(block => { block.style.display = 'none'; }));
    document.querySelector('#""" + PART_NOTE_ELEM_ID + """ p')?.setAttribute('hidden', '');
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
    const why = decks()['""" + DECK + """'], spare = why && splits[why.key];
    if (!spare || spare.label !== label || !Object.keys(spare.decks).every(name => decks()[name])) return false;
    const back = {label: spare.from, from: label, decks: {}};
    for (const [name, sent] of Object.entries(spare.decks)) {
      const deck = decks()[name];
      back.decks[name] = {key: deck.key, views: deck.views, bases: deck.bases};
      Object.assign(deck, {key: sent.key, views: {...sent.views}, bases: {...(sent.bases || {})}, raw: null});
    }
    splits[spare.decks['""" + DECK + """'].key] = back;
    return true;
  }
  const holdsSplit = label => {  // the decks of this split are in the page, for the deck on screen
    const why = decks()['""" + DECK + """'];
    return Boolean(why && splits[why.key] && splits[why.key].label === label);
  };
  return {show, pick, takeKnock, knockText, holdsKnock, forget, keepSplit, switchSplit, holdsSplit};
})();
"""
ARGUMENTS = "position, head, knocked"  # what the page's view is drawn for: the last inputs of each drawing event


SETTINGS = "checkpoint, text, target, split"  # the inputs an answer was made for (why_tab._settings), as the page holds


def take_js(more: bool) -> str:
    """A ``js=`` function (the four decks, the knock-out numbers, checkpoint, text, target, split, position, head,
    knocked) -> the four headings: keeps what arrived and draws the view on screen. An answer made for other inputs
    than the page's now is left (a text typed, then a checkpoint chosen: the text's answer came second and drew the
    old model over the new one). ``more``: a follow-up, ignored where the settings changed since its first answer."""
    take = "".join(f"  window.chartDeck.take({json.dumps(name)}, {raw}, {json.dumps(more)});\n"
                   for name, raw in ((DECK, "raw"), (HEADS_DECK, "heads"), (CIRCUITS_DECK, "circuits"),
                                     (RANKING_DECK, "ranking")))
    unchanged = "[undefined, undefined, undefined, undefined]"
    late = f"  if (window.chartDeck.late(raw, {{{SETTINGS}}})) return {unchanged};\n"
    return (f"async (raw, heads, circuits, ranking, knock, {SETTINGS}, {ARGUMENTS}) => {{ {SHOW_JS}\n{late}{take}"
            f"  window.whyPage.takeKnock(knock, {json.dumps(more)});\n"
            f"  return (await window.whyPage.show({ARGUMENTS})).slice(0, 4);\n}}")


# a new position, a head chosen, heads ticked: drawn in the page from what it holds; what is not there is asked for
SHOW_EVENT_JS = f"async ({ARGUMENTS}) => {{ {SHOW_JS}\n  return await window.whyPage.show({ARGUMENTS});\n}}"
# a head's reading at every position, or a knock-out's numbers, arrived: kept, and the view drawn again
TAKE_HEADS_JS = (f"async (heads, {ARGUMENTS}) => {{ {SHOW_JS}\n  window.chartDeck.take({json.dumps(HEADS_DECK)}, "
                 f"heads, true);\n  return (await window.whyPage.show({ARGUMENTS})).slice(0, 4);\n}}")
# the other split's decks arrived: kept (why_tab.why_split_spare)
KEEP_SPLIT_JS = f"(raw) => {{ {SHOW_JS}\n  window.whyPage.keepSplit(raw);\n}}"
# the split switched (split, position, head, knocked) -> the four headings: drawn from the decks kept for it, where the
# page holds them; else left as they are (the server's answer draws it)
SPLIT_JS = (f"async (split, {ARGUMENTS}) => {{ {SHOW_JS}\n  if (!window.whyPage.switchSplit(split)) "
            f"return [undefined, undefined, undefined, undefined];\n"
            f"  return (await window.whyPage.show({ARGUMENTS})).slice(0, 4);\n}}")
TAKE_KNOCK_JS = (f"async (knock, {ARGUMENTS}) => {{ {SHOW_JS}\n  window.whyPage.takeKnock(knock, true);\n"
                 f"  return (await window.whyPage.show({ARGUMENTS})).slice(0, 4);\n}}")


# (the view of the model before is taken off, not left under the new name; "the other model's view is taken off"
# read as a fault to a stranger)
STALE = ("### No view of this checkpoint\n\nIt cannot read this text (the message says why and what to do), so "
         "nothing is drawn here. Change the text, or choose another checkpoint.")
# the checkpoint's first answer refused: the headings say so and every chart is taken off (the next answer draws)
STALE_JS = f"() => {{ {SHOW_JS}\n  return window.whyPage.forget({json.dumps([STALE, '', '', ''])});\n}}"


# A head's bar clicked ("L1 H0 #<click time>", written by PICK_JS): its name for the head picker, in the page;
# anything else leaves the picker as it is.
PICK_HEAD_JS = r"""(picked, current) => {
  const name = typeof picked === 'string' ? picked.split(' #')[0] : '';
  return /^L\d+ H\d+$/.test(name) ? name : current;
}"""
