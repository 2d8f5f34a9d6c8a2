import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
	classify,
	describeFailure,
	errorReport,
	idempotencyKey,
	instantOf,
	missingFields,
	operationIdProblem,
	pickFields,
	receiptOf,
	statusOf,
	type KeyParts,
} from '../nodes/Flowledger/shared/rules';

describe('Fail auto: how a failed write is classified', () => {
	const cases: Array<[string, unknown, 'rejected' | 'unknown']> = [
		// The HTTP Request node's error output: error.status, a number.
		['400 on the error output', { status: 400, message: '400 - "bad"' }, 'rejected'],
		['404 on the error output', { status: 404 }, 'rejected'],
		['409 on the error output', { status: 409 }, 'rejected'],
		['422 on the error output', { status: 422, name: 'AxiosError', code: 'ERR_BAD_REQUEST' }, 'rejected'],
		['408 on the error output', { status: 408 }, 'unknown'],
		['429 on the error output', { status: 429 }, 'unknown'],
		['500 on the error output', { status: 500 }, 'unknown'],
		['502 on the error output', { status: 502 }, 'unknown'],
		['503 on the error output', { status: 503 }, 'unknown'],
		// The Error Trigger's execution.error: httpCode, a string.
		['422 as an Error Trigger httpCode', { httpCode: '422', name: 'NodeApiError' }, 'rejected'],
		['404 as an Error Trigger httpCode', { httpCode: '404' }, 'rejected'],
		['503 as an Error Trigger httpCode', { httpCode: '503' }, 'unknown'],
		['429 as an Error Trigger httpCode', { httpCode: '429' }, 'unknown'],
		// No answer at all.
		['a timeout', { code: 'ECONNABORTED', message: 'timeout of 10000ms exceeded' }, 'unknown'],
		['ETIMEDOUT', { code: 'ETIMEDOUT' }, 'unknown'],
		['ECONNRESET', { code: 'ECONNRESET', message: 'socket hang up' }, 'unknown'],
		['ECONNREFUSED', { code: 'ECONNREFUSED' }, 'unknown'],
		['no error on the item', undefined, 'unknown'],
		['an error without a status', { message: 'something' }, 'unknown'],
		['a nonsense status', { status: 'abc' }, 'unknown'],
	];
	for (const [name, error, expected] of cases) {
		test(`${name} is ${expected}`, () => assert.equal(classify(error), expected));
	}

	test('both shapes give the same status', () => {
		assert.equal(statusOf({ status: 422 }), 422);
		assert.equal(statusOf({ httpCode: '422' }), 422);
		assert.equal(statusOf({ response: { status: 422 } }), 422);
	});

	test('the recorded text names status, code and message, never the request', () => {
		const text = describeFailure({
			status: 422,
			code: 'ERR_BAD_REQUEST',
			message: '422 - "no such customer"',
			context: { request: { headers: { authorization: 'Bearer secret' } } },
			stack: 'at x',
		});
		assert.equal(text, '422 ERR_BAD_REQUEST: 422 - "no such customer"');
		assert.ok(describeFailure({ message: 'x'.repeat(2000) }).length <= 500);
	});
});

describe('Confirm: receipts', () => {
	for (const value of ['undefined', 'null', '[object Object]', 'NaN', '', '   ', ' undefined ']) {
		test(`the text ${JSON.stringify(value)} is refused`, () => {
			assert.ok('problem' in receiptOf(value));
		});
	}
	for (const value of [undefined, null, { id: 1 }, [1], Number.NaN, Number.POSITIVE_INFINITY, true]) {
		test(`the value ${String(value)} is refused`, () => assert.ok('problem' in receiptOf(value)));
	}
	test('a number becomes text, a real id is kept as it is', () => {
		assert.deepEqual(receiptOf(991), { receipt: '991' });
		assert.deepEqual(receiptOf('CRM-991'), { receipt: 'CRM-991' });
		assert.deepEqual(receiptOf('0'), { receipt: '0' });
	});
	test('the problem says what was wrong', () => {
		const found = receiptOf('[object Object]');
		assert.ok('problem' in found && found.problem.includes("'[object Object]'"));
	});
});

describe('the Idempotency-Key', () => {
	const base: KeyParts = {
		call: 'dispatch',
		workflowId: 'wf-7',
		executionId: '41',
		nodeName: 'Guard',
		runIndex: 0,
		itemIndex: 0,
		operationId: 'invoice:INV-42:send',
	};

	test('is the same for the same call of the same execution', () => {
		assert.equal(idempotencyKey(base), idempotencyKey({ ...base }));
	});

	const changes: Array<Partial<KeyParts>> = [
		{ call: 'confirm' },
		{ workflowId: 'wf-8' },
		{ executionId: '42' },
		{ nodeName: 'Guard 2' },
		{ runIndex: 1 },
		{ itemIndex: 1 },
		{ operationId: 'invoice:INV-43:send' },
	];
	for (const change of changes) {
		test(`differs when ${Object.keys(change)[0]} differs`, () => {
			assert.notEqual(idempotencyKey({ ...base, ...change }), idempotencyKey(base));
		});
	}

	test('is 1 to 200 visible ASCII characters whatever the names hold', () => {
		const key = idempotencyKey({ ...base, nodeName: 'Écrire ✓ "x"', operationId: 'ü/ß:' + 'x'.repeat(300) });
		assert.match(key, /^[\x21-\x7e]{1,200}$/);
		assert.equal(key, idempotencyKey({ ...base, nodeName: 'Écrire ✓ "x"', operationId: 'ü/ß:' + 'x'.repeat(300) }));
		assert.ok(key.startsWith('n8n-dispatch-'));
	});

	test('does not run names together', () => {
		const a = idempotencyKey({ ...base, workflowId: 'a', executionId: 'bc' });
		const b = idempotencyKey({ ...base, workflowId: 'ab', executionId: 'c' });
		assert.notEqual(a, b);
	});
});

