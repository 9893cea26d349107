// The sandbox proxy of a web host (the spec's double frame): this page is served from an origin
// other than the host's, with the CSP the host built from the resource's _meta.ui.csp as its
// header. It tells the host it is ready, writes the view the host sends into an inner frame
// (which inherits this page's CSP), and relays every other message both ways. It logs the
// view's CSP violations as console errors (a frame of this origin runs out of the host page's
// process, and Chromium's own violation reports from there do not reach the test).
const host = new URL(document.referrer).origin;
const inner = document.createElement('iframe');
inner.name = 'view';
inner.setAttribute('sandbox', 'allow-scripts allow-same-origin allow-forms');
document.body.appendChild(inner);

window.addEventListener('message', (ev) => {
  if (ev.source === window.parent) {
    if (ev.origin !== host) return;
    if (ev.data?.method === 'ui/notifications/sandbox-resource-ready') {
      const { html, sandbox } = ev.data.params ?? {};
      if (typeof sandbox === 'string') inner.setAttribute('sandbox', sandbox);
      const doc = inner.contentDocument;
      doc.open();
      inner.contentWindow.addEventListener('securitypolicyviolation', (e) => {
        console.error(`Content Security Policy violation in the view: ${e.effectiveDirective} blocked ${e.blockedURI || 'an inline source'} (${e.sourceFile}:${e.lineNumber})`);
      });
      doc.write(html);
      doc.close();
      return;
    }
    inner.contentWindow.postMessage(ev.data, '*');
  } else if (ev.source === inner.contentWindow) {
    window.parent.postMessage(ev.data, host);
  }
});

window.parent.postMessage({ jsonrpc: '2.0', method: 'ui/notifications/sandbox-proxy-ready', params: {} }, host);
