import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { INodeExecutionData } from 'n8n-workflow';

import { outputsFor } from '../nodes/Flowledger/actions/description';
import { execute as runGuard } from '../nodes/Flowledger/actions/guard.operation';
import { Flowledger } from '../nodes/Flowledger/Flowledger.node';
import { Run } from '../nodes/Flowledger/shared/run';
import { FakeLedger, context, decide, item, type Params } from './fake';

const node = new Flowledger();

async function run(params: Params, items: INodeExecutionData[], ledger: FakeLedger, extra = {}) {
	return await node.execute.call(context({ items, params, ledger, ...extra }));
}

const guard: Params = {
	operation: 'guard',
	operationId: (i: number) => `invoice:INV-${i}:send`,
	processingVersion: 'invoice-sender@1',
	inputSource: 'value',
	inputValue: (i: number) => ({ invoice: `INV-${i}` }),
	onHold: 'output',
};

const invoices = [0, 1, 2].map((i) => item({ body: { invoice: `INV-${i}` }, n: i }));

describe('Guard', () => {
	test('routes each item to Go, Skip or Hold, passing it through with the answer under one key', async () => {
		const ledger = new FakeLedger(decide({ 'invoice:INV-1:send': 'skip', 'invoice:INV-2:send': 'hold' }));
		const [go, skip, hold] = await run(guard, invoices, ledger);
		assert.deepEqual(go.map((o) => o.json.n), [0]);
		assert.deepEqual(skip.map((o) => o.json.n), [1]);
		assert.deepEqual(hold.map((o) => o.json.n), [2]);
		const passed = go[0];
		assert.deepEqual(passed.json.body, { invoice: 'INV-0' }); // the original data, unchanged
		assert.equal((passed.json.flowledger as Record<string, unknown>).decision, 'go');
		assert.deepEqual(passed.pairedItem, { item: 0 });
		assert.equal((skip[0].json.flowledger as Record<string, unknown>).receipt, 'CRM-1');
		assert.equal((hold[0].json.flowledger as Record<string, unknown>).reason, 'input_mismatch');
		assert.deepEqual(hold[0].pairedItem, { item: 2 });
		assert.equal(Object.keys(go[0].json).length, Object.keys(invoices[0].json).length + 1);
	});

	test('sends the execution id, workflow id and run index without the user typing them', async () => {
		const ledger = new FakeLedger(decide({}));
		await run(guard, [invoices[0]], ledger, { executionId: '77', runIndex: 2 });
		const sent = ledger.sent[0];
		assert.equal(sent.method, 'POST');
		assert.equal(sent.url, 'http://ledger.test:8787/v1/operations/invoice%3AINV-0%3Asend/dispatch');
		assert.deepEqual(sent.json, {
			processing_version: 'invoice-sender@1',
			execution_id: '77',
			workflow_id: 'wf-7',
			run_index: 2,
			step: 'Guard',
			input: { invoice: 'INV-0' },
			source: 'prod-n8n',
		});
		assert.match(sent.headers['Idempotency-Key'], /^n8n-dispatch-[0-9a-f]{48}$/);
		assert.equal(sent.headers.Authorization, 'Bearer flt_test');
		assert.equal(sent.headers['Content-Type'], 'application/json');
	});

	test('reads and decrypts its credential once per run, not once per call to the ledger', async () => {
		const ledger = new FakeLedger(decide({}));
		const decrypted = { count: 0 };
		await run(guard, invoices, ledger, { decrypted, credentials: { token: 'flt_once' } });
		assert.equal(ledger.sent.length, 3);
		assert.equal(decrypted.count, 1);
		assert.deepEqual(
			ledger.sent.map((s) => s.headers.Authorization),
			['Bearer flt_once', 'Bearer flt_once', 'Bearer flt_once'],
		);
	});

	test('the same execution sends the same key again; another execution another key', async () => {
		const ledger = new FakeLedger(decide({}));
		await run(guard, [invoices[0]], ledger, { executionId: '77' });
		await run(guard, [invoices[0]], ledger, { executionId: '77' });
		await run(guard, [invoices[0]], ledger, { executionId: '78' });
		const keys = ledger.sent.map((s) => s.headers['Idempotency-Key']);
		assert.equal(keys[0], keys[1]);
		assert.notEqual(keys[0], keys[2]);
	});

	test('input: the item (without an earlier answer), or chosen fields', async () => {
		const ledger = new FakeLedger(decide({}));
		const earlier = item({ body: { invoice: 'INV-0' }, flowledger: { decision: 'go' } });
		await run({ ...guard, inputSource: 'item' }, [earlier], ledger);
		assert.deepEqual(ledger.sent[0].json?.input, { body: { invoice: 'INV-0' } });
		await run({ ...guard, inputSource: 'fields', inputFields: 'body.invoice, body.amount' }, [earlier], ledger);
		assert.deepEqual(ledger.sent[1].json?.input, { 'body.invoice': 'INV-0', 'body.amount': null });
	});

	test('a hold stops the execution with an error naming the operation and reason', async () => {
		const ledger = new FakeLedger(decide({ 'invoice:INV-0:send': 'hold' }));
		await assert.rejects(run({ ...guard, onHold: 'stop' }, [invoices[0]], ledger), (error: Error) => {
			assert.equal(error.message, 'flowledger holds invoice:INV-0:send: input_mismatch');
			return true;
		});
	});

	test('Stop is the default for a hold', async () => {
		const ledger = new FakeLedger(decide({ 'invoice:INV-0:send': 'hold' }));
		const defaults = { ...guard };
		delete defaults.onHold;
		await assert.rejects(run(defaults, [invoices[0]], ledger), /flowledger holds/);
	});

	test('a ledger error fails the node; continuing on fail routes the item to Hold, never Go', async () => {
		const refuse = () => ({ status: 422, body: { error: { code: 'too_long', message: 'too long', field: 'processing_version' } } });
		await assert.rejects(run(guard, [invoices[0]], new FakeLedger(refuse)), /422 too_long\): too long \(field processing_version\)/);
		const [go, skip, hold] = await run(guard, [invoices[0]], new FakeLedger(refuse), { continueOnFail: true });
		assert.deepEqual([go.length, skip.length, hold.length], [0, 0, 1]);
		assert.match(String((hold[0].json.error as Record<string, unknown>).message), /too long/);
	});

	test('the deadline and approval are sent with an offset', async () => {
		const ledger = new FakeLedger(decide({}));
		const options = { deadline: '2026-12-01T12:00:00', approvalVersion: 'invoice-sender@1', approvalExpiresAt: '2026-12-02T09:00:00+00:00' };
		await run({ ...guard, options }, [invoices[0]], ledger);
		assert.equal(ledger.sent[0].json?.deadline, '2026-12-01T11:00:00.000Z');
		assert.deepEqual(ledger.sent[0].json?.approval, { version: 'invoice-sender@1', expires_at: '2026-12-02T09:00:00+00:00' });
	});

	test('has three outputs, Go, Skip and Hold; the other operations one', () => {
		assert.deepEqual(outputsFor({}).map((o) => o.displayName), ['Go', 'Skip', 'Hold']);
		assert.equal(outputsFor({ operation: 'guard' }).length, 3);
		for (const operation of ['confirm', 'fail', 'reportFailedExecution']) {
			assert.equal(outputsFor({ operation }).length, 1);
		}
		assert.match(String(node.description.outputs), /^=\{\{\(.*\)\(\$parameter\)\}\}$/s);
	});
});

