/** Guard: before the write, ask the ledger whether to make it, and route each item to Go,
 * Skip or Hold. */
import {
	NodeOperationError,
	type IDataObject,
	type INodeExecutionData,
	type INodeProperties,
	type INodePropertyOptions,
} from 'n8n-workflow';

import { heldMessage, releaseReason, releasedNote, type Held, type Released } from '../shared/batch';
import { fieldList, instantOf, pickFields } from '../shared/rules';
import { ANSWER_KEY, nonEmpty, type Body, type Run } from '../shared/run';
import { LedgerError, callLedger, operationPath } from '../shared/transport';

export const GUARD = 'guard';

const shown = { show: { operation: [GUARD] } };

export const option: INodePropertyOptions = {
	name: 'Guard',
	value: GUARD,
	action: 'Ask the ledger whether to write',
	description:
		'Before the write: Go (write now), Skip (already written: the receipt is attached) or Hold (a person decides)',
};

/** Its Operation ID, listed before the parameters of every operation (see ./description). */
export const operationIdProperty: INodeProperties = {
	displayName: 'Operation ID',
	name: 'operationId',
	type: 'string',
	default: '',
	required: true,
	placeholder: "e.g. {{ 'invoice:' + $json.body.invoice_id + ':send' }}",
	description:
		"A stable name for this one business effect, the same every time the same effect is meant (up to 200 characters). A part between its ':' that is empty, undefined, null, NaN or [object Object] is an error naming the missing field, never a dispatch.",
	displayOptions: shown,
};

export const properties: INodeProperties[] = [
	{
		displayName: 'Processing Version',
		name: 'processingVersion',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. invoice-sender@1',
		description:
			'The version of the logic doing the write; raise it when the write changes. An operation recorded with another version is held.',
		displayOptions: shown,
	},
	{
		displayName: 'Input',
		name: 'inputSource',
		type: 'options',
		default: 'item',
		description:
			'What the operation is done with: the ledger keeps only its hash, and holds a later dispatch whose input differs',
		options: [
			{ name: "The Item's JSON", value: 'item', description: 'All of the incoming item' },
			{ name: 'Chosen Fields', value: 'fields', description: 'Only the fields named below' },
			{
				name: 'A Value',
				value: 'value',
				description: 'An expression, e.g. {{ $JSON.body }} after a Webhook trigger',
			},
		],
		displayOptions: shown,
	},
	{
		displayName: 'Fields',
		name: 'inputFields',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. body.invoice_id, body.amount',
		description: 'Comma-separated field paths of the item; a missing one counts as null',
		displayOptions: { show: { operation: [GUARD], inputSource: ['fields'] } },
	},
	{
		displayName: 'Value',
		name: 'inputValue',
		type: 'json',
		default: '={{ $json.body }}',
		required: true,
		description: 'The input as JSON (an expression that evaluates to any JSON value)',
		displayOptions: { show: { operation: [GUARD], inputSource: ['value'] } },
	},
	{
		displayName: 'On Hold',
		name: 'onHold',
		type: 'options',
		default: 'stop',
		description:
			'A hold means a person must act. Stopping makes it show in the execution list and runs the error workflow.',
		options: [
			{
				name: 'Stop the Execution With an Error',
				value: 'stop',
				description: 'The error names the operation and the reason',
			},
			{
				name: 'Continue on the Hold Output',
				value: 'output',
				description: 'Route the item to the Hold output and carry on',
			},
		],
		displayOptions: shown,
	},
];

const inOptions = { show: { '/operation': [GUARD] } };

