import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { callLedger, signature, type WireResponse } from '../nodes/Flowledger/shared/transport';
import { FakeLedger } from './fake';

const SECRET = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';
const ok: WireResponse = { status: 200, body: { decision: 'go', attempt: 1 } };
const call = {
	method: 'POST' as const,
	path: '/v1/operations/invoice%3AINV-42%3Asend/dispatch',
	body: { processing_version: 'v1' },
	idempotencyKey: 'n8n-dispatch-abc',
};
const fast = { tries: 4, firstWaitMs: 500, timeoutMs: 1000 };

function sleeper() {
	const waits: number[] = [];
	return { waits, sleep: async (ms: number) => void waits.push(ms) };
}

function noAnswer(code: string) {
	return Object.assign(new Error(code), { code });
}

describe('signing (v2)', () => {
	test('matches a fixed vector: HMAC-SHA256 of "t.METHOD.PATH.body" keyed with the hex secret', () => {
		assert.equal(
			signature(
				SECRET,
				1764590400,
				'POST',
				'/v1/operations/invoice%3AINV-42%3Asend/dispatch?x=1',
				'{"processing_version":"v1"}',
			),
			't=1764590400,v2=3a4bc841a91ed71de00b19063a05d6fdda2f5d6ea0451744d02c21f01fe16f50',
		);
		assert.equal(
			signature(SECRET, 1764590400, 'get', '/v1/token', ''),
			't=1764590400,v2=a720c3d1b4d9a565510bc4566e22d7e453737e16e886e8c517e4738ecfc99489',
		);
	});

	test('a call is signed over the exact body and path it sends, at the clock time', async () => {
		const ledger = new FakeLedger(() => ok);
		const clock = { now: () => 1764590400_999 };
		await callLedger(ledger.send, async () => {}, { baseUrl: 'http://l:8787/', signingSecret: SECRET }, call, fast, clock);
		const sent = ledger.sent[0];
		const expected = signature(SECRET, 1764590400, 'POST', call.path, sent.body ?? '');
		assert.equal(sent.headers['X-Flowledger-Signature'], expected);
		assert.equal(sent.url, 'http://l:8787' + call.path);
		assert.equal(sent.body, JSON.stringify(call.body));
	});

	test('a retry within the same second is stamped a second later, so its signature is new', async () => {
		// The ledger remembers a signature once it has checked it, even when it then answers
		// 5xx: the same signature again would be refused as replayed.
		const ledger = new FakeLedger((_r, n) => (n < 3 ? { status: 503, body: {} } : ok));
		const clock = { now: () => 1764590400_100 };
		await callLedger(ledger.send, async () => {}, { baseUrl: 'http://l', signingSecret: SECRET }, call, fast, clock);
		const stamps = ledger.sent.map((s) => s.headers['X-Flowledger-Signature'].split(',')[0]);
		assert.deepEqual(stamps, ['t=1764590400', 't=1764590401', 't=1764590402']);
		const body = ledger.sent[0].body ?? '';
		assert.equal(ledger.sent[1].headers['X-Flowledger-Signature'], signature(SECRET, 1764590401, 'POST', call.path, body));
		assert.equal(new Set(ledger.sent.map((s) => s.headers['X-Flowledger-Signature'])).size, 3);
	});

	test('without a signing secret nothing is signed', async () => {
		const ledger = new FakeLedger(() => ok);
		await callLedger(ledger.send, async () => {}, { baseUrl: 'http://l' }, call, fast);
		assert.equal(ledger.sent[0].headers['X-Flowledger-Signature'], undefined);
	});

	test('a secret that is not 64 hex characters is refused before sending', async () => {
		const ledger = new FakeLedger(() => ok);
		await assert.rejects(
			callLedger(ledger.send, async () => {}, { baseUrl: 'http://l', signingSecret: 'hunter2' }, call, fast),
			/64 hex characters/,
		);
		assert.equal(ledger.sent.length, 0);
	});
});

describe('retries', () => {
	test('no answer, then an answer: retried with the same key after a wait', async () => {
		const ledger = new FakeLedger((_r, n) => {
			if (n === 1) throw noAnswer('ECONNRESET');
			return ok;
		});
		const { waits, sleep } = sleeper();
		const answer = await callLedger(ledger.send, sleep, { baseUrl: 'http://l' }, call, fast);
		assert.equal(answer.decision, 'go');
		assert.deepEqual(waits, [500]);
		assert.equal(ledger.sent.length, 2);
		assert.deepEqual(
			ledger.sent.map((s) => s.headers['Idempotency-Key']),
			['n8n-dispatch-abc', 'n8n-dispatch-abc'],
		);
		assert.equal(ledger.sent[0].body, ledger.sent[1].body);
	});

	for (const status of [500, 502, 503, 429]) {
		test(`${status} is retried with doubling waits`, async () => {
			const ledger = new FakeLedger((_r, n) =>
				n < 3 ? { status, body: { error: { code: 'unavailable', message: 'retry later', field: null } } } : ok,
			);
			const { waits, sleep } = sleeper();
			await callLedger(ledger.send, sleep, { baseUrl: 'http://l' }, call, fast);
			assert.deepEqual(waits, [500, 1000]);
		});
	}

	test('a 409 for the same key still running is retried', async () => {
		const ledger = new FakeLedger((_r, n) =>
			n === 1
				? { status: 409, body: { error: { code: 'idempotency_in_flight', message: 'a request with this key is running', field: null } } }
				: ok,
		);
		await callLedger(ledger.send, async () => {}, { baseUrl: 'http://l' }, call, fast);
		assert.equal(ledger.sent.length, 2);
	});

	for (const [status, code] of [
		[400, 'invalid_json'],
		[401, 'unknown_token'],
		[403, 'forbidden'],
		[409, 'illegal_transition'],
		[422, 'invalid_input'],
	] as const) {
		test(`${status} ${code} fails at once with the ledger's own words`, async () => {
			const ledger = new FakeLedger(() => ({
				status,
				body: { error: { code, message: 'receipt must be …', field: 'receipt' } },
			}));
			await assert.rejects(
				callLedger(ledger.send, async () => {}, { baseUrl: 'http://l' }, call, fast),
				(error: Error) => {
					assert.match(error.message, new RegExp(`${status} ${code}\\): receipt must be … \\(field receipt\\)`));
					return true;
				},
			);
			assert.equal(ledger.sent.length, 1);
		});
	}

	test('after the last try the error says how many and why', async () => {
		const ledger = new FakeLedger(() => {
			throw noAnswer('ECONNREFUSED');
		});
		const { waits, sleep } = sleeper();
		await assert.rejects(
			callLedger(ledger.send, sleep, { baseUrl: 'http://l' }, call, fast),
			/cannot reach the ledger at http:\/\/l: ECONNREFUSED \(after 4 tries\)/,
		);
		assert.deepEqual(waits, [500, 1000, 2000]);
	});

	test('a 200 that is not JSON is an error, not an answer', async () => {
		const ledger = new FakeLedger(() => ({ status: 200, body: '<html>n8n is starting up</html>' }));
		await assert.rejects(
			callLedger(ledger.send, async () => {}, { baseUrl: 'http://l' }, call, fast),
			/without JSON/,
		);
	});

	test('a JSON answer given as text is parsed', async () => {
		const ledger = new FakeLedger(() => ({ status: 200, body: '{"decision":"skip"}' }));
		const answer = await callLedger(ledger.send, async () => {}, { baseUrl: 'http://l' }, call, fast);
		assert.equal(answer.decision, 'skip');
	});
});
