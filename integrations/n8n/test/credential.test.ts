import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ICredentialTestFunctions, ICredentialsDecrypted } from 'n8n-workflow';

import { FlowledgerApi } from '../credentials/FlowledgerApi.credentials';
import { Flowledger } from '../nodes/Flowledger/Flowledger.node';

describe("the credential's Test connection", () => {
	test("is the node's function: the credential has no declarative test, which n8n would run instead", () => {
		// n8n's CredentialsTester takes a credential's own `test` before any node's testedBy;
		// a request without a signature cannot test a signing token, nor tell a read token
		// from a write one.
		assert.equal('test' in new FlowledgerApi(), false);
		const [credential] = new Flowledger().description.credentials ?? [];
		assert.equal(credential.name, new FlowledgerApi().name);
		assert.equal(typeof credential.testedBy, 'string');
		const tests: Record<string, unknown> = new Flowledger().methods.credentialTest;
		assert.equal(typeof tests[credential.testedBy as string], 'function');
	});

	test("asks GET /v1/token through n8n's request helper and says which token answered", async () => {
		const sent: Array<Record<string, unknown>> = [];
		const context = {
			helpers: {
				request: async (options: Record<string, unknown>) => {
					sent.push(options);
					return { statusCode: 200, body: { name: 'n8n', scope: 'write', signing: false } };
				},
			},
		} as unknown as ICredentialTestFunctions;
		const credential: ICredentialsDecrypted = {
			id: 'c-1',
			name: 'Flowledger API',
			type: 'flowledgerApi',
			data: { baseUrl: 'http://ledger.test:8787', token: 'flt_x', signingSecret: '' },
		};
		const result = await new Flowledger().methods.credentialTest.flowledgerApiTest.call(context, credential);
		assert.deepEqual(result, { status: 'OK', message: 'connected as token n8n (write)' });
		assert.deepEqual(sent, [
			{
				method: 'GET',
				uri: 'http://ledger.test:8787/v1/token',
				headers: { Accept: 'application/json', Authorization: 'Bearer flt_x' },
				json: true,
				simple: false,
				resolveWithFullResponse: true,
				timeout: 10_000,
			},
		]);
	});
});