describe('Guard: an operation ID built from a missing field', () => {
	const expression = "={{ 'invoice:' + $json.body.invoice_id + ':send' }}";
	const built = (json: Record<string, unknown>) => {
		const body = (json.body ?? {}) as Record<string, unknown>;
		return `invoice:${String(body.invoice_id)}:send`;
	};

	test('is a node error naming the segment and the field, and nothing is dispatched', async () => {
		const ledger = new FakeLedger(decide({}));
		const items = [item({ body: { amount: 5 } })];
		const params = { ...guard, operationId: () => built(items[0].json) };
		await assert.rejects(
			run(params, items, ledger, { nodeParameters: { operationId: expression } }),
			(error: Error) => {
				assert.equal(
					error.message,
					"operation ID 'invoice:undefined:send' has a segment 'undefined': the expression that builds it read a missing field; the item has no $json.body.invoice_id",
				);
				return true;
			},
		);
		assert.equal(ledger.sent.length, 0);
	});

	for (const id of ['invoice:null:send', 'invoice:NaN:send', 'invoice:[object Object]:send', 'invoice::send']) {
		test(`${id} is refused before any call`, async () => {
			const ledger = new FakeLedger(decide({}));
			await assert.rejects(run({ ...guard, operationId: id }, [item({})], ledger), /operation ID '.*' has (a|an empty) segment/);
			assert.equal(ledger.sent.length, 0);
		});
	}

	test('an expression n8n could not evaluate (empty ID) names the missing field too', async () => {
		const ledger = new FakeLedger(decide({}));
		await assert.rejects(
			run({ ...guard, operationId: () => undefined }, [item({ body: {} })], ledger, { nodeParameters: { operationId: expression } }),
			/the operation ID is empty, not text, or longer than 200 characters; the item has no \$json\.body\.invoice_id/,
		);
		assert.equal(ledger.sent.length, 0);
	});

	test('with Continue On Fail the item goes to Hold with the error, never to Go', async () => {
		const ledger = new FakeLedger(decide({}));
		const [go, skip, hold] = await run({ ...guard, operationId: 'invoice:undefined:send' }, [item({})], ledger, { continueOnFail: true });
		assert.deepEqual([go.length, skip.length, hold.length], [0, 0, 1]);
		assert.match(String((hold[0].json.error as Record<string, unknown>).message), /segment 'undefined'/);
		assert.equal(ledger.sent.length, 0);
	});

	test('Confirm and Fail refuse such an ID carried from a Guard, before any call', async () => {
		const ledger = new FakeLedger(decide({}));
		const carried = item({ id: 'R-1', flowledger: answer('invoice:undefined:send'), error: { status: 422 } });
		await assert.rejects(run({ operation: 'confirm', receiptSource: 'field', receiptField: 'id' }, [carried], ledger), /segment 'undefined'/);
		await assert.rejects(run({ operation: 'fail', outcome: 'auto' }, [carried], ledger), /segment 'undefined'/);
		await assert.rejects(run({ ...confirm, operationId: 'invoice:null:send' }, [item({ id: 1 })], ledger), /segment 'null'/);
		assert.equal(ledger.sent.length, 0);
	});
});

