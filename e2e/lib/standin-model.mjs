// A scripted stand-in for the model behind an agent host, on loopback: it speaks the Anthropic
// Messages API (Claude Code) and the Gemini generateContent API (Gemini CLI), streamed or not,
// and plays a script of tool calls. Each turn of the script reads the tool results the host sent
// back in its request, so a run proves that the calls went through the host to the server.
import http from 'node:http';

/**
 * One conversation as the stand-in sees it in a Messages API request: the tools the host offers
 * (names as the host spells them) with their input schemas, the results of the calls made so far,
 * oldest first, each with the tool's name and the result as the host passed it to the model (as
 * JSON text), and the tools listed by name only for the host's ToolSearch.
 */
function anthropicConversation(body) {
  const offered = (body.tools ?? []).map((t) => t.name);
  const schemas = Object.fromEntries((body.tools ?? []).map((t) => [t.name, t.input_schema]));
  const definitions = Object.fromEntries((body.tools ?? []).map((t) => [t.name, JSON.stringify(t)]));
  const calls = new Map();
  const results = [];
  const texts = [];
  for (const m of body.messages ?? []) {
    if (typeof m.content === 'string' && m.role === 'user') texts.push(m.content);
    if (!Array.isArray(m.content)) continue;
    for (const b of m.content) {
      if (b.type === 'text' && m.role === 'user') texts.push(b.text);
      if (b.type === 'tool_use') calls.set(b.id, b.name);
      if (b.type === 'tool_result') {
        // What the model reads: the result's text blocks (a string content as it is).
        const shown = typeof b.content === 'string' ? b.content : (b.content ?? []).map((c) => (c.type === 'text' ? c.text : JSON.stringify(c))).join('\n');
        results.push({ name: calls.get(b.tool_use_id), isError: b.is_error === true, text: JSON.stringify(b.content), shown });
      }
    }
  }
  return { offered, schemas, definitions, results, texts, deferred: deferredTools(body), toolSearch: offered.includes('ToolSearch') };
}

/**
 * The tools Claude Code lists by name only, for its ToolSearch tool to load (its default when
 * the tools are many): the lines after its sentence "The following deferred tools are now
 * available via ToolSearch".
 */
function deferredTools(body) {
  const texts = [];
  const walk = (v) => {
    if (typeof v === 'string') texts.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') walk(v.text ?? v.content);
  };
  walk([body.system, body.messages]);
  const sentence = 'deferred tools are now available via ToolSearch';
  const text = texts.find((t) => t.includes(sentence));
  if (!text) return [];
  const names = [];
  for (const line of text.slice(text.indexOf(sentence)).split('\n').slice(1)) {
    if (!/^[A-Za-z0-9_-]+$/.test(line)) break;
    names.push(line);
  }
  return names;
}

/** The same from a Gemini generateContent request (a failed call's response holds an error). */
function geminiConversation(body) {
  const declarations = (body.tools ?? []).flatMap((t) => t.functionDeclarations ?? []);
  const offered = declarations.map((f) => f.name);
  const schemas = Object.fromEntries(declarations.map((f) => [f.name, f.parametersJsonSchema ?? f.parameters]));
  const definitions = Object.fromEntries(declarations.map((f) => [f.name, JSON.stringify(f)]));
  const results = [];
  const texts = [];
  for (const c of body.contents ?? []) {
    for (const p of c.parts ?? []) {
      if (p.text !== undefined && c.role === 'user') texts.push(p.text);
      if (p.functionResponse) {
        const text = JSON.stringify(p.functionResponse.response);
        results.push({ name: p.functionResponse.name, isError: p.functionResponse.response?.error !== undefined, text, shown: text });
      }
    }
  }
  return { offered, schemas, definitions, results, texts, deferred: [], toolSearch: false };
}

/** The Anthropic answer: text or tool_use blocks, as one message or as its SSE events. */
function anthropicAnswer(res, body, turn, n) {
  // n numbers the answers, so that every tool_use id is new.
  const content = turn.text !== undefined
    ? [{ type: 'text', text: turn.text }]
    : turn.calls.map((c, i) => ({ type: 'tool_use', id: `toolu_standin_${n}_${i}`, name: c.name, input: c.args }));
  const stop = turn.text !== undefined ? 'end_turn' : 'tool_use';
  const message = { id: `msg_standin_${n}`, type: 'message', role: 'assistant', model: body.model, content, stop_reason: stop, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 10 } };
  if (!body.stream) {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(message));
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  event('message_start', { message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } });
  content.forEach((block, index) => {
    if (block.type === 'text') {
      event('content_block_start', { index, content_block: { type: 'text', text: '' } });
      event('content_block_delta', { index, delta: { type: 'text_delta', text: block.text } });
    } else {
      event('content_block_start', { index, content_block: { ...block, input: {} } });
      event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
    }
    event('content_block_stop', { index });
  });
  event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 10 } });
  event('message_stop', {});
  res.end();
}

