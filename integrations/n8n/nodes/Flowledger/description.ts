/** What the Flowledger node shows in n8n's editor: its operations and their fields. */
import type { INodeProperties } from 'n8n-workflow';

export const GUARD = 'guard';
export const CONFIRM = 'confirm';
export const FAIL = 'fail';
export const REPORT = 'reportFailedExecution';

/**
 * The node's outputs for its parameters, as n8n evaluates them: Go, Skip and Hold for Guard
 * (the default when ``operation`` is not set), one output otherwise. Stringified into an
 * expression, so it may use nothing from outside itself.
 */
export const outputsFor = (parameters: {
	operation?: string;
}): Array<{ type: string; displayName?: string }> =>
	['confirm', 'fail', 'reportFailedExecution'].includes(parameters.operation ?? 'guard')
		? [{ type: 'main' }]
		: [
				{ type: 'main', displayName: 'Go' },
				{ type: 'main', displayName: 'Skip' },
				{ type: 'main', displayName: 'Hold' },
			];

const forOps = (...operation: string[]) => ({ displayOptions: { show: { operation } } });

export const properties: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		default: GUARD,
		options: [
			{
				name: 'Guard',
				value: GUARD,
				action: 'Ask the ledger whether to write',
				description:
					'Before the write: Go (write now), Skip (already written: the receipt is attached) or Hold (a person decides)',
			},
			{
				name: 'Confirm',
				value: CONFIRM,
				action: 'Record the target receipt',
				description: "After a successful write: record the target's reference for it",
			},
			{
				name: 'Fail',
				value: FAIL,
				action: 'Record a failed write',
				description:
					"After a failed write (the write node's error output): rejected, or unknown when it may have happened",
			},
			{
				name: 'Report Failed Execution',
				value: REPORT,
				action: 'Report a failed execution',
				description:
					'In an error workflow after the Error Trigger: hold what the failed execution left unconfirmed',
			},
		],
	},
	{
		displayName: 'Operation ID',
		name: 'operationId',
		type: 'string',
		default: '',
		required: true,
		placeholder: "e.g. {{ 'invoice:' + $json.body.invoice_id + ':send' }}",
		description:
			"A stable name for this one business effect, the same every time the same effect is meant (up to 200 characters). A part between its ':' that is empty, undefined, null, NaN or [object Object] is an error naming the missing field, never a dispatch.",
		...forOps(GUARD),
	},
	{
		displayName: 'Operation ID',
		name: 'operationId',
		type: 'string',
		default: '',
		placeholder: 'empty: the one the Guard before this node dispatched',
		description:
			"Empty: the operation the item's Flowledger Guard dispatched (from the item itself, or from the nearest Guard before this node), read without evaluating an expression. Name it only when several writes share one item.",
		...forOps(CONFIRM, FAIL),
	},
	{
		displayName: 'Processing Version',
		name: 'processingVersion',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'e.g. invoice-sender@1',
		description:
			'The version of the logic doing the write; raise it when the write changes. An operation recorded with another version is held.',
		...forOps(GUARD),
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
		...forOps(GUARD),
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
		...forOps(GUARD),
	},
	{
		displayName: 'Receipt',
		name: 'receiptSource',
		type: 'options',
		default: 'field',
		description:
			"The target's reference for the write (its record ID, message ID…). Empty, undefined, null, [object Object] or NaN is an error, never a confirmation.",
		options: [
			{
				name: "A Field of the Write's Answer",
				value: 'field',
				description: 'Read from the item as it is, without evaluating an expression',
			},
			{ name: 'A Value', value: 'value', description: 'An expression' },
		],
		...forOps(CONFIRM),
	},
	{
		displayName: 'Receipt Field',
		name: 'receiptField',
		type: 'string',
		default: 'id',
		required: true,
		placeholder: 'e.g. data.message_id',
		description: "The field path of the target's reference in the item",
		displayOptions: { show: { operation: [CONFIRM], receiptSource: ['field'] } },
	},
	{
		displayName: 'Receipt Value',
		name: 'receipt',
		type: 'string',
		default: '={{ $json.id }}',
		required: true,
		description: "The target's reference for the write, as an expression",
		displayOptions: { show: { operation: [CONFIRM], receiptSource: ['value'] } },
	},
	{
		displayName: 'Outcome',
		name: 'outcome',
		type: 'options',
		default: 'auto',
		options: [
			{
				name: 'Auto (From the Error Output)',
				value: 'auto',
				description:
					'Rejected when the target answered 4xx (except 408, 429); unknown for timeouts, connection errors, 408, 429 and 5xx',
			},
			{ name: 'Rejected', value: 'rejected', description: 'Nothing was written' },
			{
				name: 'Unknown',
				value: 'unknown',
				description: 'It may have been written: the ledger holds the operation for a person',
			},
		],
		...forOps(FAIL),
	},
	{
		displayName: 'Options',
		name: 'options',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		options: [
			{
				displayName: 'Approval Expires At',
				name: 'approvalExpiresAt',
				type: 'dateTime',
				default: '',
				description: 'When the approval stops counting (with an offset, e.g. 2026-12-01T18:00:00+01:00)',
				displayOptions: { show: { '/operation': [GUARD] } },
			},
			{
				displayName: 'Approval Version',
				name: 'approvalVersion',
				type: 'string',
				default: '',
				description: 'The processing version a person approved; another version is held',
				displayOptions: { show: { '/operation': [GUARD] } },
			},
			{
				displayName: 'Deadline',
				name: 'deadline',
				type: 'dateTime',
				default: '',
				description:
					'When a write still unconfirmed is held as unknown (default: the ledger’s dispatch deadline)',
				displayOptions: { show: { '/operation': [GUARD] } },
			},
			{
				displayName: 'Detail',
				name: 'detail',
				type: 'string',
				default: '',
				description: 'A note kept with the receipt',
				displayOptions: { show: { '/operation': [CONFIRM] } },
			},
			{
				displayName: 'Error Text',
				name: 'errorText',
				type: 'string',
				default: '',
				description: "What to record about the failure (default: the error's status and message)",
				displayOptions: { show: { '/operation': [FAIL] } },
			},
			{
				displayName: 'Input Reference',
				name: 'inputRef',
				type: 'string',
				default: '',
				description: 'Where the input can be found again (a URL, a file name)',
				displayOptions: { show: { '/operation': [GUARD] } },
			},
			{
				displayName: 'Step',
				name: 'step',
				type: 'string',
				default: '',
				description: 'A name for this write within the workflow (default: this node’s name)',
				displayOptions: { show: { '/operation': [GUARD] } },
			},
			{
				displayName: 'Timeout (Ms)',
				name: 'timeout',
				type: 'number',
				typeOptions: { minValue: 100 },
				default: 10000,
				description: 'How long to wait for the ledger, per try',
			},
			{
				displayName: 'Tries',
				name: 'tries',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 10 },
				default: 4,
				description:
					'Tries in all when the ledger cannot be reached or answers 5xx, waiting 0.5 s, 1 s, 2 s… between them (safe: each carries the same Idempotency-Key)',
			},
		],
	},
];
