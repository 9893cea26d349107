(function () {
  'use strict';
  // The card preview, an MCP App (ext-apps): it asks the host to initialize it, then renders
  // the preview that get_card and review_card put in their result's _meta. Card text is only
  // ever set as text (textContent), never as HTML.
  var KEY = 'io.cardwriter/preview';
  var nextId = 1;
  var initId = null;
  var state = { preview: null, chosen: 0 };

  function post(msg) { window.parent.postMessage(msg, '*'); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function strings(v) { return Array.isArray(v) ? v.filter(function (s) { return typeof s === 'string'; }) : []; }

  function renderMessage() {
    var p = state.preview;
    var box = document.getElementById('message');
    clear(box);
    var greetings = strings(p.greetings);
    box.appendChild(el('p', 'message', greetings[state.chosen] || ''));
    var list = document.getElementById('entries');
    clear(list);
    var books = Array.isArray(p.worldbooks) ? p.worldbooks : [];
    var fired = 0;
    books.forEach(function (wb) {
      var section = el('section', 'book');
      section.appendChild(el('h3', null, wb && wb.name ? wb.name : 'Worldbook'));
      var ul = el('ul');
      (Array.isArray(wb && wb.entries) ? wb.entries : []).forEach(function (entry) {
        var fires = Array.isArray(entry.fires) && entry.fires.indexOf(state.chosen) >= 0;
        if (fires) fired++;
        var li = el('li', fires ? 'entry fires' : (entry.constant ? 'entry constant' : 'entry'));
        li.appendChild(el('span', 'name', entry.name || '(unnamed entry)'));
        li.appendChild(el('span', 'keys', entry.constant ? 'always' : strings(entry.keys).join(', ')));
        if (fires) li.appendChild(el('span', 'badge', 'fires'));
        ul.appendChild(li);
      });
      section.appendChild(ul);
      list.appendChild(section);
    });
    document.getElementById('fired').textContent = books.length ? fired + ' entr' + (fired === 1 ? 'y fires' : 'ies fire') + ' on this message' : '';
  }

  function render(result) {
    var p = result && result._meta && result._meta[KEY];
    if (!p || typeof p !== 'object') return;
    state.preview = p;
    state.chosen = 0;
    document.getElementById('empty').hidden = true;
    document.getElementById('card').hidden = false;
    document.getElementById('name').textContent = p.roleName || '(no name)';
    var avatar = document.getElementById('avatar');
    clear(avatar);
    if (typeof p.avatar === 'string' && p.avatar.indexOf('data:image/png;base64,') === 0) {
      var img = el('img');
      img.alt = 'Avatar';
      img.src = p.avatar;
      avatar.appendChild(img);
    } else {
      avatar.appendChild(el('span', 'initial', (p.roleName || '?').trim().charAt(0).toUpperCase()));
    }
    var picker = document.getElementById('picker');
    clear(picker);
    strings(p.greetings).forEach(function (g, i) {
      var o = el('option', null, i === 0 ? 'First message' : 'Alternate ' + i);
      o.value = String(i);
      picker.appendChild(o);
    });
    picker.onchange = function () { state.chosen = Number(picker.value) || 0; renderMessage(); };
    var prologue = document.getElementById('prologue');
    clear(prologue);
    strings(p.prologue).forEach(function (line) { prologue.appendChild(el('li', null, line)); });
    document.getElementById('prologue-box').hidden = strings(p.prologue).length === 0;
    renderMessage();
    post({ jsonrpc: '2.0', method: 'ui/notifications/size-changed', params: { width: document.body.scrollWidth, height: document.body.scrollHeight } });
  }

  window.addEventListener('message', function (ev) {
    if (ev.source !== window.parent) return;
    var m = ev.data;
    if (!m || m.jsonrpc !== '2.0') return;
    if (m.id === initId && initId !== null && ('result' in m || 'error' in m)) {
      post({ jsonrpc: '2.0', method: 'ui/notifications/initialized', params: {} });
      return;
    }
    if (m.method === 'ui/notifications/tool-result') render(m.params);
  });
  initId = nextId++;
  post({ jsonrpc: '2.0', id: initId, method: 'ui/initialize',
    params: { protocolVersion: '2026-01-26', appInfo: { name: 'cardwriter card preview', version: '1.0.0' }, appCapabilities: {} } });
})();
