/** Fail: after a failed write, record whether it was rejected or may have happened. */
import type {
	IDataObject,
	INodeExecutionData,
	INodeProperties,
	INodePropertyOptions,
} from 'n8n-workflow';

import { classify, describeFailure, type Outcome } from '../shared/rules';
import { nonEmpty, type Run } from '../shared/run';
import { operationPath } from '../shared/transport';
import { GuardedOperation } from './guarded';

export const FAIL = 'fail';

export const option: INodePropertyOptions = {
	name: 'Fail',
	value: FAIL,
	action: 'Record a failed write',
	description:
		"After a failed write (the write node's error output): rejected, or unknown when it may have happened",
};

/** Its parameters after the Operation ID it shares with Confirm (see ./guarded). */
export const properties: INodeProperties[] = [
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
		displayOptions: { show: { operation: [FAIL] } },
	},
];

/** Its entries in the node's Options collection. */
export const options: INodeProperties[] = [
	{
		displayName: 'Error Text',
		name: 'errorText',
		type: 'string',
		default: '',
		description: "What to record about the failure (default: the error's status and message)",
		displayOptions: { show: { '/operation': [FAIL] } },
	},
];

export async function execute(run: Run): Promise<INodeExecutionData[][]> {
	const guarded = new GuardedOperation(run);
	return await run.each(async (i) => {
		const operationId = guarded.idOf(i);
		const chosen = run.fn.getNodeParameter('outcome', i, 'auto') as string;
		const error = run.items[i].json.error;
		const outcome: Outcome = chosen === 'rejected' || chosen === 'unknown' ? chosen : classify(error);
		const answer = await run.post(i, 'fail', operationPath(operationId, 'fail'), operationId, {
			outcome,
			error: nonEmpty(run.options(i).errorText) ?? describeFailure(error),
			execution_id: run.executionId,
		});
		return run.passOn(i, { ...(answer as IDataObject), outcome });
	});
}
