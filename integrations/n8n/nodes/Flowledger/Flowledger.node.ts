import {
	NodeConnectionTypes,
	NodeOperationError,
	sleep,
	type ICredentialTestFunctions,
	type ICredentialsDecrypted,
	type IDataObject,
	type IExecuteFunctions,
	type INodeCredentialTestResult,
	type INodeExecutionData,
	type INodeType,
	type INodeTypeDescription,
} from 'n8n-workflow';

import { heldMessage, releaseReason, releasedNote, type Held, type Released } from './batch';
import { testConnection, type Probe } from './connection';
import { CONFIRM, FAIL, GUARD, REPORT, outputsFor, properties } from './description';
import {
	classify,
	describeFailure,
	errorReport,
	fieldAt,
	fieldList,
	idempotencyKey,
	instantOf,
	isObject,
	missingFields,
	operationIdProblem,
	pickFields,
	receiptOf,
	type Outcome,
} from './rules';
import {
	DEFAULT_RETRY,
	LedgerError,
	callLedger,
	operationPath,
	type Connection,
	type RetryPolicy,
	type Send,
} from './transport';

/** The key the ledger's answer is put under on each item passed through. */
export const ANSWER_KEY = 'flowledger';
const CREDENTIAL = 'flowledgerApi';

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

	methods = {
		credentialTest: {
			async flowledgerApiTest(
				this: ICredentialTestFunctions,
				credential: ICredentialsDecrypted,
			): Promise<INodeCredentialTestResult> {
				const data = credential.data ?? {};
				const probe: Probe = async (request) => {
					// A credential test is given only the legacy `request` helper (n8n-core's
					// CredentialTestContext), so the lint's advice to use httpRequest cannot apply.
					// eslint-disable-next-line @n8n/community-nodes/no-deprecated-workflow-functions
					const response = (await this.helpers.request({
						method: request.method,
						uri: request.url,
						headers: request.headers,
						json: true,
						simple: false,
						resolveWithFullResponse: true,
						timeout: request.timeout,
					})) as { statusCode: number; body: unknown };
					return { status: response.statusCode, body: response.body };
				};
				return await testConnection(probe, {
					baseUrl: String(data.baseUrl ?? ''),
					token: String(data.token ?? ''),
					signingSecret: String(data.signingSecret ?? ''),
				});
			},
		},
	};

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		const operation = this.getNodeParameter('operation', 0, GUARD) as string;
		const credentials = await this.getCredentials(CREDENTIAL);
		const connection: Connection = {
			baseUrl: String(credentials.baseUrl ?? '').trim(),
			signingSecret: String(credentials.signingSecret ?? '').trim(),
		};
		if (!/^https?:\/\/./.test(connection.baseUrl)) {
			throw new NodeOperationError(
				this.getNode(),
				'the Flowledger API credential has no base URL (http://… or https://…)',
			);
		}
		const source = String(credentials.source ?? '').trim();
		// Handed to each request: without it n8n reads the credential from its database and
		// decrypts it again for every call to the ledger.
		const node = this.getNode();
		const decrypted: ICredentialsDecrypted = {
			id: node.credentials?.[CREDENTIAL]?.id ?? '',
			name: node.credentials?.[CREDENTIAL]?.name ?? '',
			type: CREDENTIAL,
			data: credentials,
		};
		const send: Send = async (request) => {
			const response = await this.helpers.httpRequestWithAuthentication.call(
				this,
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
		const run = new Run(this, send, connection, source);
		if (operation === GUARD) return await run.guard();
		if (operation === CONFIRM) return [await run.each((i) => run.confirm(i))];
		if (operation === FAIL) return [await run.each((i) => run.fail(i))];
		if (operation === REPORT) return [await run.each((i) => run.report(i))];
		throw new NodeOperationError(this.getNode(), `unknown operation ${operation}`);
	}
}

type Body = Record<string, unknown>;

