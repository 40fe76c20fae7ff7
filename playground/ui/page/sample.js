// The Sample tab's inspector in the page (playground/ui/sample_tab.py): a tap or click on a generated character, the
// arrows beside it, and its chart deck drawn from what the page holds. Defines window.samplePage.
window.samplePage = window.samplePage || (() => {
  const {INSPECT_DECK_ID, INSPECT_ELEM_ID, PICKED_ELEM_ID, PHONE_WIDTH} = window.playgroundConstants.sample;

  // the coloured text's own click listener (its gr.HTML's js_on_load): the character clicked is outlined, the
  // inspector opened, and "<position> #<stamp>" written into the hidden box (stamped: the same character again is a
  // change again)
  function listen(element) {
    element.addEventListener('click', (event) => {
      const picked = event.target.closest('[data-position]');
      if (!picked || !element.contains(picked)) return;
      element.querySelectorAll('.picked').forEach((old) => old.classList.remove('picked'));
      picked.classList.add('picked');
      const header = document.querySelector('#' + INSPECT_ELEM_ID + ' > .label-wrap');
      if (header && !header.classList.contains('open')) header.click();
      const box = document.querySelector('#' + PICKED_ELEM_ID + ' textarea');
      if (!box) return;
      box.value = picked.dataset.position + ' #' + Date.now();
      box.dispatchEvent(new Event('input', {bubbles: true}));
    });
  }

  // the inspector's arrows: the picked character moved by ``delta`` within the text (its outline too), stamped like
  // a tap; nothing picked yet: the first character
  function step(picked, delta) {
    const text = document.querySelector('.sample-coloured');
    const chars = text ? text.querySelectorAll('[data-position]') : [];
    if (!chars.length) return picked;
    const now = String(picked || '').split(' #')[0].trim();
    const last = Number(chars[chars.length - 1].dataset.position);
    const next = now === '' ? 0 : Math.min(Math.max(Number(now) + (delta), 0), last);
    text.querySelectorAll('.picked').forEach((old) => old.classList.remove('picked'));
    text.querySelector('[data-position="' + next + '"]')?.classList.add('picked');
    return next + ' #' + Date.now();
  }

  // the inspector's first chart, once drawn, brought fully onto the screen (it opens below the text): on a phone to
  // the top of the screen, on a wider one by as little as shows it whole
  function reveal() {
    const chart = document.getElementById(INSPECT_DECK_ID + '-chart-0');
    if (!chart) return;
    const box = chart.getBoundingClientRect();
    const phone = window.innerWidth < PHONE_WIDTH;
    if (box.top < 0 || box.bottom > window.innerHeight) {
      chart.scrollIntoView({behavior: 'smooth', block: phone ? 'start' : 'nearest'});
    }
  }

  // a picked character: drawn from the deck the page holds when it is there for the layer and head in the fields
  // (no request); otherwise the stamped pick goes to the hidden "need" box, whose change asks the server
  async function showPicked(picked, layer, head) {
    const position = String(picked || '').split(' #')[0];
    const deck = window.chartDeck.decks[INSPECT_DECK_ID];
    const suffix = '|' + String(Number(layer)) + '|' + String(Number(head));
    if (!position || !deck || !deck.key || !deck.key.endsWith(suffix) || !deck.views[position]) {
      return [undefined, undefined, picked];
    }
    const shown = await window.chartDeck.draw(INSPECT_DECK_ID, position);
    reveal();
    return [Number(position), shown.texts[0], undefined];
  }

  // the server's deck of one view arrived: kept and drawn (then revealed)
  async function drawSent(raw, position) {
    window.chartDeck.take(INSPECT_DECK_ID, raw, false);
    const shown = await window.chartDeck.draw(INSPECT_DECK_ID, String(position));
    if (shown) reveal();
    return shown ? shown.texts[0] : undefined;
  }

  // every character's views arrived: kept, nothing drawn (``more``: added to a deck of the same text and head)
  function take(raw, more) {
    window.chartDeck.take(INSPECT_DECK_ID, raw, more);
  }

  // a new generation starts: the views held belong to the old text, so a tap until the new ones arrive asks the
  // server
  function forget() {
    const deck = window.chartDeck.decks[INSPECT_DECK_ID];
    if (deck) { deck.key = null; deck.views = {}; deck.raw = null; deck.bases = {}; }
  }

  // a prompt offered by the server, taken only where the box still holds the prompt it replaces (the learner may
  // have typed meanwhile): sample_tab.KEEP_TYPED_JS
  function keepTyped(offer, replaced, current) {
    return offer && current === replaced ? offer : current;
  }

  return {listen, step, reveal, showPicked, drawSent, take, forget, keepTyped};
})();
