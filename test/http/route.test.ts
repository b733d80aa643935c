import { test } from 'node:test';
import assert from 'node:assert/strict';
import { invalidField, reworded, ServiceError } from '../../src/errors.ts';
import { withLocation } from '../../src/http/route.ts';

/**
 * How a service's refused field is worded by each surface (src/errors.ts `invalidField`,
 * src/http/route.ts `withLocation`, MCP's `failure` through `reworded`). The end-to-end
 * cases (a late `end`, a foreign `cursor`, a hit stop) are in market.test.ts, theses.test.ts
 * and test/mcp/mcp-http.test.ts.
 */

const late = () => invalidField('end', '2025-10-01 is after the as-of day 2025-09-30; give 2025-09-30 or earlier');

test('withLocation words a refused field by where the request carried it, nested fields by their top key', () => {
  const q = withLocation(late(), { params: {}, query: { end: '2025-10-01' }, body: undefined }) as ServiceError;
  assert.equal(q.message, "Invalid query parameter 'end': 2025-10-01 is after the as-of day 2025-09-30; give 2025-09-30 or earlier");
  assert.deepEqual(q.details, { location: 'querystring', field: 'end' });
  const nested = invalidField('conditions.0.metric', 'BTC has no chain health score; use another metric');
  const b = withLocation(nested, { params: {}, query: {}, body: { conditions: [{ metric: 'chain_health_score' }] } }) as ServiceError;
  assert.equal(b.message, "Invalid body field 'conditions.0.metric': BTC has no chain health score; use another metric");
  assert.deepEqual(b.details, { location: 'body', field: 'conditions.0.metric' });
});

test('a field the request does not carry, or an error that is not a refused field, is left as it is', () => {
  const err = late();
  assert.equal(withLocation(err, { params: {}, query: {}, body: undefined }), err);
  assert.equal(err.message, "Invalid parameter 'end': 2025-10-01 is after the as-of day 2025-09-30; give 2025-09-30 or earlier");
  const other = new ServiceError('NOT_FOUND', 'Thesis not found');
  assert.equal(withLocation(other, { params: { id: 'x' }, query: {}, body: undefined }), other);
});

test('MCP words it as an argument; one already placed by REST keeps its wording and location', () => {
  const mcp = reworded(late(), 'argument');
  assert.equal(mcp.message, "Invalid argument 'end': 2025-10-01 is after the as-of day 2025-09-30; give 2025-09-30 or earlier");
  assert.deepEqual(mcp.details, { field: 'end' });
  const placed = withLocation(late(), { params: {}, query: { end: 'x' }, body: undefined }) as ServiceError;
  assert.equal(reworded(placed, 'argument'), placed);
});
