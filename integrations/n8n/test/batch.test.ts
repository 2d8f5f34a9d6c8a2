import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { INodeExecutionData } from 'n8n-workflow';

import { heldMessage, releasedNote } from '../nodes/Flowledger/shared/batch';
import { Flowledger } from '../nodes/Flowledger/Flowledger.node';
import { FakeLedger, context, decide, item, type Params, type Sent } from './fake';

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
	onHold: 'stop',
	options: { tries: 1 },
};

/** M1, A0 (its input changed since it was written: held), M2. */
const batch = [0, 1, 2].map((i) => item({ n: i }));
const midHeld = { 'invoice:INV-1:send': 'hold' };

function calls(ledger: FakeLedger): string[] {
	return ledger.sent.map((s) => {
		const [op, call] = decodeURIComponent(s.url.split('/v1/operations/')[1]).split('/');
		return `${call} ${op}`;
	});
}

function stopped(check: (error: Error & { description?: string }) => void) {
	return (error: Error & { description?: string }) => {
		check(error);
		return true;
	};
}

describe('Guard: a batch with a held item, On Hold set to stop', () => {
	test('routes every item, then releases each one let through before it stops', async () => {
		const ledger = new FakeLedger(decide(midHeld));
		await assert.rejects(
			run(guard, batch, ledger),
			stopped((error) => {
				assert.equal(error.message, 'flowledger holds invoice:INV-1:send: input_mismatch');
				assert.match(
					String(error.description),
					/let 2 other items through; none was passed on, so each was released: prepared again, with no hold \(invoice:INV-0:send, invoice:INV-2:send\)/,
				);
			}),
		);
		assert.deepEqual(calls(ledger), [
			'dispatch invoice:INV-0:send',
			'dispatch invoice:INV-1:send',
			'dispatch invoice:INV-2:send',
			'release invoice:INV-0:send',
			'release invoice:INV-2:send',
		]);
	});

	test('a release names the execution, run and the dispatch key it gives back, and has no key of its own', async () => {
		const ledger = new FakeLedger(decide(midHeld));
		await assert.rejects(run(guard, batch, ledger, { executionId: '77', runIndex: 1 }));
		const dispatch = ledger.sent[0];
		const release = ledger.sent.find((s: Sent) => s.url.endsWith('/release')) as Sent;
		assert.deepEqual(release.json, {
			execution_id: '77',
			run_index: 1,
			reason:
				'the Guard stopped before passing this item on: flowledger holds invoice:INV-1:send: input_mismatch',
			dispatch_key: dispatch.headers['Idempotency-Key'],
		});
		assert.equal(release.headers['Idempotency-Key'], undefined);
	});

	test('several held items are each named', async () => {
		const ledger = new FakeLedger(decide({ 'invoice:INV-0:send': 'hold', 'invoice:INV-2:send': 'hold' }));
		await assert.rejects(
			run(guard, batch, ledger),
			/^NodeOperationError: flowledger holds 2 items: invoice:INV-0:send \(input_mismatch\), invoice:INV-2:send \(input_mismatch\)$/,
		);
		assert.deepEqual(calls(ledger).filter((c) => c.startsWith('release')), ['release invoice:INV-1:send']);
	});

	test('a skipped item needs no release', async () => {
		const ledger = new FakeLedger(decide({ 'invoice:INV-0:send': 'skip', 'invoice:INV-1:send': 'hold' }));
		await assert.rejects(run(guard, batch, ledger));
		assert.deepEqual(calls(ledger).filter((c) => c.startsWith('release')), ['release invoice:INV-2:send']);
	});

	test('a ledger that cannot be reached for the release is said, and not asked again', async () => {
		const ledger = new FakeLedger((request) => {
			if (request.url.endsWith('/release')) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
			return decide(midHeld)(request);
		});
		await assert.rejects(
			run(guard, batch, ledger),
			stopped((error) => {
				assert.match(
					String(error.description),
					/2 operations could not be released \(cannot reach the ledger at http:\/\/ledger.test:8787: ECONNREFUSED \(after 1 tries\)\): they stay dispatching, and the error workflow or the sweep holds them for a person \(invoice:INV-0:send, invoice:INV-2:send\)/,
				);
			}),
		);
		assert.equal(calls(ledger).filter((c) => c.startsWith('release')).length, 1);
	});
});

