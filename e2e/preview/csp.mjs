// The Content-Security-Policy a host builds for an MCP App from its resource's _meta.ui.csp: the
// spec's restrictive default (SEP-1865, 2026-01-26), opened only by the domains the resource
// declares. No 'unsafe-eval': a view that needs eval fails here as it would under such a host.

function domains(list) {
  // Entries that could break out of their directive are left out, as hosts do.
  return Array.isArray(list) ? list.filter((d) => typeof d === 'string' && !/[;\r\n'" ]/.test(d)) : [];
}

/** The policy for csp (the resource's _meta.ui.csp; undefined for none declared). */
export function cspFor(csp) {
  const res = domains(csp?.resourceDomains);
  const connect = domains(csp?.connectDomains);
  const frame = domains(csp?.frameDomains);
  const base = domains(csp?.baseUriDomains);
  return [
    "default-src 'none'",
    ["script-src 'self' 'unsafe-inline'", ...res].join(' '),
    ["style-src 'self' 'unsafe-inline'", ...res].join(' '),
    ["img-src 'self' data:", ...res].join(' '),
    ["font-src 'self' data:", ...res].join(' '),
    ["media-src 'self' data:", ...res].join(' '),
    connect.length ? `connect-src ${connect.join(' ')}` : "connect-src 'none'",
    frame.length ? `frame-src ${frame.join(' ')}` : "frame-src 'none'",
    base.length ? `base-uri ${base.join(' ')}` : "base-uri 'self'",
    "object-src 'none'",
  ].join('; ');
}
