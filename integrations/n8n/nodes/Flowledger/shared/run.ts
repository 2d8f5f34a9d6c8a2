/** One execution of the node as every operation sees it: its items, its calls to the ledger
 * and what each item becomes. */
import {
	NodeOperationError,
	sleep,
	type ICredentialsDecrypted,
	type IDataObject,
	type IExecuteFunctions,
	type INodeExecutionData,
} from 'n8n-workflow';

import { idempotencyKey, missingFields, operationIdProblem } from './rules';
import { DEFAULT_RETRY, callLedger, type Connection, type RetryPolicy, type Send } from './transport';

/** The key the ledger's answer is put under on each item passed through. */
export const ANSWER_KEY = 'flowledger';
const CREDENTIAL = 'flowledgerApi';

export type Body = Record<string, unknown>;

/** The run of ``fn``: its credential read and checked once, and each call to the ledger sent
 * through n8n with it. */
export async function openRun(fn: IExecuteFunctions): Promise<Run> {
	const credentials = await fn.getCredentials(CREDENTIAL);
	const connection: Connection = {
		baseUrl: String(credentials.baseUrl ?? '').trim(),
		signingSecret: String(credentials.signingSecret ?? '').trim(),
	};
	if (!/^https?:\/\/./.test(connection.baseUrl)) {
		throw new NodeOperationError(
			fn.getNode(),
			'the Flowledger API credential has no base URL (http://… or https://…)',
		);
	}
	const source = String(credentials.source ?? '').trim();
	// Handed to each request: without it n8n reads the credential from its database and
	// decrypts it again for every call to the ledger.
	const node = fn.getNode();
	const decrypted: ICredentialsDecrypted = {
		id: node.credentials?.[CREDENTIAL]?.id ?? '',
		name: node.credentials?.[CREDENTIAL]?.name ?? '',
		type: CREDENTIAL,
		data: credentials,
	};
	const send: Send = async (request) => {
		const response = await fn.helpers.httpRequestWithAuthentication.call(
			fn,
			CREDENTIAL,
			{
				method: request.method,
				url: request.url,
				headers: request.headers,
				body: request.body,
				timeout: request.timeout,
				returnFullResponse: true,
				ignoreHttpStatusErrors: true,
				json: false,
			},
			{ credentialsDecrypted: decrypted },
		);
		return { status: response.statusCode as number, body: response.body as unknown };
	};
	return new Run(fn, send, connection, source);
}

export class Run {
	readonly items: INodeExecutionData[];
	readonly executionId: string;
	readonly workflowId: string;
	readonly nodeName: string;
	readonly runIndex: number;

	constructor(
		readonly fn: IExecuteFunctions,
		readonly send: Send,
		readonly connection: Connection,
		readonly source: string,
		readonly wait: (ms: number) => Promise<void> = sleep,
	) {
		this.items = fn.getInputData();
		this.executionId = String(fn.getExecutionId() ?? '');
		this.workflowId = String(fn.getWorkflow().id ?? '');
		this.nodeName = fn.getNode().name;
		const proxyRunIndex = fn.getWorkflowDataProxy(0).$runIndex;
		this.runIndex = typeof proxyRunIndex === 'number' ? proxyRunIndex : 0;
	}

	/** The Options collection of item ``i``. */
	options(i: number): IDataObject {
		return this.fn.getNodeParameter('options', i, {}) as IDataObject;
	}

	policy(i: number): RetryPolicy {
		const options = this.options(i);
		return {
			tries: typeof options.tries === 'number' ? options.tries : DEFAULT_RETRY.tries,
			firstWaitMs: DEFAULT_RETRY.firstWaitMs,
			timeoutMs: typeof options.timeout === 'number' ? options.timeout : DEFAULT_RETRY.timeoutMs,
		};
	}

	operationId(i: number): string {
		const value = this.fn.getNodeParameter('operationId', i, '') as unknown;
		const text = typeof value === 'number' ? String(value) : value;
		if (typeof text !== 'string' || text.trim() === '' || text.length > 200) {
			throw this.idError(i, 'the operation ID is empty, not text, or longer than 200 characters');
		}
		return this.checked(text, i);
	}

	/** ``id`` unless the ledger would refuse it for a segment a missing field left behind:
	 * then a node error before any call, saying so. */
	checked(id: string, i: number): string {
		const problem = operationIdProblem(id);
		if (problem !== undefined) throw this.idError(i, problem);
		return id;
	}

	/** The error for an operation ID the ledger would refuse, naming the ``$json`` fields its
	 * expression reads that the item lacks (n8n turns a missing one into ``undefined``, or the
	 * whole ID into nothing when the expression fails). */
	idError(i: number, problem: string): NodeOperationError {
		const expression = this.fn.getNode().parameters?.operationId;
		const missing = missingFields(expression, this.items[i].json);
		const named = missing.length > 0 ? `; the item has no ${missing.join(', no ')}` : '';
		return new NodeOperationError(this.fn.getNode(), `${problem}${named}`, {
			itemIndex: i,
			description: 'Nothing was sent to the ledger for this item: it was not dispatched, confirmed or failed.',
		});
	}

	async post(i: number, call: string, path: string, operationId: string, body: Body) {
		if (this.executionId === '') {
			throw new NodeOperationError(this.fn.getNode(), 'n8n gave this run no execution ID', {
				itemIndex: i,
			});
		}
		return await callLedger(
			this.send,
			this.wait,
			this.connection,
			{ method: 'POST', path, body, idempotencyKey: this.keyFor(call, i, operationId) },
			this.policy(i),
		);
	}

	/** The ``Idempotency-Key`` of this run's ``call`` for item ``i``. */
	keyFor(call: string, i: number, operationId: string): string {
		return idempotencyKey({
			call,
			workflowId: this.workflowId,
			executionId: this.executionId,
			nodeName: this.nodeName,
			runIndex: this.runIndex,
			itemIndex: i,
			operationId,
		});
	}

	/** The item passed on unchanged but for the ledger's answer under one key. */
	passOn(i: number, answer: IDataObject): INodeExecutionData {
		const item = this.items[i];
		return {
			...item,
			json: { ...item.json, [ANSWER_KEY]: answer },
			pairedItem: { item: i },
		};
	}

	failed(i: number, error: unknown): INodeExecutionData {
		const message = error instanceof Error ? error.message : String(error);
		return {
			...this.items[i],
			json: { ...this.items[i].json, error: { message } },
			pairedItem: { item: i },
		};
	}

	/** ``work`` for every item, one output; an error stops the node unless it continues on
	 * fail, in which case the item carries it. */
	async each(work: (i: number) => Promise<INodeExecutionData>): Promise<INodeExecutionData[][]> {
		const out: INodeExecutionData[] = [];
		for (let i = 0; i < this.items.length; i++) {
			try {
				out.push(await work(i));
			} catch (error) {
				if (!this.fn.continueOnFail()) throw this.nodeError(error, i);
				out.push(this.failed(i, error));
			}
		}
		return [out];
	}

	nodeError(error: unknown, i: number): NodeOperationError {
		if (error instanceof NodeOperationError) return error;
		const message = error instanceof Error ? error.message : String(error);
		return new NodeOperationError(this.fn.getNode(), message, { itemIndex: i });
	}
}

/** ``value`` as trimmed text, or undefined when there is none. */
export function nonEmpty(value: unknown): string | undefined {
	if (value === undefined || value === null) return undefined;
	const text = String(value).trim();
	return text === '' ? undefined : text;
}