/** Its entries in the node's Options collection. */
export const options: INodeProperties[] = [
	{
		displayName: 'Approval Expires At',
		name: 'approvalExpiresAt',
		type: 'dateTime',
		default: '',
		description: 'When the approval stops counting (with an offset, e.g. 2026-12-01T18:00:00+01:00)',
		displayOptions: inOptions,
	},
	{
		displayName: 'Approval Version',
		name: 'approvalVersion',
		type: 'string',
		default: '',
		description: 'The processing version a person approved; another version is held',
		displayOptions: inOptions,
	},
	{
		displayName: 'Deadline',
		name: 'deadline',
		type: 'dateTime',
		default: '',
		description:
			'When a write still unconfirmed is held as unknown (default: the ledger’s dispatch deadline)',
		displayOptions: inOptions,
	},
	{
		displayName: 'Input Reference',
		name: 'inputRef',
		type: 'string',
		default: '',
		description: 'Where the input can be found again (a URL, a file name)',
		displayOptions: inOptions,
	},
	{
		displayName: 'Step',
		name: 'step',
		type: 'string',
		default: '',
		description: 'A name for this write within the workflow (default: this node’s name)',
		displayOptions: inOptions,
	},
];

type Dispatched = Array<{ index: number; operationId: string }>;

/**
 * Dispatch every item and route it to Go, Skip or Hold. The node passes items on only by
 * returning, so when it must stop (a hold with On Hold set to stop, or an error while
 * not continuing on fail) none is passed on: each operation the ledger answered ``go`` for
 * in this batch is released (prepared again, no hold) before the error is thrown. Every
 * item is routed first on a hold, so the error names each held one; an error stops the
 * routing at once.
 */
export async function execute(run: Run): Promise<INodeExecutionData[][]> {
	const go: INodeExecutionData[] = [];
	const skip: INodeExecutionData[] = [];
	const hold: INodeExecutionData[] = [];
	const dispatched: Dispatched = [];
	const held: Held[] = [];
	const answered = new Map<string, Body>();
	for (let i = 0; i < run.items.length; i++) {
		let answer: Body;
		let operationId: string;
		let again = false;
		try {
			operationId = run.operationId(i);
			const earlier = answered.get(operationId);
			again = earlier !== undefined;
			if (earlier !== undefined) {
				answer = sameAgain(earlier);
			} else {
				const path = operationPath(operationId, 'dispatch');
				answer = await run.post(i, 'dispatch', path, operationId, dispatchBody(run, i));
				answered.set(operationId, answer);
			}
		} catch (error) {
			if (!run.fn.continueOnFail()) {
				const stop = run.nodeError(error, i);
				await releaseAll(run, dispatched, stop, stop.message);
				throw stop;
			}
			hold.push(run.failed(i, error)); // never Go without the ledger's word
			continue;
		}
		const decision = answer.decision;
		if (decision === 'go') {
			go.push(run.passOn(i, answer as IDataObject));
			dispatched.push({ index: i, operationId });
		} else if (decision === 'skip') {
			skip.push(run.passOn(i, answer as IDataObject));
		} else if (run.fn.getNodeParameter('onHold', i, 'stop') === 'output') {
			hold.push(run.passOn(i, answer as IDataObject));
		} else {
			const reason = typeof answer.reason === 'string' ? answer.reason : String(decision);
			if (run.fn.continueOnFail()) {
				// Continuing on fail never stops: the held item goes to Hold with the error.
				const passed = run.passOn(i, answer as IDataObject);
				const message = heldMessage([{ index: i, operationId, reason }]);
				hold.push({ ...passed, json: { ...passed.json, error: { message } } });
			} else if (!again) {
				held.push({ index: i, operationId, reason });
			}
		}
	}
	if (held.length === 0) return [go, skip, hold];
	const message = heldMessage(held);
	const stop = new NodeOperationError(run.fn.getNode(), message, {
		itemIndex: held[0].index,
		description:
			'Nothing was written. A person decides in the ledger (flowledger show, the TUI), or choose "Continue on the Hold Output".',
	});
	await releaseAll(run, dispatched, stop, message);
	throw stop;
}

