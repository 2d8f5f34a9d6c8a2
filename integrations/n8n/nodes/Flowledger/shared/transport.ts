/**
 * One call to the ledger: the URL and body, the signature, the Idempotency-Key, the retries,
 * and what each answer means. The network is behind ``Send`` so that the node (n8n's HTTP
 * helpers) and the package's tests (a fake) drive the same code.
 */
import { createHmac } from 'crypto';

export interface WireRequest {
	method: 'GET' | 'POST';
	url: string;
	headers: Record<string, string>;
	body?: string;
	timeout: number;
}

export interface WireResponse {
	status: number;
	body: unknown;
}

/** Sends one request; answers any HTTP status, throws only when there was no answer (an
 * error with a ``code`` such as ``ECONNREFUSED`` or ``ETIMEDOUT``). */
export type Send = (request: WireRequest) => Promise<WireResponse>;
export type Sleep = (ms: number) => Promise<void>;

export interface Connection {
	baseUrl: string;
	/** The 64 hex characters `flowledger token create --signing` printed, or empty. */
	signingSecret?: string;
}

export interface RetryPolicy {
	/** Tries in all, the first included. */
	tries: number;
	/** The wait before the second try; doubled for each further one. */
	firstWaitMs: number;
	timeoutMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { tries: 4, firstWaitMs: 500, timeoutMs: 10_000 };

/** A refusal the node reports as it is: the ledger's code, message and field, or why there
 * was no usable answer. */
export class LedgerError extends Error {
	constructor(
		message: string,
		readonly status?: number,
		readonly code?: string,
		readonly field?: string,
	) {
		super(message);
		this.name = 'LedgerError';
	}
}

export const SIGNATURE_HEADER = 'X-Flowledger-Signature';

/** ``t=<unix>,v2=<hex HMAC-SHA256 of "t.METHOD.PATH.body">``, PATH as sent (with its query),
 * keyed with the bytes of the hex signing secret. */
export function signature(
	secretHex: string,
	unixSeconds: number,
	method: string,
	path: string,
	body: string,
): string {
	const mac = createHmac('sha256', signingKey(secretHex))
		.update(`${unixSeconds}.${method.toUpperCase()}.${path}.${body}`, 'utf8')
		.digest('hex');
	return `t=${unixSeconds},v2=${mac}`;
}

export function signingKey(secretHex: string): Buffer {
	const text = secretHex.trim();
	if (!/^[0-9a-fA-F]{64}$/.test(text)) {
		throw new LedgerError(
			'the signing secret must be the 64 hex characters `flowledger token create --signing` printed',
		);
	}
	return Buffer.from(text, 'hex');
}

/** The request line's path and query, as the signature covers it. */
export function pathOf(url: string): string {
	const parsed = new URL(url);
	return parsed.pathname + parsed.search;
}

export function operationPath(operationId: string, call: string): string {
	return `/v1/operations/${encodeURIComponent(operationId)}/${call}`;
}

export function joinUrl(baseUrl: string, path: string): string {
	return baseUrl.replace(/\/+$/, '') + path;
}

export interface Call {
	method: 'GET' | 'POST';
	path: string;
	body?: unknown;
	idempotencyKey?: string;
}

export interface Clock {
	now(): number; // milliseconds since the epoch
}

const systemClock: Clock = { now: () => Date.now() };

/** Retried: no answer at all, 5xx, 429, and a 409 for the same key still running. A retry
 * is safe because it carries the same Idempotency-Key. */
export function worthRetrying(status: number | undefined, code: string | undefined): boolean {
	if (status === undefined) return true;
	return status >= 500 || status === 429 || (status === 409 && code === 'idempotency_in_flight');
}

/**
 * Sends ``call`` and returns the ledger's JSON answer. Retries what is worth retrying with
 * doubling waits; a 4xx (other than those) fails at once with the ledger's own words.
 */
export async function callLedger(
	send: Send,
	sleep: Sleep,
	connection: Connection,
	call: Call,
	policy: RetryPolicy = DEFAULT_RETRY,
	clock: Clock = systemClock,
): Promise<Record<string, unknown>> {
	const url = joinUrl(connection.baseUrl, call.path);
	const body = call.body === undefined ? '' : JSON.stringify(call.body);
	let wait = policy.firstWaitMs;
	let last: LedgerError | undefined;
	// The ledger accepts each signature once, and remembers it even when it then answers 5xx.
	// A retry within the same second would carry the same one and be refused as replayed, so
	// each try is stamped at least a second after the one before.
	let lastStamp = -Infinity;
	for (let attempt = 1; attempt <= Math.max(1, policy.tries); attempt++) {
		if (attempt > 1) {
			await sleep(wait);
			wait *= 2;
		}
		const headers: Record<string, string> = { Accept: 'application/json' };
		if (call.body !== undefined) headers['Content-Type'] = 'application/json';
		if (call.idempotencyKey) headers['Idempotency-Key'] = call.idempotencyKey;
		if (connection.signingSecret) {
			const stamp = Math.max(Math.floor(clock.now() / 1000), lastStamp + 1);
			lastStamp = stamp;
			headers[SIGNATURE_HEADER] = signature(
				connection.signingSecret,
				stamp,
				call.method,
				pathOf(url),
				body,
			);
		}
		let response: WireResponse;
		try {
			response = await send({
				method: call.method,
				url,
				headers,
				body: call.body === undefined ? undefined : body,
				timeout: policy.timeoutMs,
			});
		} catch (error) {
			last = unreachable(error, connection.baseUrl);
			continue;
		}
		const answer = parseBody(response.body);
		if (response.status >= 200 && response.status < 300) {
			if (answer === undefined) {
				throw new LedgerError(
					`${connection.baseUrl} answered ${response.status} without JSON: is the base URL the flowledger receiver?`,
					response.status,
				);
			}
			return answer;
		}
		last = refusal(response.status, answer, connection.baseUrl);
		if (!worthRetrying(response.status, last.code)) throw last;
	}
	throw new LedgerError(
		`${last?.message ?? 'the ledger did not answer'} (after ${policy.tries} tries)`,
		last?.status,
		last?.code,
		last?.field,
	);
}

/** The ledger's JSON object in an answer body (text, a Buffer or already parsed), or undefined. */
export function parseBody(body: unknown): Record<string, unknown> | undefined {
	let value = body;
	if (typeof value === 'string') {
		try {
			value = JSON.parse(value);
		} catch {
			return undefined;
		}
	}
	if (Buffer.isBuffer(value)) return parseBody(value.toString('utf8'));
	return typeof value === 'object' && value !== null && !Array.isArray(value)
		? (value as Record<string, unknown>)
		: undefined;
}

function refusal(
	status: number,
	answer: Record<string, unknown> | undefined,
	baseUrl: string,
): LedgerError {
	const error = answer?.error;
	if (typeof error === 'object' && error !== null) {
		const e = error as Record<string, unknown>;
		const code = typeof e.code === 'string' ? e.code : undefined;
		const message = typeof e.message === 'string' ? e.message : 'no message';
		const field = typeof e.field === 'string' ? e.field : undefined;
		const where = field ? ` (field ${field})` : '';
		return new LedgerError(
			`flowledger refused the call (${status} ${code ?? ''}): ${message}${where}`.replace(' )', ')'),
			status,
			code,
			field,
		);
	}
	if (status === 404) {
		return new LedgerError(
			`${baseUrl} answered 404: is the base URL the flowledger receiver (flowledger serve)?`,
			status,
		);
	}
	return new LedgerError(`${baseUrl} answered ${status} without a flowledger error`, status);
}

function unreachable(error: unknown, baseUrl: string): LedgerError {
	const e = (typeof error === 'object' && error !== null ? error : {}) as Record<string, unknown>;
	const code = typeof e.code === 'string' ? e.code : undefined;
	const message = typeof e.message === 'string' ? e.message : String(error);
	return new LedgerError(
		`cannot reach the ledger at ${baseUrl}: ${code ?? message}`,
		undefined,
		code ?? 'unreachable',
	);
}
