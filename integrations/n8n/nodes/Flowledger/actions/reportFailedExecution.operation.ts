/** Report Failed Execution: in an error workflow, after the Error Trigger, tell the ledger
 * which execution failed, so that it holds what that execution left unconfirmed. */
import type {
	IDataObject,
	INodeExecutionData,
	INodeProperties,
	INodePropertyOptions,
} from 'n8n-workflow';

import { errorReport, isObject } from '../shared/rules';
import type { Run } from '../shared/run';

export const REPORT = 'reportFailedExecution';

export const option: INodePropertyOptions = {
	name: 'Report Failed Execution',
	value: REPORT,
	action: 'Report a failed execution',
	description:
		'In an error workflow after the Error Trigger: hold what the failed execution left unconfirmed',
};

/** It has no parameters of its own: it reads the Error Trigger's item. */
export const properties: INodeProperties[] = [];

export const options: INodeProperties[] = [];

export async function execute(run: Run): Promise<INodeExecutionData[][]> {
	return await run.each(async (i) => {
		const report = errorReport(run.items[i].json);
		const execution = isObject(report.execution) ? report.execution : {};
		const failedId = typeof execution.id === 'string' ? execution.id : '';
		const answer = await run.post(i, 'hook', '/v1/hooks/n8n/error', failedId, report);
		return run.passOn(i, answer as IDataObject);
	});
}