const confirm: Params = {
	operation: 'confirm',
	operationId: 'invoice:INV-0:send',
	receiptSource: 'value',
	receipt: (i: number) => [991, 'CRM-2'][i],
};
const TYPE = 'n8n-nodes-flowledger.flowledger';
const answer = (operation_id: string) => ({ operation_id, decision: 'go', state: 'dispatching' });

describe('Confirm', () => {
	test('records the receipt and passes the item on with the answer', async () => {
		const ledger = new FakeLedger(decide({}));
		const targetAnswers = [item({ id: 991 }), item({ id: 'CRM-2' })];
		const [out] = await run(confirm, targetAnswers, ledger);
		assert.deepEqual(ledger.sent.map((s) => s.json?.receipt), ['991', 'CRM-2']);
		assert.equal(ledger.sent[0].json?.execution_id, '41');
		assert.ok(ledger.sent[0].url.endsWith('/confirm'));
		assert.deepEqual(out.map((o) => o.json.id), [991, 'CRM-2']);
		assert.equal((out[0].json.flowledger as Record<string, unknown>).state, 'confirmed');
	});

	for (const receipt of [undefined, null, '', 'undefined', 'null', '[object Object]', 'NaN', Number.NaN, { id: 1 }]) {
		test(`a receipt of ${JSON.stringify(receipt) ?? 'undefined'} is a node error and nothing is sent`, async () => {
			const ledger = new FakeLedger(decide({}));
			await assert.rejects(run({ ...confirm, receipt: () => receipt }, [item({})], ledger), /not confirmed: the receipt/);
			assert.equal(ledger.sent.length, 0);
		});
	}

	test("by default the receipt is the answer's id field, read without an expression", async () => {
		const ledger = new FakeLedger(decide({}));
		const byField = { operation: 'confirm', operationId: 'invoice:INV-0:send' };
		await run(byField, [item({ id: 991 })], ledger);
		await run({ ...byField, receiptField: 'data.message_id' }, [item({ data: { message_id: 'M-4' } })], ledger);
		assert.deepEqual(ledger.sent.map((s) => s.json?.receipt), ['991', 'M-4']);
		for (const missing of [item({ status: 'accepted' }), item({ id: null }), item({ id: 'undefined' })]) {
			await assert.rejects(run(byField, [missing], ledger), /not confirmed: the receipt/);
		}
		assert.equal(ledger.sent.length, 2);
	});

	test("without an operation ID: the Guard's, through the paired item of the Guard before it", async () => {
		const ledger = new FakeLedger(decide({}));
		const params = { operation: 'confirm' };
		const parents = [
			{ name: 'Write', type: 'n8n-nodes-base.httpRequest' },
			{ name: 'Old guard', type: TYPE, disabled: true, parameters: {} },
			{ name: 'Ledger: confirm earlier', type: TYPE, parameters: { operation: 'confirm' } },
			{ name: 'Guard: may we write?', type: TYPE, parameters: { operation: 'guard' } },
		];
		const paired = { 'Guard: may we write?': (i: number) => ({ body: {}, flowledger: answer(`invoice:INV-${i}:send`) }) };
		await run(params, [item({ id: 'A' }), item({ id: 'B' })], ledger, { parents, paired });
		assert.deepEqual(ledger.sent.map((s) => decodeURIComponent(s.url.split('/')[5])), ['invoice:INV-0:send', 'invoice:INV-1:send']);
		// a Guard whose Operation parameter is left at its default is a Guard too
		await run(params, [item({ id: 'C' })], ledger, { parents: [{ name: 'G', type: TYPE, parameters: {} }], paired: { G: () => ({ flowledger: answer('op-g') }) } });
		assert.ok(ledger.sent[2].url.includes('/v1/operations/op-g/confirm'));
	});

	test('without an operation ID and no Guard to take it from, the node says so and sends nothing', async () => {
		const ledger = new FakeLedger(decide({}));
		await assert.rejects(run({ operation: 'confirm' }, [item({ id: 'A' })], ledger), /no operation ID: name it, or place this node after a Flowledger Guard/);
		const parents = [{ name: 'G', type: TYPE, parameters: {} }];
		await assert.rejects(run({ operation: 'confirm' }, [item({ id: 'A' })], ledger, { parents }), /does not lead back to an answer of G/);
		assert.equal(ledger.sent.length, 0);
	});

	test('a receipt conflict is an error: a possible duplicate write', async () => {
		const ledger = new FakeLedger(() => ({ status: 200, body: { operation_id: 'x', state: 'confirmed', reason: 'receipt_conflict' } }));
		await assert.rejects(run(confirm, [item({ id: 991 })], ledger), /receipt_conflict/);
	});
});

