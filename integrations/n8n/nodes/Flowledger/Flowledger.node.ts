import {
	NodeConnectionTypes,
	NodeOperationError,
	type IExecuteFunctions,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { operations, outputsFor, properties } from './actions/description';
import { GUARD } from './actions/guard.operation';
import { flowledgerApiTest } from './shared/connection';
import { openRun } from './shared/run';

/** The node: its description, and each execution routed to its operation (./actions). */
export class Flowledger implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Flowledger',
		name: 'flowledger',
		icon: { light: 'file:flowledger.svg', dark: 'file:flowledger.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ $parameter["operation"] }}',
		description:
			'Guard a write with the flowledger audit ledger: Go, Skip or Hold before it, Confirm or Fail after it',
		defaults: { name: 'Flowledger' },
		inputs: [NodeConnectionTypes.Main],
		outputs: `={{(${outputsFor})($parameter)}}`,
		credentials: [{ name: 'flowledgerApi', required: true, testedBy: 'flowledgerApiTest' }],
		properties,
	};

	methods = { credentialTest: { flowledgerApiTest } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const name = this.getNodeParameter('operation', 0, GUARD) as string;
		const run = await openRun(this);
		const operation = operations.find((candidate) => candidate.option.value === name);
		if (operation === undefined) {
			throw new NodeOperationError(this.getNode(), `unknown operation ${name}`);
		}
		return await operation.execute(run);
	}
}