describe('input and report helpers', () => {
	test('chosen fields are picked by path, a missing one as null', () => {
		const json = { body: { invoice_id: 'INV-1', amount: 5, note: 'x' }, headers: { ua: 'y' } };
		assert.deepEqual(pickFields(json, ['body.invoice_id', 'body.amount', 'body.nope']), {
			'body.invoice_id': 'INV-1',
			'body.amount': 5,
			'body.nope': null,
		});
	});

	test("the error report keeps ids, names, the last node and the error's name, message and status", () => {
		const report = errorReport({
			execution: {
				id: '11',
				url: 'http://n8n/workflow/wf/executions/11',
				lastNodeExecuted: 'Write',
				mode: 'webhook',
				error: {
					message: '422 - bad',
					name: 'NodeApiError',
					httpCode: '422',
					context: { request: { body: { card: '4111' }, headers: { authorization: 'Bearer s' } } },
					stack: 'Error: at …',
				},
				executionContext: { source: 'webhook' },
			},
			workflow: { id: 'wf', name: 'probe write' },
		});
		assert.deepEqual(JSON.parse(JSON.stringify(report)), {
			execution: {
				id: '11',
				url: 'http://n8n/workflow/wf/executions/11',
				lastNodeExecuted: 'Write',
				error: { name: 'NodeApiError', message: '422 - bad', httpCode: '422' },
			},
			workflow: { id: 'wf', name: 'probe write' },
		});
		const text = JSON.stringify(report);
		for (const secret of ['4111', 'Bearer', 'stack', 'context', 'executionContext']) {
			assert.ok(!text.includes(secret), secret);
		}
	});

	test('times without an offset are read in the workflow time zone', () => {
		assert.equal(instantOf('2026-07-01T12:00:00', 'Europe/Berlin'), '2026-07-01T10:00:00.000Z');
		assert.equal(instantOf('2026-12-01T12:00', 'Europe/Berlin'), '2026-12-01T11:00:00.000Z');
		assert.equal(instantOf('2026-12-01T12:00:00+01:00', 'UTC'), '2026-12-01T12:00:00+01:00');
		assert.equal(instantOf('', 'UTC'), undefined);
		assert.equal(instantOf({ toISO: () => '2026-12-01T12:00:00.000+01:00' }, 'UTC'), '2026-12-01T12:00:00.000+01:00');
		assert.throws(() => instantOf('tomorrow', 'UTC'), /not a date and time/);
	});
});

describe('Operation IDs: segments a missing value left behind', () => {
	for (const id of [
		'invoice:undefined:send',
		'invoice:null:send',
		'invoice:NaN:send',
		'invoice:[object Object]:send',
		'undefined',
		'invoice:INV-42:undefined',
		'invoice: undefined :send',
		'invoice::send',
		':INV-42:send',
		'invoice:INV-42:',
		'invoice: :send',
		'invoice:INV-42\u200b:send',
		'invoice:INV-42\u200d:send',
		'invoice:INV-42\u2060:send',
		'\ufeffinvoice:INV-42:send',
		'invoice:INV\u00ad42:send',
		'invoice:INV-42\ufe0f:send',
		'invoice:INV-42\u{e0041}:send',
	]) {
		test(`${JSON.stringify(id)} is refused`, () => assert.ok(operationIdProblem(id) !== undefined));
	}
	for (const id of ['invoice:INV-42:send', 'a', 'undefinedX:nullable:NaNa', 'invoice:Undefined:send', 'facture:été:日本']) {
		test(`${JSON.stringify(id)} is an operation ID`, () => assert.equal(operationIdProblem(id), undefined));
	}
	test('the problem names the segment', () => {
		assert.equal(
			operationIdProblem('invoice:undefined:send'),
			"operation ID 'invoice:undefined:send' has a segment 'undefined': the expression that builds it read a missing field",
		);
		assert.match(operationIdProblem('invoice::send') ?? '', /has an empty segment/);
		assert.equal(
			operationIdProblem('invoice:INV-42\u200b:send'),
			"operation ID 'invoice:INV-42<?>:send' has an invisible character (U+200B, shown as <?>): the data it is built from holds one",
		);
	});
	test("the fields an expression reads that the item lacks, as the expression names them", () => {
		const expression = "={{ 'invoice:' + $json.body.invoice_id + ':' + $json['kind'] + $json.n.toString() + ':send' }}";
		assert.deepEqual(missingFields(expression, { body: { invoice_id: 'INV-1' }, kind: 'x', n: 1 }), []);
		assert.deepEqual(missingFields(expression, { body: {}, kind: 'x', n: 1 }), ['$json.body.invoice_id']);
		assert.deepEqual(missingFields(expression, { kind: '', n: 1 }), ['$json.body', "$json['kind']"]);
		assert.deepEqual(missingFields(expression, { body: { invoice_id: null }, kind: { a: 1 }, n: Number.NaN }), [
			'$json.body.invoice_id',
			"$json['kind']",
			'$json.n',
		]);
		assert.deepEqual(missingFields('={{ $json.a + $json.a }}', {}), ['$json.a']);
		assert.deepEqual(missingFields('invoice:INV-1:send', {}), []);
		assert.deepEqual(missingFields(undefined, {}), []);
	});
});