describe('Fail', () => {
	const fail: Params = { operation: 'fail', operationId: 'invoice:INV-0:send', outcome: 'auto' };

	test('auto reads the error output of the write: 422 is rejected, 503 and timeouts unknown', async () => {
		const ledger = new FakeLedger(decide({}));
		const items = [
			item({ body: {}, error: { status: 422, message: '422 - "no"', name: 'AxiosError' } }),
			item({ body: {}, error: { httpCode: '503', message: 'down' } }),
			item({ body: {}, error: { code: 'ECONNABORTED', message: 'timeout of 10000ms exceeded' } }),
		];
		const [out] = await run(fail, items, ledger);
		assert.deepEqual(ledger.sent.map((s) => s.json?.outcome), ['rejected', 'unknown', 'unknown']);
		assert.deepEqual(ledger.sent.map((s) => s.json?.error), [
			'422: 422 - "no"',
			'503: down',
			'ECONNABORTED: timeout of 10000ms exceeded',
		]);
		assert.deepEqual(out.map((o) => (o.json.flowledger as Record<string, unknown>).outcome), ['rejected', 'unknown', 'unknown']);
	});

	test("without an operation ID: the Guard's answer the error output still carries", async () => {
		const ledger = new FakeLedger(decide({}));
		const failed = item({ body: {}, flowledger: answer('invoice:INV-9:send'), error: { status: 422 } });
		await run({ operation: 'fail', outcome: 'auto' }, [failed], ledger);
		assert.ok(ledger.sent[0].url.endsWith('/v1/operations/invoice%3AINV-9%3Asend/fail'));
		assert.equal(ledger.sent[0].json?.outcome, 'rejected');
	});

	test('an outcome chosen by hand wins', async () => {
		const ledger = new FakeLedger(decide({}));
		await run({ ...fail, outcome: 'unknown' }, [item({ error: { status: 422 } })], ledger);
		assert.equal(ledger.sent[0].json?.outcome, 'unknown');
	});
});