/** The Gemini answer: text or functionCall parts, as one response or as one SSE event. */
function geminiAnswer(res, stream, turn) {
  const parts = turn.text !== undefined ? [{ text: turn.text }] : turn.calls.map((c) => ({ functionCall: { name: c.name, args: c.args } }));
  const answer = {
    candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 10, totalTokenCount: 20 },
  };
  if (!stream) {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(answer));
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream' });
  res.end(`data: ${JSON.stringify(answer)}\r\n\r\n`);
}

/**
 * Starts the stand-in. script(conversation) is called for every request that offers the tool
 * named marker (the host's agent loop; other requests, a host's own side questions, get a short
 * text) and returns (or resolves to) the next turn: {calls: [{tool, args, host}]} with tool
 * names as the server spells them (host: true for a tool of the host's own, named as the host
 * does), or {text}. In the conversation, offered and results name the server's tools without the
 * host's prefix (results only of those tools; all holds every result, host marking the host's
 * own); each result has shown, what the model reads of it; schemas holds the input schema the
 * host declared for each, definitions each definition as the host sent it (JSON), hostTools the
 * host's own tools, texts the user's words in the request. A request that lists marker by name only, for Claude Code's ToolSearch to load, is
 * answered by loading the tools load(names) picks of the server's (every one by default). Returns the URL, the conversations seen (one per
 * agent-loop request), the lists of tools loaded that way (listed), the other requests (method
 * and path), and close.
 */
export function startModel({ marker, script, load = (names) => names }) {
  const conversations = [];
  const others = [];
  const listed = [];
  let answered = 0;
  // The server's prefix, once a request showed it: later requests offering only some of its
  // tools (those loaded through ToolSearch) are of the agent loop too.
  let known;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const path = req.url.split('?')[0];
      let body = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
      } catch {
        // not JSON: answered below as an unknown request
      }
      const anthropic = req.method === 'POST' && path.endsWith('/v1/messages');
      const gemini = req.method === 'POST' && /\/models\/[^/:]+:(generateContent|streamGenerateContent)$/.test(path);
      if (req.method === 'POST' && path.endsWith('/v1/messages/count_tokens')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end('{"input_tokens":10}');
        return;
      }
      if (!anthropic && !gemini) {
        others.push(`${req.method} ${path}`);
        res.writeHead(404, { 'Content-Type': 'application/json' });
        res.end('{"error":{"code":404,"message":"not served by the stand-in model"}}');
        return;
      }
      const conv = anthropic ? anthropicConversation(body) : geminiConversation(body);
      const mark = conv.offered.find((n) => n.endsWith(marker)) ?? (known && conv.offered.find((n) => n.startsWith(known)) ? known + marker : undefined);
      const deferredMark = !mark && conv.toolSearch ? conv.deferred.find((n) => n.endsWith(marker)) : undefined;
      let turn;
      if (deferredMark) {
        // Claude Code lists the tools by name only: the stand-in loads every tool of the server
        // with its ToolSearch, as a model does, and the next request offers them.
        const prefix = deferredMark.slice(0, -marker.length);
        known = prefix;
        const all = conv.deferred.filter((n) => n.startsWith(prefix)).map((n) => n.slice(prefix.length));
        listed.push(all);
        const names = load(all).map((n) => prefix + n);
        turn = { calls: [{ name: 'ToolSearch', args: { query: `select:${names.join(',')}`, max_results: names.length } }] };
      } else if (!mark) {
        const asked = JSON.stringify(body.systemInstruction ?? body.system ?? conv.texts.at(-1) ?? '').slice(0, 160);
        others.push(`${req.method} ${path} (tools offered: ${conv.offered.join(' ') || 'none'}; asked: ${asked})`);
        turn = { text: 'ok' };
      } else {
        const prefix = mark.slice(0, -marker.length);
        known = prefix;
        const strip = (n) => (n?.startsWith(prefix) ? n.slice(prefix.length) : n);
        const ours = (n) => n?.startsWith(prefix);
        const seen = {
          prefix,
          offered: conv.offered.filter(ours).map(strip),
          schemas: Object.fromEntries(Object.entries(conv.schemas).filter(([n]) => ours(n)).map(([n, v]) => [strip(n), v])),
          definitions: Object.entries(conv.definitions).filter(([n]) => ours(n)).map(([, v]) => v),
          hostTools: conv.offered.filter((n) => !ours(n)),
          results: conv.results.filter((r) => ours(r.name)).map((r) => ({ ...r, name: strip(r.name) })),
          all: conv.results.map((r) => ({ ...r, name: strip(r.name), host: !ours(r.name) })),
          texts: conv.texts,
        };
        conversations.push(seen);
        try {
          turn = await script(seen);
        } catch (err) {
          turn = { text: `The stand-in model stops: ${err.message}` };
          seen.error = err.message;
        }
        if (turn.calls) turn = { calls: turn.calls.map((c) => ({ name: c.host ? c.tool : prefix + c.tool, args: c.args })) };
      }
      answered++;
      if (anthropic) anthropicAnswer(res, body, turn, answered);
      else geminiAnswer(res, path.endsWith(':streamGenerateContent'), turn);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        conversations,
        others,
        listed,
        close: () => new Promise((r) => {
          server.closeAllConnections();
          server.close(r);
        }),
      });
    });
  });
}
