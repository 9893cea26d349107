// An MCP Apps host for the preview test: a host page on one origin running the official
// AppBridge (e2e/preview/host.mjs, bundled here with esbuild) and a sandbox proxy on another
// (e2e/preview/sandbox.js, served with the CSP built from the resource's _meta.ui.csp), opened
// in headless Chromium (Debian's chromium) through puppeteer-core.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';
import puppeteer from 'puppeteer-core';

import { cspFor } from '../preview/csp.mjs';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'preview');

/** The path of Debian's chromium (or CHROMIUM_BIN), or undefined when it is not installed. */
export function findChromium() {
  for (const p of [process.env.CHROMIUM_BIN, '/usr/bin/chromium', '/usr/bin/chromium-browser']) {
    if (p && existsSync(p)) return p;
  }
  return undefined;
}

function serve(host, handler) {
  const server = http.createServer((req, res) => {
    Promise.resolve(handler(new URL(req.url, `http://${host}`), res)).catch((err) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, host, () => resolve({ origin: `http://${host}:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }));
  });
}

const HOST_PAGE = '<!doctype html><html><head><meta charset="utf-8"><title>MCP Apps host</title></head>' +
  '<body style="margin:0;background:#eceff1"><script src="/host.js"></script></body></html>';
const SANDBOX_PAGE = '<!doctype html><html><head><meta charset="utf-8"><title>sandbox</title>' +
  '<style>html,body{margin:0;height:100%;overflow:hidden}iframe{display:block;border:0;width:100%;height:100%}</style></head>' +
  '<body><script src="/sandbox.js"></script></body></html>';

/**
 * Starts the host (127.0.0.1) and sandbox (127.0.0.2: another origin and site) servers and
 * Chromium with the host page open. Returns the page, the sandbox URL, what the page logged as
 * errors (console errors, CSP violations, uncaught exceptions, in any frame) and stop.
 */
export async function startAppHost(chromium) {
  const bundle = await esbuild.build({
    entryPoints: [join(dir, 'host.mjs')], bundle: true, format: 'iife', platform: 'browser', target: 'es2022', write: false, logLevel: 'warning',
  });
  const hostJS = bundle.outputFiles[0].text;
  const sandboxJS = await readFile(join(dir, 'sandbox.js'), 'utf8');
  const hostServer = await serve('127.0.0.1', (url, res) => {
    if (url.pathname === '/host.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      return res.end(hostJS);
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(HOST_PAGE);
  });
  const sandboxServer = await serve('127.0.0.2', (url, res) => {
    if (url.pathname === '/sandbox.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      return res.end(sandboxJS);
    }
    const csp = JSON.parse(url.searchParams.get('csp') ?? 'null');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': cspFor(csp ?? undefined) });
    res.end(SANDBOX_PAGE);
  });
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 520, height: 900 });
  const errors = [];
  const waiters = new Set();
  const record = (line) => {
    errors.push(line);
    for (const w of waiters) {
      if (w.re.test(line)) {
        waiters.delete(w);
        w.resolve(line);
      }
    }
  };
  page.on('console', (msg) => {
    const text = msg.text();
    if (msg.type() === 'error' || /Content Security Policy/i.test(text)) record(`console ${msg.type()}: ${text} (${msg.location()?.url ?? ''})`);
  });
  page.on('pageerror', (err) => record(`uncaught: ${err.message}`));
  // Chromium logs no console message for a blocked eval that the script catches (zod's probe
  // for eval, for one), but every frame gets a securitypolicyviolation event for it.
  await page.evaluateOnNewDocument(() => {
    window.addEventListener('securitypolicyviolation', (e) => {
      console.error(`Content Security Policy violation: ${e.effectiveDirective} blocked ${e.blockedURI || 'an inline source'} (${e.sourceFile}:${e.lineNumber})`);
    });
  });
  await page.goto(`${hostServer.origin}/`);
  await page.waitForFunction(() => window.previewHost !== undefined);
  return {
    page,
    errors,
    sandboxUrl: `${sandboxServer.origin}/sandbox.html`,
    /** Resolves with the first error logged (already, or within timeoutMs) that matches re. */
    errorMatching(re, timeoutMs = 10000) {
      const seen = errors.find((e) => re.test(e));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const w = { re, resolve: (line) => { clearTimeout(timer); resolve(line); } };
        const timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`no error matching ${re} was logged in ${timeoutMs} ms: ${JSON.stringify(errors)}`));
        }, timeoutMs);
        waiters.add(w);
      });
    },
    async stop() {
      await browser.close();
      await hostServer.close();
      await sandboxServer.close();
    },
  };
}

/** The frame of view id: the srcdoc frame (desktop), or the frame inside the sandbox proxy (web). */
export async function viewFrame(page, id, layout) {
  const outer = await (await page.$(`#view-${id}`)).contentFrame();
  if (layout !== 'web') return outer;
  return (await outer.$('iframe')).contentFrame();
}