describe('Report failed execution', () => {
	test('posts only what the hook keeps to /v1/hooks/n8n/error', async () => {
		const ledger = new FakeLedger(() => ({ status: 200, body: { execution_id: '11', matched: 1, holds: [] } }));
		const trigger = item({
			execution: {
				id: '11',
				lastNodeExecuted: 'Write',
				error: { name: 'NodeApiError', message: 'boom', httpCode: '500', context: { request: { headers: { authorization: 'Bearer s' } } }, stack: 's' },
			},
			workflow: { id: 'wf', name: 'w' },
		});
		const [out] = await run({ operation: 'reportFailedExecution' }, [trigger], ledger);
		assert.equal(ledger.sent[0].url, 'http://ledger.test:8787/v1/hooks/n8n/error');
		assert.ok(!String(ledger.sent[0].body).includes('Bearer'));
		assert.deepEqual(ledger.sent[0].json, {
			execution: { id: '11', lastNodeExecuted: 'Write', error: { name: 'NodeApiError', message: 'boom', httpCode: '500' } },
			workflow: { id: 'wf', name: 'w' },
		});
		assert.equal((out[0].json.flowledger as Record<string, unknown>).matched, 1);
	});
});

describe('inside the node: retries', () => {
	test('a dropped connection is retried with the same key and the item still goes to Go', async () => {
		const ledger = new FakeLedger((request, n) => {
			if (n === 1) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
			return decide({})(request);
		});
		const waits: number[] = [];
		const ctx = context({ items: [invoices[0]], params: guard, ledger });
		const send = async (request: Parameters<FakeLedger['send']>[0]) => await ledger.send(request);
		const runner = new Run(ctx, send, { baseUrl: 'http://ledger.test:8787' }, '', async (ms) => void waits.push(ms));
		const [go] = await runGuard(runner);
		assert.equal(go.length, 1);
		assert.deepEqual(waits, [500]);
		assert.equal(ledger.sent[0].headers['Idempotency-Key'], ledger.sent[1].headers['Idempotency-Key']);
	});
});