/**
 * The answer for an item whose operation an earlier item of the same batch was answered for.
 * The ledger cannot tell the two apart (the same execution and run dispatching again is a
 * replay, answered ``go`` again), so the node does: the operation is written once, by the
 * earlier item, and a later one takes the Skip output (``duplicate_in_batch``); a skip or a
 * hold is the same again.
 */
function sameAgain(earlier: Body): Body {
	if (earlier.decision !== 'go') return earlier;
	return { ...earlier, decision: 'skip', reason: 'duplicate_in_batch' };
}

/** Give back each operation the ledger let through for this batch: none was passed on.
 * Said in ``stop``'s description; a ledger that cannot be reached is not asked again. */
async function releaseAll(
	run: Run,
	dispatched: Dispatched,
	stop: NodeOperationError,
	why: string,
): Promise<void> {
	const released: Released[] = [];
	let unreachable: string | undefined;
	for (const { index, operationId } of dispatched) {
		if (unreachable !== undefined) {
			released.push({ operationId, problem: unreachable });
			continue;
		}
		try {
			await callLedger(
				run.send,
				run.wait,
				run.connection,
				{
					method: 'POST',
					path: operationPath(operationId, 'release'),
					body: {
						execution_id: run.executionId,
						run_index: run.runIndex,
						reason: releaseReason(why),
						dispatch_key: run.keyFor('dispatch', index, operationId),
					},
				},
				run.policy(index),
			);
			released.push({ operationId });
		} catch (error) {
			const problem = error instanceof Error ? error.message : String(error);
			const down = error instanceof LedgerError && (error.status ?? 500) >= 500;
			if (down) unreachable = problem; // not asked again for the others
			released.push({ operationId, problem });
		}
	}
	const note = releasedNote(released);
	if (note !== '') stop.description = [stop.description, note].filter(Boolean).join(' ');
}

function dispatchBody(run: Run, i: number): Body {
	const options = run.options(i);
	const version = String(run.fn.getNodeParameter('processingVersion', i, '') ?? '').trim();
	if (version === '') {
		throw new NodeOperationError(run.fn.getNode(), 'the processing version is empty', {
			itemIndex: i,
		});
	}
	const body: Body = {
		processing_version: version,
		execution_id: run.executionId,
		workflow_id: run.workflowId || undefined,
		run_index: run.runIndex,
		step: nonEmpty(options.step) ?? run.nodeName.slice(0, 200),
		input: input(run, i),
		source: run.source || undefined,
		deadline: instant(run, options.deadline, i),
		input_ref: nonEmpty(options.inputRef),
	};
	const approvalVersion = nonEmpty(options.approvalVersion);
	if (approvalVersion !== undefined) {
		body.approval = {
			version: approvalVersion,
			expires_at: instant(run, options.approvalExpiresAt, i),
		};
	}
	return body;
}

function instant(run: Run, value: unknown, i: number): string | undefined {
	try {
		return instantOf(value, run.fn.getTimezone());
	} catch (error) {
		throw new NodeOperationError(run.fn.getNode(), (error as Error).message, { itemIndex: i });
	}
}

/** What the operation is done with, as the Input parameter chooses. */
function input(run: Run, i: number): unknown {
	const mode = run.fn.getNodeParameter('inputSource', i, 'item') as string;
	const json = { ...run.items[i].json };
	delete json[ANSWER_KEY]; // an earlier Flowledger node's answer is not part of the input
	if (mode === 'fields') {
		const fields = fieldList(String(run.fn.getNodeParameter('inputFields', i, '')));
		if (fields.length === 0) {
			throw new NodeOperationError(run.fn.getNode(), 'no input fields named', {
				itemIndex: i,
			});
		}
		return pickFields(json, fields);
	}
	if (mode === 'value') {
		const value = run.fn.getNodeParameter('inputValue', i, null) as unknown;
		if (typeof value === 'string') {
			try {
				return JSON.parse(value) as unknown;
			} catch {
				return value; // a plain string is an input too
			}
		}
		return value === undefined ? null : value;
	}
	return json;
}
