// What every tab's page script shares. Defines window.playgroundPage.
window.playgroundPage = window.playgroundPage || (() => {
  // Scrolls the page to where element ``id`` starts in it: for an element that sticks to the top of the screen (the
  // Attention tab's stage heading, on a wide screen) its own place in the page, not where it sticks, which
  // scrollIntoView takes for already in view.
  function scrollToStart(id) {
    const at = document.getElementById(id);
    if (!at) return;
    const was = at.style.position;
    at.style.position = 'static';
    const top = at.getBoundingClientRect().top;
    at.style.position = was;
    window.scrollBy({top});
  }
  // resolves once the element ``id`` is on screen (its tab first opened), and then once ``after`` (a function that
  // returns a promise, or none) has resolved: events.once_shown
  function whenShown(id, after) {
    const shown = new Promise(resolve => {
      const shown = () => {
        const element = document.getElementById(id);
        if (element && element.offsetParent !== null) resolve(); else setTimeout(shown, 100);
      };
      shown();
    });
    return after ? shown.then(after) : shown;
  }
  // resolves once an element matching ``selector`` is in the page, or after ``most_ms``: the Tokenize tab's chips
  // drawn is the page's first paint (tokenize_tab.DRAWN_JS)
  function whenDrawn(selector, mostMs) {
    return new Promise(resolve => {
      const started = Date.now();
      const drawn = () => document.querySelector(selector) || Date.now() - started > mostMs ? resolve()
        : setTimeout(drawn, 100);
      drawn();
    });
  }
  // the Train tab's owner token: the one the page holds, else 16 random bytes as hex (train_tab.MAKE_TOKEN_JS)
  function ownerToken(token) {
    if (!token) {
      const bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      token = Array.from(bytes, b => b.toString(16).padStart(2, '0')).join('');
    }
    return [token, token];
  }
  return {scrollToStart, whenShown, whenDrawn, ownerToken};
})();
