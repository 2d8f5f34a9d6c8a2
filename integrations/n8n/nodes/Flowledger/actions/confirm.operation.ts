/** Confirm: after a successful write, record the target's receipt for it. */
import {
	NodeOperationError,
	type IDataObject,
	type INodeExecutionData,
	type INodeProperties,
	type INodePropertyOptions,
} from 'n8n-workflow';

import { fieldAt, receiptOf } from '../shared/rules';
import { nonEmpty, type Run } from '../shared/run';
import { operationPath } from '../shared/transport';
import { GuardedOperation } from './guarded';

export const CONFIRM = 'confirm';

const shown = { operation: [CONFIRM] };

export const option: INodePropertyOptions = {
	name: 'Confirm',
	value: CONFIRM,
	action: 'Record the target receipt',
	description: "After a successful write: record the target's reference for it",
};

/** Its parameters after the Operation ID it shares with Fail (see ./guarded). */
export const properties: INodeProperties[] = [
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
		displayOptions: { show: shown },
	},
	{
		displayName: 'Receipt Field',
		name: 'receiptField',
		type: 'string',
		default: 'id',
		required: true,
		placeholder: 'e.g. data.message_id',
		description: "The field path of the target's reference in the item",
		displayOptions: { show: { ...shown, receiptSource: ['field'] } },
	},
	{
		displayName: 'Receipt Value',
		name: 'receipt',
		type: 'string',
		default: '={{ $json.id }}',
		required: true,
		description: "The target's reference for the write, as an expression",
		displayOptions: { show: { ...shown, receiptSource: ['value'] } },
	},
];

/** Its entries in the node's Options collection. */
export const options: INodeProperties[] = [
	{
		displayName: 'Detail',
		name: 'detail',
		type: 'string',
		default: '',
		description: 'A note kept with the receipt',
		displayOptions: { show: { '/operation': [CONFIRM] } },
	},
];

export async function execute(run: Run): Promise<INodeExecutionData[][]> {
	const guarded = new GuardedOperation(run);
	return await run.each(async (i) => {
		const operationId = guarded.idOf(i);
		const source = run.fn.getNodeParameter('receiptSource', i, 'field') as string;
		const given =
			source === 'value'
				? (run.fn.getNodeParameter('receipt', i, undefined) as unknown)
				: fieldAt(run.items[i].json, String(run.fn.getNodeParameter('receiptField', i, 'id')).trim());
		const found = receiptOf(given);
		if ('problem' in found) {
			throw new NodeOperationError(run.fn.getNode(), `not confirmed: ${found.problem}`, {
				itemIndex: i,
				description:
					'The write may have happened. Without a receipt the operation stays dispatching and the ledger holds it when its deadline passes.',
			});
		}
		const answer = await run.post(i, 'confirm', operationPath(operationId, 'confirm'), operationId, {
			receipt: found.receipt,
			execution_id: run.executionId,
			detail: nonEmpty(run.options(i).detail),
		});
		if (answer.reason === 'receipt_conflict') {
			throw new NodeOperationError(
				run.fn.getNode(),
				`flowledger holds ${operationId}: receipt_conflict (it was confirmed with another receipt: a possible duplicate write)`,
				{ itemIndex: i },
			);
		}
		return run.passOn(i, answer as IDataObject);
	});
}
