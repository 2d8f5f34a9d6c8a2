import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { IHttpRequestOptions } from 'n8n-workflow';

import { FlowledgerApi } from '../credentials/FlowledgerApi.credentials';
import { testConnection, type ProbeRequest } from '../nodes/Flowledger/shared/connection';

const credential = { baseUrl: 'http://ledger.test:8787', token: 'flt_x', signingSecret: '' };

function probe(status: number, body: unknown) {
	const seen: ProbeRequest[] = [];
	return {
		seen,
		probe: async (request: ProbeRequest) => {
			seen.push(request);
			return { status, body };
		},
	};
}

describe('the credential test', () => {
	test('a write token is OK and named', async () => {
		const { seen, probe: p } = probe(200, { name: 'n8n', scope: 'write', signing: false });
		const result = await testConnection(p, credential);
		assert.deepEqual(result, { status: 'OK', message: 'connected as token n8n (write)' });
		assert.equal(seen[0].url, 'http://ledger.test:8787/v1/token');
		assert.equal(seen[0].headers.Authorization, 'Bearer flt_x');
	});

	test('a read token is the wrong scope, and says which scope is needed', async () => {
		const { probe: p } = probe(200, { name: 'dash', scope: 'read', signing: false });
		const result = await testConnection(p, credential);
		assert.equal(result.status, 'Error');
		assert.match(result.message, /token dash has the read scope; .* needs a write token/);
	});

	test('a refused token is 401 with the ledger\'s reason', async () => {
		const { probe: p } = probe(401, { error: { code: 'unknown_token', message: 'the token is unknown or revoked', field: null } });
		const result = await testConnection(p, credential);
		assert.deepEqual(result, {
			status: 'Error',
			message: 'the ledger refused the token (401 unknown_token): the token is unknown or revoked',
		});
	});

	test('an unreachable ledger says so, and why a container may not reach it', async () => {
		const result = await testConnection(async () => {
			throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
		}, credential);
		assert.equal(result.status, 'Error');
		assert.match(result.message, /cannot reach the ledger at http:\/\/ledger.test:8787 \(ECONNREFUSED\)/);
		assert.match(result.message, /container/);
	});

	test('something else at that address is not taken for the ledger', async () => {
		assert.match((await testConnection(probe(404, 'Not Found').probe, credential)).message, /404/);
		assert.match(
			(await testConnection(probe(200, '<html></html>').probe, credential)).message,
			/not as the flowledger receiver does/,
		);
	});

	test('a signing token without its secret is an error; with it the probe is signed', async () => {
		const signing = probe(200, { name: 's', scope: 'write', signing: true });
		assert.match((await testConnection(signing.probe, credential)).message, /must sign/);
		const secret = 'ab'.repeat(32);
		const result = await testConnection(signing.probe, { ...credential, signingSecret: secret }, 1764590400_000);
		assert.equal(result.status, 'OK');
		assert.match(signing.seen[1].headers['X-Flowledger-Signature'], /^t=1764590400,v2=[0-9a-f]{64}$/);
	});

	test('a missing base URL or token is said before any call', async () => {
		const { seen, probe: p } = probe(200, {});
		assert.match((await testConnection(p, { ...credential, baseUrl: 'ledger:8787' })).message, /http:\/\//);
		assert.match((await testConnection(p, { ...credential, token: ' ' })).message, /no token/);
		assert.equal(seen.length, 0);
	});
});

describe('the credential on each request', () => {
	test('adds Authorization: Bearer <token>, keeping the headers and the rest of the request', async () => {
		const authenticate = new FlowledgerApi().authenticate as (
			credentials: Record<string, unknown>,
			request: IHttpRequestOptions,
		) => Promise<IHttpRequestOptions>;
		const request: IHttpRequestOptions = {
			method: 'POST',
			url: 'http://ledger.test:8787/v1/operations/x/dispatch',
			headers: { 'Idempotency-Key': 'k-1', 'X-Flowledger-Signature': 't=1,v2=ab' },
			body: '{}',
		};
		const sent = await authenticate({ token: 'flt_x', baseUrl: 'http://ledger.test:8787' }, request);
		assert.deepEqual(sent.headers, {
			'Idempotency-Key': 'k-1',
			'X-Flowledger-Signature': 't=1,v2=ab',
			Authorization: 'Bearer flt_x',
		});
		assert.equal(sent.url, request.url);
		assert.equal(sent.body, '{}');
		assert.deepEqual(request.headers, { 'Idempotency-Key': 'k-1', 'X-Flowledger-Signature': 't=1,v2=ab' });
	});
});