describe('Guard: a batch with a held item, On Hold set to continue', () => {
	test('passes on each item let through, holds the held one, and releases nothing', async () => {
		const ledger = new FakeLedger(decide(midHeld));
		const [go, skip, hold] = await run({ ...guard, onHold: 'output' }, batch, ledger);
		assert.deepEqual(go.map((o) => o.json.n), [0, 2]);
		assert.deepEqual([skip.length, hold.map((o) => o.json.n)], [0, [1]]);
		assert.equal(calls(ledger).filter((c) => c.startsWith('release')).length, 0);
	});

	test('continuing on fail never stops: a held item goes to Hold with the error', async () => {
		const ledger = new FakeLedger(decide(midHeld));
		const [go, , hold] = await run(guard, batch, ledger, { continueOnFail: true });
		assert.deepEqual(go.map((o) => o.json.n), [0, 2]);
		assert.deepEqual(hold[0].json.error, { message: 'flowledger holds invoice:INV-1:send: input_mismatch' });
		assert.equal(calls(ledger).filter((c) => c.startsWith('release')).length, 0);
	});
});

describe('Guard: an error in the middle of a batch', () => {
	test('stops routing at once and releases what was let through before it', async () => {
		const ledger = new FakeLedger((request, n) =>
			n === 2
				? { status: 422, body: { error: { code: 'too_long', message: 'too long', field: 'step' } } }
				: decide({})(request),
		);
		await assert.rejects(
			run(guard, batch, ledger),
			stopped((error) => {
				assert.match(error.message, /422 too_long\): too long \(field step\)/);
				assert.match(String(error.description), /let 1 other item through; none was passed on, so it was released/);
			}),
		);
		assert.deepEqual(calls(ledger), [
			'dispatch invoice:INV-0:send',
			'dispatch invoice:INV-1:send',
			'release invoice:INV-0:send',
		]);
	});

	test('an id built from a missing field stops it the same way, its own words first', async () => {
		const ledger = new FakeLedger(decide({}));
		const ids = { ...guard, operationId: (i: number) => (i === 1 ? 'invoice:undefined:send' : `invoice:INV-${i}:send`) };
		await assert.rejects(
			run(ids, batch, ledger),
			stopped((error) => {
				assert.match(error.message, /has a segment 'undefined'/);
				assert.match(String(error.description), /^Nothing was sent to the ledger for this item.*released: prepared again, with no hold \(invoice:INV-0:send\)/);
			}),
		);
		assert.deepEqual(calls(ledger), ['dispatch invoice:INV-0:send', 'release invoice:INV-0:send']);
	});
});

describe('Guard: one operation twice in a batch', () => {
	test('is dispatched once; the later item takes Skip, so it is written once', async () => {
		const ledger = new FakeLedger(decide({}));
		const twice = { ...guard, operationId: (i: number) => `invoice:INV-${i % 2}:send` };
		const [go, skip, hold] = await run(twice, [0, 1, 2].map((i) => item({ n: i })), ledger);
		assert.deepEqual(go.map((o) => o.json.n), [0, 1]);
		assert.deepEqual(skip.map((o) => o.json.n), [2]);
		const answer = skip[0].json.flowledger as Record<string, unknown>;
		assert.deepEqual([answer.decision, answer.reason], ['skip', 'duplicate_in_batch']);
		assert.equal(hold.length, 0);
		assert.deepEqual(calls(ledger), ['dispatch invoice:INV-0:send', 'dispatch invoice:INV-1:send']);
	});

	test('a held one is named once, and a stop releases the others once', async () => {
		const ledger = new FakeLedger(decide({ 'invoice:INV-1:send': 'hold' }));
		const ids = (i: number) => `invoice:INV-${[0, 1, 1, 0][i]}:send`;
		await assert.rejects(
			run({ ...guard, operationId: ids }, [0, 1, 2, 3].map((i) => item({ n: i })), ledger),
			/^NodeOperationError: flowledger holds invoice:INV-1:send: input_mismatch$/,
		);
		assert.deepEqual(calls(ledger), [
			'dispatch invoice:INV-0:send',
			'dispatch invoice:INV-1:send',
			'release invoice:INV-0:send',
		]);
	});
});

describe('the words', () => {
	test('one held item keeps the words an alert may match', () => {
		assert.equal(heldMessage([{ index: 0, operationId: 'a:1', reason: 'in_flight' }]), 'flowledger holds a:1: in_flight');
	});

	test('many are cut after five', () => {
		const held = Array.from({ length: 7 }, (_, i) => ({ index: i, operationId: `a:${i}`, reason: 'x' }));
		assert.match(heldMessage(held), /^flowledger holds 7 items: a:0 \(x\), .*a:4 \(x\), and 2 more$/);
	});

	test('nothing released, nothing said', () => {
		assert.equal(releasedNote([]), '');
	});
});
