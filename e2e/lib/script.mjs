// The stand-in model's script language: a task's model is a list of steps, each a tool call
// whose arguments a function derives from what the host passed back so far (and from the
// author's words in the request), never from the test's own knowledge. Played by
// lib/standin-model.mjs, one step per model turn.
//
// Steps:
//   {call: 'tool', args: (s) => ({...}), as: 'name'}   a call of the server's tool; its result is s.r[as ?? tool]
//   {read: (s) => path, as: 'name', whole}              the host's own file reader on an absolute path (whole:
//                                                       the file read whole, where the reader cuts long lines)
//   {if: (s) => bool, then: [steps], else: [steps]}
//   {repeat: [steps], while: (s) => bool}               the steps once, then again while the test holds
//   {meanwhile: async (s) => {}}                        something outside the model happens (another assistant writes)
//   {say: (s) => 'text'}                                the model's last words to the author; ends the task
//
// s holds: r (results by name, each with the args it was called with), schemas (the input
// schemas the host declared), last (the last result), words (the author's words in the
// request), fact(re) (the first group of re in the author's words, which must match), calls
// (the calls made), and anything a step's function stores in it. A result is {name, failed,
// shown (the text the model read), data (the object parsed from it: the structuredContent or
// the error envelope, as the host passed it)}.
import assert from 'node:assert/strict';

/**
 * The object a result's text holds as the host passed it: Claude Code's JSON of the
 * structuredContent, or the error's envelope after its message; Gemini CLI's response object,
 * whose text parts hold the summary and the same JSON.
 */
export function dataOf(shown) {
  const objects = [];
  const consider = (text) => {
    // Whole, by line, and what follows a ": " (Gemini CLI's "... with response: [...]").
    const tails = [...text.matchAll(/: (?=[[{])/g)].slice(0, 20).map((m) => text.slice(m.index + 2));
    for (const piece of [text, ...text.split('\n'), ...tails]) {
      const t = piece.trim();
      if (!t.startsWith('{') && !t.startsWith('[')) continue;
      try {
        const v = JSON.parse(t);
        if (Array.isArray(v)) walk(v);
        else if (v && typeof v === 'object') objects.push(v);
      } catch {
        // not JSON
      }
    }
  };
  const walk = (v) => {
    if (typeof v === 'string') consider(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  consider(shown);
  for (const o of [...objects]) walk(o);
  // The host's own wrapper ({content: [...]}, {output: ...}) is not the data: the largest
  // object that is not one.
  const wrapper = (o) => Object.keys(o).every((k) => ['content', 'output', 'llmContent', 'response', 'isError', 'error', 'type', 'text'].includes(k)) && !o.message;
  const data = objects.filter((o) => !wrapper(o)).sort((a, b) => JSON.stringify(b).length - JSON.stringify(a).length);
  return data[0] ?? {};
}

/** A result as the script sees it. */
function view(r) {
  const data = dataOf(r.shown);
  // An error reaches the model as the host marks it (Claude Code's is_error), or as the
  // server's envelope ({error, message, retryable}) in what Gemini CLI passes on.
  const failed = r.isError || (typeof data.error === 'string' && typeof data.message === 'string' && typeof data.retryable === 'boolean');
  return { name: r.name, host: r.host, failed, shown: r.shown, data };
}

async function* walk(steps, s) {
  for (const step of steps) {
    if (step.if) {
      yield* walk((await step.if(s)) ? step.then : (step.else ?? []), s);
    } else if (step.repeat) {
      do {
        yield* walk(step.repeat, s);
      } while (await step.while(s));
    } else if (step.meanwhile) {
      await step.meanwhile(s);
    } else if (step.say) {
      const text = step.say(s);
      s.done = true;
      yield { text };
      return;
    } else if (step.read) {
      const path = step.read(s);
      const r = yield { read: path, whole: step.whole };
      s.r[step.as] = { ...r, args: { path } };
      s.last = r;
    } else if (step.call) {
      const args = step.args ? await step.args(s) : {};
      const r = yield { call: step.call, args };
      s.r[step.as ?? step.call] = { ...r, args };
      s.last = r;
    } else {
      throw new Error(`a step of no kind: ${JSON.stringify(step)}`);
    }
  }
}

async function* task(steps, s) {
  yield* walk(steps, s);
  if (!s.done) throw new Error('the steps ended without a word to the author');
}

/**
 * A player of steps for one task in one host: next(conv) is the stand-in model's script
 * function. host gives the arguments the host adds to every call (added) and its file reader
 * (readFile). state is s; state.done is set once the last words are said.
 */
export function player(steps, host, extra = {}) {
  const s = { r: {}, calls: [], ...extra };
  const gen = task(steps, s);
  let waiting;
  return {
    state: s,
    async next(conv) {
      s.words = conv.texts.join('\n');
      s.schemas = conv.schemas;
      s.fact = (re) => {
        const m = s.words.match(re);
        assert.ok(m, `the author's words do not say ${re}`);
        return m[1];
      };
      let input;
      if (waiting) {
        const r = conv.all.at(-1);
        assert.ok(r, `no result of ${waiting} came back`);
        assert.equal(r.name, waiting, `the last result is of ${r.name}, want ${waiting}`);
        input = view(r);
        waiting = undefined;
      }
      const { value, done } = await gen.next(input);
      assert.ok(!done, 'a request after the last words');
      if (value.text !== undefined) {
        s.said = value.text;
        return value;
      }
      if (value.read) {
        const reader = (value.whole && host.readWhole) || host.readFile;
        waiting = reader.tool;
        s.calls.push(reader.tool);
        return { calls: [{ tool: reader.tool, args: reader.args(value.read), host: true }] };
      }
      waiting = value.call;
      s.calls.push(value.call);
      return { calls: [{ tool: value.call, args: { ...value.args, ...host.added } }] };
    },
  };
}

/**
 * What a command printed, from Gemini CLI's shell result ("Output: ..." and other labelled lines,
 * inside <untrusted_context>); undefined for another text.
 */
function shellOutput(text) {
  const m = text.replace(/^\s*<untrusted_context[^>]*>\n?/, '').replace(/\n?<\/untrusted_context>\s*$/, '')
    .match(/^Output: ([\s\S]*?)(?:\n(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): [\s\S]*)?$/);
  return m ? m[1] : undefined;
}

/** The text of a host's file reader's result (Claude Code numbers the lines: numbers dropped). */
export function fileText(r) {
  let text = r.shown;
  try {
    const v = JSON.parse(text);
    // Gemini CLI: {"output": the file's text}, or from its shell {"output": "Output: the text"}
    if (typeof v?.output === 'string') text = shellOutput(v.output) ?? v.output;
  } catch {
    // the text itself
  }
  if (/^\s*1[\t→]/.test(text)) return text.split('\n').map((l) => l.replace(/^\s*\d+[\t→]/, '')).join('\n');
  return text;
}
