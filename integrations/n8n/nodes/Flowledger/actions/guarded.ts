/** What Confirm and Fail share: the operation they are about, named or the Guard's. */
import { NodeOperationError, type INodeProperties } from 'n8n-workflow';

import { isObject } from '../shared/rules';
import { ANSWER_KEY, type Run } from '../shared/run';
import { GUARD } from './guard.operation';

/** Their Operation ID parameter, shown for each of ``operation``. */
export function guardedOperationIdProperty(...operation: string[]): INodeProperties {
	return {
		displayName: 'Operation ID',
		name: 'operationId',
		type: 'string',
		default: '',
		placeholder: 'empty: the one the Guard before this node dispatched',
		description:
			"Empty: the operation the item's Flowledger Guard dispatched (from the item itself, or from the nearest Guard before this node), read without evaluating an expression. Name it only when several writes share one item.",
		displayOptions: { show: { operation } },
	};
}

/**
 * The operation a Confirm or Fail is about: the one named, else the one the item's Guard
 * dispatched — from the Guard's answer the item still carries (the write's error output
 * passes its input on), else from the paired item of the Guard found walking back from this
 * node. Read in the node, not by an expression: n8n evaluates each expression in an isolate.
 * One for a run: the Guard before the node is looked for once.
 */
export class GuardedOperation {
	private guardName: string | null | undefined;

	constructor(private readonly run: Run) {}

	idOf(i: number): string {
		const run = this.run;
		const named = run.fn.getNodeParameter('operationId', i, '') as unknown;
		if (named !== '' && named !== undefined && named !== null) return run.operationId(i);
		const carried = operationIdIn(run.items[i].json);
		if (carried !== undefined) return run.checked(carried, i);
		const guard = this.upstreamGuard();
		if (guard !== undefined) {
			let found: string | undefined;
			try {
				const proxy = run.fn.getWorkflowDataProxy(i) as unknown as {
					$: (name: string) => { item?: { json?: unknown } };
				};
				found = operationIdIn(proxy.$(guard).item?.json);
			} catch {
				found = undefined; // no paired item leads back to that Guard
			}
			if (found !== undefined) return run.checked(found, i);
		}
		throw new NodeOperationError(
			run.fn.getNode(),
			guard === undefined
				? 'no operation ID: name it, or place this node after a Flowledger Guard'
				: `no operation ID: the item does not lead back to an answer of ${guard}; name the operation ID`,
			{ itemIndex: i },
		);
	}

	/** The first enabled Flowledger Guard found walking back from this node, or undefined. */
	private upstreamGuard(): string | undefined {
		if (this.guardName === undefined) {
			const type = this.run.fn.getNode().type;
			const guard = this.run.fn
				.getParentNodes(this.run.nodeName, { includeNodeParameters: true })
				.find(
					(parent) =>
						parent.type === type &&
						!parent.disabled &&
						(parent.parameters?.operation ?? GUARD) === GUARD,
				);
			this.guardName = guard?.name ?? null;
		}
		return this.guardName ?? undefined;
	}
}

/** The operation id of a Guard's answer an item carries under ``flowledger``, if any. */
function operationIdIn(json: unknown): string | undefined {
	const answer = isObject(json) ? json[ANSWER_KEY] : undefined;
	const id = isObject(answer) ? answer.operation_id : undefined;
	return typeof id === 'string' && id !== '' ? id : undefined;
}
