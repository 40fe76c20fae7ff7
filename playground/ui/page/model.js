// The Model tab in the page (playground/ui/model_tab.py). Defines window.modelPage.
window.modelPage = window.modelPage || (() => {
  const {LEVELS, LEVEL_PICKERS, BOOK_SOURCES, CHECKPOINT_SOURCE} = window.playgroundConstants.model;
  // model_tab.controls() for a new level, in the page: the pickers it uses shown, the others hidden (no server); a
  // notebook's own model leaves them as they are
  function levelControls(source, level) {
    const checkpoint = source === CHECKPOINT_SOURCE;
    const key = LEVELS[level] || 'score';
    return Object.values(LEVEL_PICKERS).map(([used, onlyCheckpoint]) => BOOK_SOURCES.includes(source) ? undefined :
      ({__type__: 'update', visible: used.includes(key) && (checkpoint || !onlyCheckpoint)}));
  }
  // the page's name for a layer, a head and a query position: [1, 0, 5] -> "1|0|5" (model_tab.spare_label in Python)
  function spareLabel(v) {
    return v.map(x => String(Number(x))).join('|');
  }
  return {levelControls, spareLabel};
})();
