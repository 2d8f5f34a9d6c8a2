/** What the Flowledger node shows in n8n's editor: its operations and their fields, each
 * operation's own from its file. */
import type { INodeExecutionData, INodeProperties, INodePropertyOptions } from 'n8n-workflow';

import type { Run } from '../shared/run';
import * as confirm from './confirm.operation';
import * as fail from './fail.operation';
import * as guard from './guard.operation';
import { GUARD } from './guard.operation';
import { guardedOperationIdProperty } from './guarded';
import * as reportFailedExecution from './reportFailedExecution.operation';

/** One operation of the node: its entry in the Operation list, its parameters (each shown
 * for it alone), its entries in the Options collection, and what it does with a run. */
export interface Operation {
	option: INodePropertyOptions;
	properties: INodeProperties[];
	options: INodeProperties[];
	execute(run: Run): Promise<INodeExecutionData[][]>;
}

/** In the order the editor lists them. */
export const operations: Operation[] = [guard, confirm, fail, reportFailedExecution];

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

/** The Options entries every operation has: how the node calls the ledger. */
const callOptions: INodeProperties[] = [
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
];

export const properties: INodeProperties[] = [
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		default: GUARD,
		options: operations.map((operation) => operation.option),
	},
	// The Operation IDs first, as the node has always listed its parameters.
	guard.operationIdProperty,
	guardedOperationIdProperty(confirm.CONFIRM, fail.FAIL),
	...guard.properties,
	...confirm.properties,
	...fail.properties,
	...reportFailedExecution.properties,
	{
		displayName: 'Options',
		name: 'options',
		type: 'collection',
		placeholder: 'Add option',
		default: {},
		// In the editor's order: by name, whichever operation shows them.
		options: [...operations.flatMap((operation) => operation.options), ...callOptions].sort(
			(a, b) => a.displayName.localeCompare(b.displayName),
		),
	},
];
