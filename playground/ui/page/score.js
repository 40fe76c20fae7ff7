// "Why this score" in the page (playground/ui/score_views.py draws it): a click on a bar whose pair holds an earlier
// head goes to that head. In the Why tab the head is chosen as a click on its bar in the parts chart chooses it (its
// charts drawn in the page, the head list following); in the Attention tab its name and the position it wrote at go
// into a hidden box, whose input opens that head's walkthrough there. Defines window.scorePage.
window.scorePage = window.scorePage || (() => {
  const {WHY_SCORE_ELEM_ID, ATTENTION_SCORE_ELEM_ID, ATTENTION_SCORE_PICKED_ELEM_ID} = window.playgroundConstants.score;
  const {PICKED_ELEM_ID, HEAD_ELEM_ID} = window.playgroundConstants.why;
  const HEAD_AT = /^L\d+ H\d+@\d+$/;
  // the bar under a click: its customdata's second field, "L1 H0@62", or "" for a pair without a head
  function barAt(chart, event) {
    const at = window.chartDeck && window.chartDeck.pointAt(chart, event);
    const bars = at && (chart.data || []).find(trace => trace.type === 'bar' && Array.isArray(trace.customdata));
    const cell = bars ? bars.customdata[Math.round(at.yval)] : undefined;
    return Array.isArray(cell) && typeof cell[1] === 'string' && HEAD_AT.test(cell[1]) ? cell[1] : '';
  }
  function write(id, value) {
    const box = document.querySelector('#' + id + ' textarea, #' + id + ' input');
    if (!box) return false;
    box.value = value;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    return true;
  }
  let listening = false;
  function listen() {
    if (listening) return;
    listening = true;
    document.addEventListener('click', event => {
      const target = event.target;
      const why = target.closest && target.closest('#' + WHY_SCORE_ELEM_ID + ' .js-plotly-plot');
      const attention = target.closest && target.closest('#' + ATTENTION_SCORE_ELEM_ID + ' .js-plotly-plot');
      const chart = why || attention;
      const found = chart ? barAt(chart, event) : '';
      if (!found) return;
      window.chartDeck?.picked(chart);
      if (why) {
        const name = found.split('@')[0];
        window.whyPage?.pick(name);  // its charts drawn at once; the head list and the headings follow
        if (write(PICKED_ELEM_ID, name + ' #' + Date.now())) {
          document.querySelector('#' + HEAD_ELEM_ID)?.scrollIntoView({behavior: 'instant', block: 'start'});
        }
      } else {
        write(ATTENTION_SCORE_PICKED_ELEM_ID, found + ' #' + Date.now());  // stamped: the same bar again is a change
      }
    });
  }
  // the Attention tab's hidden box ("L1 H0@62 #<time>") -> [layer, head, query position]; anything else leaves them
  function opened(picked, layer, head, query) {
    const found = /^L(\d+) H(\d+)@(\d+)/.exec(typeof picked === 'string' ? picked : '');
    return found ? [Number(found[1]), Number(found[2]), Number(found[3])] : [layer, head, query];
  }
  // the Why tab's head on screen and the key asked about: (checkpoint, text, heading, key) for why_score
  function whyOnScreen(checkpoint, text, heading, key) {
    return [...window.whyPage.headOnScreen(checkpoint, text, heading), key];
  }
  return {listen, opened, barAt, whyOnScreen};
})();
