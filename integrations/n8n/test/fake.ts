/** A stand-in for n8n's execute context and for the ledger, enough to run the node. */
import type { IDataObject, IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import type { WireRequest, WireResponse } from '../nodes/Flowledger/shared/transport';

export type Params = Record<string, unknown | ((i: number) => unknown)>;

export interface Sent extends WireRequest {
	json: Record<string, unknown> | undefined;
}

export class FakeLedger {
	sent: Sent[] = [];
	/** What the ledger answers each request, in order; the last repeats. A thrown value is a
	 * request that got no answer. */
	constructor(readonly answer: (request: Sent, n: number) => WireResponse) {}

	send = async (request: WireRequest): Promise<WireResponse> => {
		const sent = { ...request, json: request.body ? JSON.parse(request.body) : undefined };
		this.sent.push(sent);
		return this.answer(sent, this.sent.length);
	};
}

/** The ledger's answer to a dispatch, by operation id: ``decisions[op]`` or go. */
export function decide(decisions: Record<string, string>) {
	return (request: Sent): WireResponse => {
		const op = decodeURIComponent(request.url.split('/v1/operations/')[1]?.split('/')[0] ?? '');
		const call = request.url.split('/').pop();
		if (call === 'release') {
			return { status: 200, body: { operation_id: op, state: 'prepared', attempt: 1, decision: null, reason: null, receipt: null } };
		}
		if (call !== 'dispatch') {
			return { status: 200, body: { operation_id: op, state: 'confirmed', attempt: 1, decision: null, reason: null, receipt: null } };
		}
		const decision = decisions[op] ?? 'go';
		return {
			status: 200,
			body: {
				operation_id: op,
				decision,
				state: decision === 'skip' ? 'confirmed' : 'dispatching',
				attempt: 1,
				reason: decision === 'hold' ? 'input_mismatch' : null,
				receipt: decision === 'skip' ? 'CRM-1' : null,
			},
		};
	};
}

export interface ContextOptions {
	items: INodeExecutionData[];
	params: Params;
	ledger: FakeLedger;
	credentials?: Record<string, unknown>;
	continueOnFail?: boolean;
	executionId?: string;
	runIndex?: number;
	/** Counts the credential's reads (each a database read and a decryption in n8n). */
	decrypted?: { count: number };
	/** The nodes before this one, as ``getParentNodes`` lists them (default: none). */
	parents?: Array<{ name: string; type: string; disabled?: boolean; parameters?: Record<string, unknown> }>;
	/** ``$(name).item.json`` for item ``i``, as n8n resolves a paired item; a missing node
	 * throws, as n8n does. */
	paired?: Record<string, (i: number) => Record<string, unknown>>;
	/** The node's parameters as stored, expressions unevaluated (``getNode().parameters``). */
	nodeParameters?: Record<string, unknown>;
}

export function context(options: ContextOptions): IExecuteFunctions {
	const credentials = {
		baseUrl: 'http://ledger.test:8787',
		token: 'flt_test',
		signingSecret: '',
		source: 'prod-n8n',
		...options.credentials,
	};
	const node = {
		name: 'Guard',
		type: 'n8n-nodes-flowledger.flowledger',
		typeVersion: 1,
		parameters: options.nodeParameters ?? {},
		credentials: { flowledgerApi: { id: 'cred-1', name: 'Flowledger API' } },
	};
	const decrypted = options.decrypted ?? { count: 0 };
	const fake = {
		getInputData: () => options.items,
		getNodeParameter: (name: string, i: number, fallback?: unknown) => {
			const value = options.params[name];
			if (value === undefined) return fallback;
			return typeof value === 'function' ? (value as (i: number) => unknown)(i) : value;
		},
		getCredentials: async () => {
			decrypted.count += 1; // as n8n: a database read and a decryption each time
			return { ...credentials };
		},
		getExecutionId: () => options.executionId ?? '41',
		getWorkflow: () => ({ id: 'wf-7', name: 'send invoices', active: true }),
		getNode: () => node,
		getWorkflowDataProxy: (i: number) => ({
			$runIndex: options.runIndex ?? 0,
			$: (name: string) => {
				const json = options.paired?.[name];
				if (json === undefined) throw new Error(`Referenced node doesn't exist: ${name}`);
				return { item: { json: json(i) } };
			},
		}),
		getParentNodes: () =>
			(options.parents ?? []).map((p) => ({ typeVersion: 1, disabled: false, ...p })),
		getTimezone: () => 'Europe/Berlin',
		continueOnFail: () => options.continueOnFail ?? false,
		helpers: {
			httpRequestWithAuthentication: async function (
				this: unknown,
				credential: string,
				request: { method: 'GET' | 'POST'; url: string; headers: Record<string, string>; body?: string; timeout: number },
				more?: { credentialsDecrypted?: { data?: Record<string, unknown> } },
			) {
				if (credential !== 'flowledgerApi') throw new Error(`credential ${credential}`);
				// As n8n does: the credential handed over, else read and decrypted again.
				const data = more?.credentialsDecrypted?.data ?? (await fake.getCredentials());
				const headers = { ...request.headers, Authorization: `Bearer ${String(data.token)}` };
				const response = await options.ledger.send({ ...request, headers });
				return { statusCode: response.status, body: response.body, headers: {} };
			},
		},
	};
	return fake as unknown as IExecuteFunctions;
}

export function item(json: Record<string, unknown>): INodeExecutionData {
	return { json: json as IDataObject };
}
