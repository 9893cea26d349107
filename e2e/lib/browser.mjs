// The person at the browser during an OAuth sign-in, played by a script: it follows redirects
// and meta refreshes with a cookie jar per host, and on each page submits the form (the proxy's
// consent page: Allow; the sandbox's sign-in page: the demo user; its consent page: Allow) until
// the authorization comes back to the client's redirect URI. Pages are the server's and the
// sandbox's own, plain HTML forms.
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const formRE = /<form\b([^>]*)>([\s\S]*?)<\/form>/i;
const tagRE = /<(input|button)\b([^>]*)>(?:([^<]*)<\/button>)?/gi;
const attrRE = /([a-z-]+)\s*=\s*"([^"]*)"/gi;
const metaRE = /http-equiv="refresh" content="0;url=([^"]+)"/i;

function unescape(s) {
  return s.replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&#34;|&quot;/g, '"').replace(/&#39;/g, "'");
}

function attrs(s) {
  const out = {};
  for (const m of s.matchAll(attrRE)) out[m[1].toLowerCase()] = unescape(m[2]);
  return out;
}

/** Signs in at authorizationUrl and returns the URL the browser is sent back to (with code). */
export async function signInAt(authorizationUrl, redirectUri, { account = 'Demo Author', decide = 'allow' } = {}) {
  const jar = new Map(); // host -> Map(name -> value)
  const back = new URL(redirectUri);
  const request = async (url, init = {}) => {
    const cookies = jar.get(url.hostname) ?? new Map();
    const headers = { ...(init.headers ?? {}) };
    if (cookies.size) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      const m = jar.get(url.hostname) ?? new Map();
      m.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
      jar.set(url.hostname, m);
    }
    return { url, status: res.status, location: res.headers.get('location'), body: await res.text() };
  };
  let page = await request(new URL(authorizationUrl));
  for (let step = 0; step < 16; step++) {
    let target;
    if (page.status >= 300 && page.status < 400 && page.location) target = new URL(page.location, page.url);
    else if (page.status === 200 && metaRE.test(page.body)) target = new URL(unescape(page.body.match(metaRE)[1]), page.url);
    if (target) {
      if (target.origin === back.origin && target.pathname === back.pathname) return target;
      page = await request(target);
      continue;
    }
    if (page.status !== 200) throw new Error(`sign-in: ${page.url} answered ${page.status}: ${page.body.slice(0, 300)}`);
    const form = page.body.match(formRE);
    if (!form) throw new Error(`sign-in: ${page.url} has no form: ${page.body.slice(0, 300)}`);
    const fa = attrs(form[1]);
    const wanted = page.body.includes('Sign in as') ? `Sign in as ${account}` : decide;
    const fields = new URLSearchParams();
    let pressed;
    for (const t of form[2].matchAll(tagRE)) {
      const a = attrs(t[2]);
      if (t[1].toLowerCase() === 'input' && a.type !== 'submit') {
        if (a.name) fields.set(a.name, a.value ?? '');
        continue;
      }
      const label = unescape((t[3] ?? '').trim());
      if (label.toLowerCase() === wanted.toLowerCase()) pressed = a;
      else if (!pressed && (label.toLowerCase().includes(wanted.toLowerCase()) || (a.value ?? '').toLowerCase() === wanted.toLowerCase())) pressed = a;
    }
    if (!pressed) throw new Error(`sign-in: ${page.url} has no button ${wanted}`);
    if (pressed.name) fields.set(pressed.name, pressed.value ?? '');
    const action = new URL(fa.action ?? '', page.url);
    page = await request(action, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: page.url.origin },
      body: fields.toString(),
    });
  }
  throw new Error('sign-in: the authorization did not come back to the client');
}

/**
 * An OAuth client provider of the TypeScript SDK (v1 and v2 share the interface) for a client
 * that registers itself dynamically; the authorization URL is walked by signInAt, and the code
 * it comes back with is in `code` for transport.finishAuth.
 */
export class ScriptedProvider {
  constructor(name, redirectUri = 'http://127.0.0.1:9/callback') {
    this.name = name;
    this.redirect = redirectUri;
    this.info = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.code = undefined;
  }
  get redirectUrl() { return this.redirect; }
  get clientMetadata() {
    return { client_name: this.name, redirect_uris: [this.redirect], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; }
  tokens() { return this.saved; }
  saveTokens(t) { this.saved = t; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  async redirectToAuthorization(url) {
    const back = await signInAt(url, this.redirect);
    this.code = back.searchParams.get('code');
    if (!this.code) throw new Error(`sign-in came back without a code: ${back.searchParams.get('error')}`);
  }
}

/**
 * Connects client through a transport of makeTransport(), signing in through the server's OAuth
 * flow with provider (a ScriptedProvider) when the server asks for it, and returns the transport
 * connected.
 */
export async function connectSignedIn(client, makeTransport, provider) {
  let t = makeTransport();
  try {
    await client.connect(t);
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    await t.finishAuth(provider.code);
    t = makeTransport();
    await client.connect(t);
  }
  return t;
}