/** One execution of the node: the items, their calls to the ledger, and where each goes. */
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

	policy(i: number): RetryPolicy {
		const options = this.fn.getNodeParameter('options', i, {}) as IDataObject;
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

	/**
	 * The operation a Confirm or Fail is about: the one named, else the one the item's Guard
	 * dispatched — from the Guard's answer the item still carries (the write's error output
	 * passes its input on), else from the paired item of the Guard found walking back from this node.
	 * Read in the node, not by an expression: n8n evaluates each expression in an isolate.
	 */
	guardedOperationId(i: number): string {
		const named = this.fn.getNodeParameter('operationId', i, '') as unknown;
		if (named !== '' && named !== undefined && named !== null) return this.operationId(i);
		const carried = operationIdIn(this.items[i].json);
		if (carried !== undefined) return this.checked(carried, i);
		const guard = this.upstreamGuard();
		if (guard !== undefined) {
			let found: string | undefined;
			try {
				const proxy = this.fn.getWorkflowDataProxy(i) as unknown as {
					$: (name: string) => { item?: { json?: unknown } };
				};
				found = operationIdIn(proxy.$(guard).item?.json);
			} catch {
				found = undefined; // no paired item leads back to that Guard
			}
			if (found !== undefined) return this.checked(found, i);
		}
		throw new NodeOperationError(
			this.fn.getNode(),
			guard === undefined
				? 'no operation ID: name it, or place this node after a Flowledger Guard'
				: `no operation ID: the item does not lead back to an answer of ${guard}; name the operation ID`,
			{ itemIndex: i },
		);
	}

	private guardName: string | null | undefined;

	/** The first enabled Flowledger Guard found walking back from this node, or undefined. */
	upstreamGuard(): string | undefined {
		if (this.guardName === undefined) {
			const type = this.fn.getNode().type;
			const guard = this.fn
				.getParentNodes(this.nodeName, { includeNodeParameters: true })
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
	async each(work: (i: number) => Promise<INodeExecutionData>): Promise<INodeExecutionData[]> {
		const out: INodeExecutionData[] = [];
		for (let i = 0; i < this.items.length; i++) {
			try {
				out.push(await work(i));
			} catch (error) {
				if (!this.fn.continueOnFail()) throw this.nodeError(error, i);
				out.push(this.failed(i, error));
			}
		}
		return out;
	}

	nodeError(error: unknown, i: number): NodeOperationError {
		if (error instanceof NodeOperationError) return error;
		const message = error instanceof Error ? error.message : String(error);
		return new NodeOperationError(this.fn.getNode(), message, { itemIndex: i });
	}

	/**
	 * Dispatch every item and route it to Go, Skip or Hold. The node passes items on only by
	 * returning, so when it must stop (a hold with On Hold set to stop, or an error while
	 * not continuing on fail) none is passed on: each operation the ledger answered ``go`` for
	 * in this batch is released (prepared again, no hold) before the error is thrown. Every
	 * item is routed first on a hold, so the error names each held one; an error stops the
	 * routing at once.
	 */
	async guard(): Promise<INodeExecutionData[][]> {
		const go: INodeExecutionData[] = [];
		const skip: INodeExecutionData[] = [];
		const hold: INodeExecutionData[] = [];
		const dispatched: Array<{ index: number; operationId: string }> = [];
		const held: Held[] = [];
		const answered = new Map<string, Body>();
		for (let i = 0; i < this.items.length; i++) {
			let answer: Body;
			let operationId: string;
			let again = false;
			try {
				operationId = this.operationId(i);
				const earlier = answered.get(operationId);
				again = earlier !== undefined;
				if (earlier !== undefined) {
					answer = sameAgain(earlier);
				} else {
					answer = await this.post(
						i,
						'dispatch',
						operationPath(operationId, 'dispatch'),
						operationId,
						this.dispatchBody(i),
					);
					answered.set(operationId, answer);
				}
			} catch (error) {
				if (!this.fn.continueOnFail()) {
					const stop = this.nodeError(error, i);
					await this.releaseAll(dispatched, stop, stop.message);
					throw stop;
				}
				hold.push(this.failed(i, error)); // never Go without the ledger's word
				continue;
			}
			const decision = answer.decision;
			if (decision === 'go') {
				go.push(this.passOn(i, answer as IDataObject));
				dispatched.push({ index: i, operationId });
			} else if (decision === 'skip') {
				skip.push(this.passOn(i, answer as IDataObject));
			} else if (this.fn.getNodeParameter('onHold', i, 'stop') === 'output') {
				hold.push(this.passOn(i, answer as IDataObject));
			} else {
				const reason = typeof answer.reason === 'string' ? answer.reason : String(decision);
				if (this.fn.continueOnFail()) {
					// Continuing on fail never stops: the held item goes to Hold with the error.
					const passed = this.passOn(i, answer as IDataObject);
					const message = heldMessage([{ index: i, operationId, reason }]);
					hold.push({ ...passed, json: { ...passed.json, error: { message } } });
				} else if (!again) {
					held.push({ index: i, operationId, reason });
				}
			}
		}
		if (held.length === 0) return [go, skip, hold];
		const message = heldMessage(held);
		const stop = new NodeOperationError(this.fn.getNode(), message, {
			itemIndex: held[0].index,
			description:
				'Nothing was written. A person decides in the ledger (flowledger show, the TUI), or choose "Continue on the Hold Output".',
		});
		await this.releaseAll(dispatched, stop, message);
		throw stop;
	}

	/** Give back each operation the ledger let through for this batch: none was passed on.
	 * Said in ``stop``'s description; a ledger that cannot be reached is not asked again. */
	async releaseAll(
		dispatched: Array<{ index: number; operationId: string }>,
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
					this.send,
					this.wait,
					this.connection,
					{
						method: 'POST',
						path: operationPath(operationId, 'release'),
						body: {
							execution_id: this.executionId,
							run_index: this.runIndex,
							reason: releaseReason(why),
							dispatch_key: this.keyFor('dispatch', index, operationId),
						},
					},
					this.policy(index),
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

	dispatchBody(i: number): Body {
		const options = this.fn.getNodeParameter('options', i, {}) as IDataObject;
		const version = String(this.fn.getNodeParameter('processingVersion', i, '') ?? '').trim();
		if (version === '') {
			throw new NodeOperationError(this.fn.getNode(), 'the processing version is empty', {
				itemIndex: i,
			});
		}
		const body: Body = {
			processing_version: version,
			execution_id: this.executionId,
			workflow_id: this.workflowId || undefined,
			run_index: this.runIndex,
			step: nonEmpty(options.step) ?? this.nodeName.slice(0, 200),
			input: this.input(i),
			source: this.source || undefined,
			deadline: this.instant(options.deadline, i),
			input_ref: nonEmpty(options.inputRef),
		};
		const approvalVersion = nonEmpty(options.approvalVersion);
		if (approvalVersion !== undefined) {
			body.approval = {
				version: approvalVersion,
				expires_at: this.instant(options.approvalExpiresAt, i),
			};
		}
		return body;
	}

	instant(value: unknown, i: number): string | undefined {
		try {
			return instantOf(value, this.fn.getTimezone());
		} catch (error) {
			throw new NodeOperationError(this.fn.getNode(), (error as Error).message, { itemIndex: i });
		}
	}

	input(i: number): unknown {
		const mode = this.fn.getNodeParameter('inputSource', i, 'item') as string;
		const json = { ...this.items[i].json };
		delete json[ANSWER_KEY]; // an earlier Flowledger node's answer is not part of the input
		if (mode === 'fields') {
			const fields = fieldList(String(this.fn.getNodeParameter('inputFields', i, '')));
			if (fields.length === 0) {
				throw new NodeOperationError(this.fn.getNode(), 'no input fields named', {
					itemIndex: i,
				});
			}
			return pickFields(json, fields);
		}
		if (mode === 'value') {
			const value = this.fn.getNodeParameter('inputValue', i, null) as unknown;
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

	async confirm(i: number): Promise<INodeExecutionData> {
		const operationId = this.guardedOperationId(i);
		const source = this.fn.getNodeParameter('receiptSource', i, 'field') as string;
		const given =
			source === 'value'
				? (this.fn.getNodeParameter('receipt', i, undefined) as unknown)
				: fieldAt(this.items[i].json, String(this.fn.getNodeParameter('receiptField', i, 'id')).trim());
		const found = receiptOf(given);
		if ('problem' in found) {
			throw new NodeOperationError(this.fn.getNode(), `not confirmed: ${found.problem}`, {
				itemIndex: i,
				description:
					'The write may have happened. Without a receipt the operation stays dispatching and the ledger holds it when its deadline passes.',
			});
		}
		const options = this.fn.getNodeParameter('options', i, {}) as IDataObject;
		const answer = await this.post(i, 'confirm', operationPath(operationId, 'confirm'), operationId, {
			receipt: found.receipt,
			execution_id: this.executionId,
			detail: nonEmpty(options.detail),
		});
		if (answer.reason === 'receipt_conflict') {
			throw new NodeOperationError(
				this.fn.getNode(),
				`flowledger holds ${operationId}: receipt_conflict (it was confirmed with another receipt: a possible duplicate write)`,
				{ itemIndex: i },
			);
		}
		return this.passOn(i, answer as IDataObject);
	}

	async fail(i: number): Promise<INodeExecutionData> {
		const operationId = this.guardedOperationId(i);
		const chosen = this.fn.getNodeParameter('outcome', i, 'auto') as string;
		const error = this.items[i].json.error;
		const outcome: Outcome = chosen === 'rejected' || chosen === 'unknown' ? chosen : classify(error);
		const options = this.fn.getNodeParameter('options', i, {}) as IDataObject;
		const answer = await this.post(i, 'fail', operationPath(operationId, 'fail'), operationId, {
			outcome,
			error: nonEmpty(options.errorText) ?? describeFailure(error),
			execution_id: this.executionId,
		});
		return this.passOn(i, { ...(answer as IDataObject), outcome });
	}

	async report(i: number): Promise<INodeExecutionData> {
		const report = errorReport(this.items[i].json);
		const execution = isObject(report.execution) ? report.execution : {};
		const failedId = typeof execution.id === 'string' ? execution.id : '';
		const answer = await this.post(i, 'hook', '/v1/hooks/n8n/error', failedId, report);
		return this.passOn(i, answer as IDataObject);
	}
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

/** The operation id of a Guard's answer an item carries under ``flowledger``, if any. */
function operationIdIn(json: unknown): string | undefined {
	const answer = isObject(json) ? json[ANSWER_KEY] : undefined;
	const id = isObject(answer) ? answer.operation_id : undefined;
	return typeof id === 'string' && id !== '' ? id : undefined;
}

function nonEmpty(value: unknown): string | undefined {
	if (value === undefined || value === null) return undefined;
	const text = String(value).trim();
	return text === '' ? undefined : text;
}

export { LedgerError };
