import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { createTempPgDatabase, PG_BASE_URL, PG_SKIP, postgresAvailable } from '../helpers/env.ts';

/**
 * A key creation whose COMMIT reached PostgreSQL but whose reply was lost (the network, a
 * stalled path) answers 503 after DB_QUERY_TIMEOUT_MS: the user never saw the key, so it must
 * not stay behind in their list taking one of the 5 active-key slots (KeyService `create`
 * deletes it). The loss is made by a TCP proxy on loopback in front of the real PostgreSQL
 * that, once armed, stops passing the server's bytes on a connection after that connection
 * has sent an insert into the armed table and then a commit. A thesis likewise: the user's
 * retry must not store a second one.
 */

const available = await postgresAvailable();
if (!available) console.log(PG_SKIP);

let temp: { url: string; drop: () => Promise<void> } | undefined;
let proxy: net.Server | undefined;
const sockets = new Set<net.Socket>();
/** The table whose INSERT's COMMIT gets its reply dropped next (one connection, once), or null. */
let armed: string | null = null;
let held = 0;
let h: Harness | undefined;

/** A loopback proxy to PostgreSQL (PG_BASE_URL's host and port); `armed` holds one COMMIT's reply. */
async function startProxy(): Promise<number> {
  const target = new URL(PG_BASE_URL);
  proxy = net.createServer((client) => {
    const server = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(server);
    let sawInsert = false;
    let hold = false;
    client.on('data', (b) => {
      const text = b.toString('latin1').toLowerCase();
      if (armed && text.includes(`insert into "${armed}"`)) sawInsert = true;
      if (armed && sawInsert && text.includes('commit')) {
        armed = null;
        hold = true;
        held++;
      }
      server.write(b);
    });
    server.on('data', (b) => {
      if (!hold) client.write(b);
    });
    const end = () => {
      client.destroy();
      server.destroy();
    };
    client.on('error', end).on('close', end);
    server.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => proxy!.listen(0, '127.0.0.1', resolve));
  return (proxy.address() as net.AddressInfo).port;
}

before(async () => {
  if (!available) return;
  temp = await createTempPgDatabase();
  const port = await startProxy();
  const u = new URL(temp.url);
  u.host = `127.0.0.1:${port}`;
  h = await startHarness({ config: { DATABASE_URL: u.toString(), PGLITE_DIR: 'memory://' } });
});
after(async () => {
  await h?.stop();
  for (const s of sockets) s.destroy();
  proxy?.close();
  await temp?.drop();
});

/** Lists with `list` every 100 ms until it is empty, for at most 5 s: the last list. */
async function emptied<T>(list: () => Promise<T[]>): Promise<T[]> {
  const deadline = Date.now() + 5_000;
  let listed = await list();
  while (listed.length > 0 && Date.now() < deadline) {
    await sleep(100);
    listed = await list();
  }
  return listed;
}

test(
  'a key whose creation committed but answered 503 (reply lost) is deleted, not left in the list taking a slot',
  { skip: available ? false : PG_SKIP },
  async () => {
    const jwt = await h!.jwt(`lost-reply-${Date.now()}`);
    const keys = async () => {
      const r = await h!.request('GET', '/api/v1/keys', { token: jwt });
      assert.equal(r.status, 200, r.raw);
      return (r.body.data as { keys: { id: string; status: string }[] }).keys;
    };
    assert.deepEqual(await keys(), []);

    armed = 'api_keys';
    const lost = await h!.request('POST', '/api/v1/keys/create', { token: jwt, body: { name: 'lost' } });
    assert.equal(held, 1, 'the proxy held the reply of the key insert’s COMMIT');
    assert.equal(lost.status, 503, lost.raw);

    // The row committed (PostgreSQL got the COMMIT): it is gone within a few seconds, never listed for long.
    assert.deepEqual(await emptied(keys), [], 'the key nobody received is not left in the list');

    // The user's retry gets a key and it is the only one.
    const retry = await h!.request('POST', '/api/v1/keys/create', { token: jwt, body: { name: 'retry' } });
    assert.equal(retry.status, 201, retry.raw);
    const after = await keys();
    assert.equal(after.length, 1);
    assert.equal(after[0]!.status, 'active');
  },
);

test(
  'a thesis whose creation committed but answered 503 (reply lost) is deleted: the retry leaves one thesis, not two',
  { skip: available ? false : PG_SKIP },
  async () => {
    const { key } = await h!.keyFor('pro');
    const theses = async () => {
      const r = await h!.request('GET', '/api/v1/thesis', { token: key });
      assert.equal(r.status, 200, r.raw);
      return (r.body.data as { theses: { id: string; title: string }[] }).theses;
    };
    const body = { asset: 'eth', direction: 'long', title: 'ETH to 5k' };
    armed = 'theses';
    const heldBefore = held;
    const lost = await h!.request('POST', '/api/v1/thesis', { token: key, body });
    assert.equal(held, heldBefore + 1, 'the proxy held the reply of the thesis insert’s COMMIT');
    assert.equal(lost.status, 503, lost.raw);
    assert.deepEqual(await emptied(theses), [], 'the thesis of the failed request is not left behind');
    const retry = await h!.request('POST', '/api/v1/thesis', { token: key, body });
    assert.equal(retry.status, 201, retry.raw);
    assert.deepEqual(
      (await theses()).map((t) => t.title),
      ['ETH to 5k'],
    );
  },
);
