import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { pino } from 'pino';
import { flushed, screenedStdin, STDIO_MAX_MESSAGE_BYTES } from '../../src/mcp/stdio.ts';

/** Feeds `chunks` through screenedStdin; returns what passed on and what was answered. */
async function screen(chunks: (string | Buffer)[], maxBytes?: number) {
  const input = new PassThrough();
  const answered: { id: unknown; error: { code: number; message: string } }[] = [];
  const output = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) answered.push(JSON.parse(l));
      done();
    },
  });
  const screened = screenedStdin(input, pino({ level: 'silent' }), output, maxBytes);
  let passed = '';
  screened.on('data', (d: Buffer) => (passed += d.toString()));
  const ended = new Promise((r) => screened.on('end', r));
  for (const c of chunks) input.write(c);
  input.end();
  await ended;
  return { passed: passed.split('\n').filter(Boolean), answered };
}

test('lines are split on \\n across chunks (a \\r before it dropped, multi-byte characters kept whole)', async () => {
  const ping = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping', params: { note: 'é😀' } });
  const all = Buffer.from(`${ping(1)}\r\n${ping(2)}\n\n${ping(3)}`);
  // Cut inside the 4-byte emoji of the first line and across the line ends.
  const cuts = [5, all.indexOf(0xf0) + 2, all.indexOf(10) + 1, all.length - 3];
  const chunks = [0, ...cuts].map((c, i, a) => all.subarray(c, a[i + 1] ?? all.length));
  const { passed, answered } = await screen(chunks);
  assert.deepEqual(passed, [ping(1), ping(2), ping(3)]);
  assert.deepEqual(answered, []);
});

test('a line over the limit is answered -32600 with its id (first or last member), never held or passed on', async () => {
  const big = 'x'.repeat(300);
  const sdkOrder = JSON.stringify({
    method: 'tools/call',
    params: { name: 'get_signals', arguments: { asset: big } },
    jsonrpc: '2.0',
    id: 7,
  });
  const specOrder = JSON.stringify({ jsonrpc: '2.0', id: 'abc', method: 'tools/call', params: { arguments: { asset: big } } });
  // The id of a nested object is not the message's: no id.
  const nested = JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { arguments: { asset: big, x: { id: 9 } } } });
  const ok = JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'ping' });
  // Fed a few bytes at a time, so that the long lines arrive in many pieces.
  const text = `${sdkOrder}\n${specOrder}\n${nested}\n${ok}\n`;
  const pieces = text.match(/[\s\S]{1,37}/g)!;
  const { passed, answered } = await screen(pieces, 200);
  assert.deepEqual(passed, [ok]);
  assert.deepEqual(
    answered.map((a) => [a.id, a.error.code]),
    [
      [7, -32600],
      ['abc', -32600],
      [null, -32600],
    ],
  );
  assert.match(
    answered[0]!.error.message,
    new RegExp(`the message is ${Buffer.byteLength(sdkOrder)} bytes; at most 200 bytes per message`),
  );
  assert.equal(STDIO_MAX_MESSAGE_BYTES, 1_048_576);
});

test('a last line without a newline is read at the end of input', async () => {
  const ok = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  const { passed } = await screen([ok]);
  assert.deepEqual(passed, [ok]);
});

test('flushed waits until a slow stream has taken every write queued before it, and never for an ended one', async () => {
  const taken: string[] = [];
  const slow = new Writable({
    highWaterMark: 4,
    write(chunk: Buffer, _enc, done) {
      setTimeout(() => {
        taken.push(chunk.toString());
        done();
      }, 20);
    },
  });
  for (const s of ['one\n', 'two\n', 'three\n']) slow.write(s);
  assert.ok(slow.writableLength > 0, 'writes are queued');
  await flushed(slow);
  // (flushed's own empty write comes last.)
  assert.deepEqual(taken, ['one\n', 'two\n', 'three\n', '']);
  // Nothing queued, or the stream ended: at once.
  await flushed(slow);
  slow.end();
  await flushed(slow);
  // A stream that never takes its writes: the bound ends the wait.
  const stuck = new Writable({ write() {} });
  stuck.write('x');
  const t0 = Date.now();
  await flushed(stuck, 100);
  assert.ok(Date.now() - t0 < 2000);
});
