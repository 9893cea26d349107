// The card preview, an MCP App (ext-apps) on the SDK's App class: the App does the protocol
// (ui/initialize, ping, ui/resource-teardown, "method not found" for any other request, the
// size reported whenever the content's size changes); this file renders what get_card and
// review_card return, and follows the host's theme, style variables and display mode.
// Card text is only ever set as text (textContent), never as HTML.
import './jitless.js';
import { App, applyDocumentTheme, applyHostStyleVariables } from '@modelcontextprotocol/ext-apps';

// KEY is where get_card and review_card put the preview in their result's _meta.
const KEY = 'io.cardwriter/preview';

const state = { preview: null, chosen: 0 };

function $(id) { return document.getElementById(id); }
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function strings(v) { return Array.isArray(v) ? v.filter((s) => typeof s === 'string') : []; }
function isObject(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

// status shows why there is no card (or what the view waits for) in place of the card.
function status(text) {
  state.preview = null;
  $('card').hidden = true;
  const box = $('empty');
  box.textContent = text;
  box.hidden = false;
}

// previewOf is what a tool result gives the view to show: the preview in _meta, else the card
// in structuredContent (get_card's result is the card: a host that passes content and
// structuredContent alone still has it), else a string saying why there is nothing.
function previewOf(result) {
  if (!isObject(result)) return 'The host sent a tool result with nothing in it.';
  if (result.isError) {
    // The first text block is the message (the server's second one is its JSON envelope).
    const first = Array.isArray(result.content) ? result.content.find((c) => c && c.type === 'text' && typeof c.text === 'string') : undefined;
    return 'The tool call failed, so there is no card to show: ' + (first ? first.text : 'no message.');
  }
  const meta = isObject(result._meta) ? result._meta[KEY] : undefined;
  if (isObject(meta)) return meta;
  const sc = result.structuredContent;
  if (isObject(sc) && (typeof sc.roleName === 'string' || typeof sc.roleWelcome === 'string')) {
    return {
      roleName: typeof sc.roleName === 'string' ? sc.roleName : '',
      greetings: [typeof sc.roleWelcome === 'string' ? sc.roleWelcome : ''].concat(strings(sc.welcomeAlternates)),
      prologue: strings(sc.prologue),
      worldbooks: [],
    };
  }
  if (isObject(sc) && typeof sc.roleId === 'string') {
    return 'No card to show: this result (card ' + sc.roleId + ') came without its preview, which travels in the ' +
      "result's _meta, and its structuredContent holds no card text. Call get_card to see the card.";
  }
  return "No card to show: this result has neither the card preview (in _meta) nor a card (in structuredContent).";
}

function renderMessage() {
  const p = state.preview;
  const box = $('message');
  box.replaceChildren(el('p', 'message', strings(p.greetings)[state.chosen] || ''));
  const books = (Array.isArray(p.worldbooks) ? p.worldbooks : []).filter(isObject);
  let fired = 0;
  let listed = 0;
  const sections = books.map((wb) => {
    const section = el('section', 'book');
    section.appendChild(el('h4', null, wb.name || 'Worldbook'));
    const entries = (Array.isArray(wb.entries) ? wb.entries : []).filter(isObject);
    listed += entries.length;
    if (entries.length === 0) {
      section.appendChild(el('p', 'note', 'No entries yet.'));
      return section;
    }
    const ul = el('ul');
    for (const entry of entries) {
      const fires = Array.isArray(entry.fires) && entry.fires.indexOf(state.chosen) >= 0;
      if (fires) fired++;
      const li = el('li', fires ? 'entry fires' : (entry.constant ? 'entry constant' : 'entry'));
      li.appendChild(el('span', 'name', entry.name || '(unnamed entry)'));
      li.appendChild(el('span', 'keys', entry.constant ? 'always' : strings(entry.keys).join(', ')));
      if (fires) li.appendChild(el('span', 'badge', 'fires'));
      ul.appendChild(li);
    }
    section.appendChild(ul);
    return section;
  });
  $('entries').replaceChildren(...sections);
  // The Worldbook heading only over something: a bound worldbook with no entries says so.
  $('worldbook-box').hidden = books.length === 0;
  $('fired').textContent = listed === 0 ? '' : fired + ' entr' + (fired === 1 ? 'y fires' : 'ies fire') + ' on this message';
}

function render(p) {
  state.preview = p;
  state.chosen = 0;
  $('empty').hidden = true;
  $('card').hidden = false;
  $('name').textContent = p.roleName || '(no name)';
  const avatar = $('avatar');
  if (typeof p.avatar === 'string' && p.avatar.startsWith('data:image/png;base64,')) {
    const img = el('img');
    img.alt = 'Avatar';
    img.src = p.avatar;
    avatar.replaceChildren(img);
  } else {
    avatar.replaceChildren(el('span', 'initial', (p.roleName || '?').trim().charAt(0).toUpperCase()));
  }
  const picker = $('picker');
  picker.replaceChildren(...strings(p.greetings).map((g, i) => {
    const o = el('option', null, i === 0 ? 'First message' : 'Alternate ' + i);
    o.value = String(i);
    return o;
  }));
  picker.hidden = strings(p.greetings).length < 2;
  const prologue = strings(p.prologue);
  $('prologue').replaceChildren(...prologue.map((line) => el('li', null, line)));
  $('prologue-box').hidden = prologue.length === 0;
  renderMessage();
}

function show(result) {
  const p = previewOf(result);
  if (typeof p === 'string') status(p);
  else render(p);
}

// follow applies the host's context: theme, style variables, display mode, safe area.
function follow(ctx) {
  if (!isObject(ctx)) return;
  if (ctx.theme === 'light' || ctx.theme === 'dark') applyDocumentTheme(ctx.theme);
  if (isObject(ctx.styles) && isObject(ctx.styles.variables)) applyHostStyleVariables(ctx.styles.variables);
  if (typeof ctx.displayMode === 'string') document.documentElement.dataset.displayMode = ctx.displayMode;
  const inset = ctx.safeAreaInsets;
  if (isObject(inset)) {
    for (const side of ['top', 'right', 'bottom', 'left']) {
      if (typeof inset[side] === 'number') document.documentElement.style.setProperty('--inset-' + side, inset[side] + 'px');
    }
  }
}

$('picker').addEventListener('change', () => {
  if (!state.preview) return;
  state.chosen = Number($('picker').value) || 0;
  renderMessage();
});

const app = new App({ name: 'cardwriter card preview', version: '2.0.0' }, { availableDisplayModes: ['inline', 'fullscreen'] });
app.ontoolinput = () => { if (!state.preview) status('Waiting for the card from the tool call...'); };
app.ontoolresult = show;
app.ontoolcancelled = (params) => {
  status('The tool call was cancelled, so there is no card to show' + (params && params.reason ? ': ' + params.reason : '.'));
};
app.onhostcontextchanged = () => follow(app.getHostContext());
app.onteardown = async () => ({});
status('Waiting for the host to send the tool result...');
app.connect().then(() => follow(app.getHostContext()), (err) => {
  status('The preview could not connect to its host: ' + (err && err.message ? err.message : String(err)));
});
