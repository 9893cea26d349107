// The MCP Inspector (npm @modelcontextprotocol/inspector, CLI mode) against the built binary over
// both transports: it lists the tools (with its --strict schema portability check), resource
// templates and prompts, and calls a tool, with no error or warning.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { BIN, cleanEnv, startHTTP } from './lib/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const INSPECTOR = join(here, 'inspector', 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

/** Runs the Inspector's CLI with args; resolves {code, stdout, stderr}. */
function inspector(args) {
  assert.ok(existsSync(INSPECTOR), `the MCP Inspector is not installed (${INSPECTOR}); e2e/run installs it`);
  const env = cleanEnv({ MCP_CATALOG_PATH: join(mkdtempSync(join(tmpdir(), 'inspector-')), 'mcp.json') });
  return new Promise((resolve) => {
    execFile(process.execPath, [INSPECTOR, '--cli', ...args], { env, timeout: 60000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** What the Inspector said on stderr, less the server's own log lines (stdio passes them on). */
function complaints(stderr) {
  return stderr.split('\n').filter((l) => l.trim() !== '' && !/^time=\S+ level=/.test(l));
}

const targets = {
  // The server's logs go to its stderr, which the Inspector passes on: keep them to errors.
  stdio: () => [BIN, 'stdio', '--sandbox', '-e', 'CARDWRITER_LOG_LEVEL=error'],
};

for (const transport of ['stdio', 'http']) {
  describe(`MCP Inspector CLI over ${transport}`, () => {
    let http;
    before(async () => {
      if (transport === 'http') {
        http = await startHTTP();
        targets.http = () => [http.url, '--transport', 'http'];
      }
    });
    after(async () => {
      if (http) await http.stop();
    });

    const cases = [
      ['lists the tools, passing its strict schema check', ['--method', 'tools/list', '--strict'], (out) => {
        assert.equal(out.tools.length, 31);
        for (const t of out.tools) assert.ok(t.title, `${t.name} has no title`);
      }],
      ['lists the resource templates', ['--method', 'resources/templates/list'], (out) => {
        assert.equal(out.resourceTemplates.length, 4); // card, worldbook, trial, export
      }],
      ['lists the prompts', ['--method', 'prompts/list'], (out) => {
        assert.equal(out.prompts.length, 3);
      }],
      ['calls a tool', ['--method', 'tools/call', '--tool-name', 'create_card', '--tool-arg', 'roleName=Inspected'], (out) => {
        assert.notEqual(out.isError, true, JSON.stringify(out));
        assert.match(out.structuredContent.roleId, /\S/);
      }],
    ];
    for (const [name, args, check] of cases) {
      it(name, async () => {
        const res = await inspector([...targets[transport](), ...args]);
        assert.equal(res.code, 0, `exit ${res.code}\n${res.stderr}`);
        assert.deepEqual(complaints(res.stderr), [], 'the Inspector warned');
        check(JSON.parse(res.stdout));
      });
    }

    it('reads a tool error as a tool result, not a protocol error', async () => {
      const res = await inspector([...targets[transport](), '--method', 'tools/call', '--tool-name', 'get_card', '--tool-arg', 'roleId=nope']);
      // The Inspector's own exit code for a result with isError.
      assert.equal(res.code, 5, `exit ${res.code}\n${res.stderr}`);
      assert.deepEqual(complaints(res.stderr), ['{"error":{"code":"tool_is_error","message":"Tool \'get_card\' returned isError:true."}}']);
      const out = JSON.parse(res.stdout);
      assert.equal(out.isError, true);
      assert.equal(out.structuredContent, undefined);
      assert.match(out.content[0].text, /No card/);
    });
  });
}
