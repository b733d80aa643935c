// Baseline for the benchmarks: a bare Fastify route that serves fixed bytes (the body the
// real service returned), with no schemas, no envelope work and no logging.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const body = readFileSync(process.argv[2]!, 'utf8');
const app = Fastify({ logger: false });
app.get('/api/v1/signals', (_req, reply) => {
  reply.type('application/json; charset=utf-8').send(body);
});
await app.listen({ port: Number(process.argv[3] ?? process.env.PORT ?? 0), host: '127.0.0.1' });
const addr = app.server.address();
process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : ''}\n`);
// A normal exit on SIGTERM (how the bench stops it), so that BENCH_NODE_ARGS=--cpu-prof writes its profile.
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
