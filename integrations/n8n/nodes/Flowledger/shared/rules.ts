/**
 * The node's decisions that need no n8n and no network: how a failed write is classified,
 * which receipts are refused, how the Idempotency-Key is derived, what the input is, and what
 * of an Error Trigger's item is sent. Kept pure so the package's tests can state them as tables.
 */
import { createHash } from 'crypto';

export type Outcome = 'rejected' | 'unknown';

/** Statuses in the 4xx range that do not prove nothing was written: the target timed out
 * (408) or was too busy to say (429). */
const UNCERTAIN_4XX = new Set([408, 429]);

/** What an HTTP Request node's error output (``error.status``, a number), an Error Trigger
 * (``error.httpCode``, a string) or a bare Axios error (``error.response.status``) says the
 * target answered; ``undefined`` when it answered nothing. */
export function statusOf(error: unknown): number | undefined {
	if (!isObject(error)) return undefined;
	const response = isObject(error.response) ? error.response : {};
	for (const value of [error.status, error.httpCode, error.statusCode, response.status]) {
		const n = typeof value === 'string' && /^\d{3}$/.test(value.trim()) ? Number(value) : value;
		if (typeof n === 'number' && Number.isInteger(n) && n >= 100 && n <= 599) return n;
	}
	return undefined;
}

/**
 * ``rejected`` when the target answered a 4xx other than 408 and 429: it refused the write,
 * nothing happened, and the operation may be dispatched again. Everything else — a timeout, a
 * connection error, 408, 429, a 5xx, no error at all — is ``unknown``: the write may have
 * happened, and the ledger holds the operation for a person.
 */
export function classify(error: unknown): Outcome {
	const status = statusOf(error);
	if (status !== undefined && status >= 400 && status < 500 && !UNCERTAIN_4XX.has(status)) {
		return 'rejected';
	}
	return 'unknown';
}

/** A short line about a failed write for the ledger's event: status or error code, and the
 * error's message, never its request (``context``), headers or stack. */
export function describeFailure(error: unknown, limit = 500): string {
	if (!isObject(error)) return 'the write failed (no error on the item)';
	const status = statusOf(error);
	const code = typeof error.code === 'string' ? error.code : undefined;
	const message = typeof error.message === 'string' ? error.message : '';
	const head = [status !== undefined ? String(status) : undefined, code]
		.filter((part) => part !== undefined)
		.join(' ');
	const text = [head, message].filter((part) => part !== '').join(': ') || 'the write failed';
	return text.slice(0, limit);
}

/** What JavaScript makes of a missing or unusable value turned into text; the ledger refuses
 * these too. */
export const COERCED_RECEIPTS = new Set(['undefined', 'null', '[object Object]', 'NaN']);

/** The receipt as the ledger takes it (text), or a sentence saying why there is none. */
export function receiptOf(value: unknown): { receipt: string } | { problem: string } {
	if (typeof value === 'number' || typeof value === 'bigint') {
		if (typeof value === 'number' && !Number.isFinite(value)) {
			return { problem: `the receipt is ${String(value)}, not the target's reference` };
		}
		return { receipt: String(value) };
	}
	if (typeof value !== 'string') {
		const what = value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value;
		return {
			problem: `the receipt is ${what}: map it to the target's id for the write (e.g. {{ $json.id }})`,
		};
	}
	const text = value.trim();
	if (text === '') {
		return { problem: "the receipt is empty: the target's answer carried no id" };
	}
	if (COERCED_RECEIPTS.has(text)) {
		return {
			problem: `the receipt is the text '${text}', what JavaScript makes of a missing value: the target's answer carried no usable id`,
		};
	}
	if (value.length > 1000) return { problem: 'the receipt is longer than 1000 characters' };
	return { receipt: value };
}

/** Unicode's Default_Ignorable_Code_Point: characters shown as nothing (zero-width spaces and
 * joiners, the word joiner, the BOM, the soft hyphen, variation selectors, tag characters). */
const INVISIBLE = /\p{Default_Ignorable_Code_Point}/u;

/**
 * Why the ledger would refuse this operation id, or ``undefined``: an invisible character
 * (``invoice:INV-42\u200b:send`` looks like ``invoice:INV-42:send`` and would be another
 * operation), a segment between its ``:`` that is blank, or what JavaScript makes of a missing
 * value (``invoice:undefined:send`` is built from a body without its invoice id, and every
 * later such body would name the same operation). The ledger refuses these too.
 */
export function operationIdProblem(id: string): string | undefined {
	const hidden = INVISIBLE.exec(id);
	if (hidden !== null) {
		const point = `U+${(hidden[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
		const shown = id.replace(new RegExp(INVISIBLE.source, 'gu'), '<?>');
		return `operation ID '${shown}' has an invisible character (${point}, shown as <?>): the data it is built from holds one`;
	}
	for (const segment of id.split(':')) {
		const text = segment.trim();
		if (text === '') {
			return `operation ID '${id}' has an empty segment: the expression that builds it read a missing or empty field`;
		}
		if (COERCED_RECEIPTS.has(text)) {
			return `operation ID '${id}' has a segment '${text}': the expression that builds it read a missing field`;
		}
	}
	return undefined;
}

const JSON_REFERENCE = /\$json((?:\.[A-Za-z_$][\w$]*|\[\s*(?:'[^']*'|"[^"]*")\s*\])+)/g;
const PATH_PART = /\.([A-Za-z_$][\w$]*)|\[\s*(?:'([^']*)'|"([^"]*)")\s*\]/g;

/**
 * The ``$json`` fields an expression reads (``$json.body.invoice_id``, ``$json['invoice id']``)
 * that the item does not have as a value: missing, ``null``, empty text, ``NaN`` or an object.
 * Named as the expression writes them, each once, in the order it reads them.
 */
export function missingFields(expression: unknown, json: unknown): string[] {
	if (typeof expression !== 'string') return [];
	const missing: string[] = [];
	for (const reference of expression.matchAll(JSON_REFERENCE)) {
		let value: unknown = json;
		let read = '$json';
		for (const part of reference[1].matchAll(PATH_PART)) {
			if (!isObject(value)) break; // a text's or number's own method (.trim, .toString)
			const key = part[1] ?? part[2] ?? part[3];
			value = Object.prototype.hasOwnProperty.call(value, key) ? value[key] : undefined;
			read += part[0];
		}
		const absent =
			value === undefined ||
			value === null ||
			(typeof value === 'string' && value.trim() === '') ||
			(typeof value === 'number' && Number.isNaN(value)) ||
			isObject(value);
		if (absent && !missing.includes(read)) missing.push(read);
	}
	return missing;
}

export interface KeyParts {
	call: string;
	workflowId: string;
	executionId: string;
	nodeName: string;
	runIndex: number;
	itemIndex: number;
	operationId: string;
}

/**
 * The ``Idempotency-Key`` of one call: the same execution resending the same call for the same
 * item (n8n's Retry On Fail, or this node's own retries after a lost answer) sends the same
 * key and gets the stored answer; anything else differs. Hashed, so it is always 1 to 200
 * visible ASCII characters whatever the names hold.
 */
export function idempotencyKey(parts: KeyParts): string {
	const material = JSON.stringify([
		parts.workflowId,
		parts.executionId,
		parts.nodeName,
		parts.runIndex,
		parts.itemIndex,
		parts.call,
		parts.operationId,
	]);
	const digest = createHash('sha256').update(material, 'utf8').digest('hex');
	return `n8n-${parts.call}-${digest.slice(0, 48)}`;
}

/** The fields named by dot paths (``body.invoice_id``), keyed by path; a missing one is
 * ``null`` so that its absence is part of the input too. */
export function pickFields(json: Record<string, unknown>, paths: string[]): Record<string, unknown> {
	const picked: Record<string, unknown> = {};
	for (const path of paths) {
		const value = fieldAt(json, path);
		picked[path] = value === undefined ? null : value;
	}
	return picked;
}

/** The value at a dot path (``data.id``) of an item's JSON, or ``undefined``. */
export function fieldAt(json: unknown, path: string): unknown {
	let value: unknown = json;
	for (const key of path.split('.')) {
		value = isObject(value) && Object.prototype.hasOwnProperty.call(value, key) ? value[key] : undefined;
	}
	return value;
}

export function fieldList(text: string): string[] {
	return text
		.split(',')
		.map((path) => path.trim())
		.filter((path) => path !== '');
}

/** What the ledger's n8n error hook keeps of an Error Trigger's item: ids, names, the last
 * node, and the error's name, message and status. Never ``error.context`` (the failed
 * request's body and headers), the stack, or the workflow's data. */
export function errorReport(item: Record<string, unknown>): Record<string, unknown> {
	const execution = isObject(item.execution) ? item.execution : {};
	const workflow = isObject(item.workflow) ? item.workflow : {};
	const error = isObject(execution.error) ? execution.error : {};
	const status = statusOf(error);
	return {
		execution: {
			id: textOrUndefined(execution.id),
			url: textOrUndefined(execution.url),
			lastNodeExecuted: textOrUndefined(execution.lastNodeExecuted),
			error: {
				name: textOrUndefined(error.name),
				message: textOrUndefined(error.message)?.slice(0, 1000),
				httpCode: status !== undefined ? String(status) : undefined,
			},
		},
		workflow: { id: textOrUndefined(workflow.id), name: textOrUndefined(workflow.name) },
	};
}

function textOrUndefined(value: unknown): string | undefined {
	if (typeof value === 'number') return String(value);
	return typeof value === 'string' && value !== '' ? value : undefined;
}

export function isObject(value: unknown): value is Record<string, unknown> {
	return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const NAIVE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3})\d*)?)?)?$/;
const WITH_OFFSET = /(?:Z|[+-]\d{2}:?\d{2})$/i;

/**
 * A time as the ledger takes it (ISO 8601 with an offset). n8n's date picker gives local
 * times without one: those are read in the workflow's time zone. A Luxon ``DateTime`` or a
 * ``Date`` from an expression is written out as it is. ``undefined`` for an empty value.
 */
export function instantOf(value: unknown, zone: string): string | undefined {
	if (value === undefined || value === null || value === '') return undefined;
	if (value instanceof Date) return value.toISOString();
	if (isObject(value) && typeof value.toISO === 'function') {
		return String((value.toISO as () => string)());
	}
	const text = String(value).trim();
	if (WITH_OFFSET.test(text)) return text;
	const m = NAIVE.exec(text);
	if (!m) throw new Error(`${text} is not a date and time (ISO 8601, e.g. 2026-12-01T18:00:00+01:00)`);
	const [y, mo, d, h, mi, s, ms] = m.slice(1).map((part) => Number(part ?? 0));
	const wall = Date.UTC(y, mo - 1, d, h, mi, s, ms);
	let utc = wall - offsetMs(wall, zone);
	utc = wall - offsetMs(utc, zone); // once more: the offset at the instant itself (DST)
	return new Date(utc).toISOString();
}

/** How far ``zone``'s wall clock is ahead of UTC at ``utcMs``. */
function offsetMs(utcMs: number, zone: string): number {
	const parts = new Intl.DateTimeFormat('en-US', {
		timeZone: zone,
		hourCycle: 'h23',
		year: 'numeric',
		month: '2-digit',
		day: '2-digit',
		hour: '2-digit',
		minute: '2-digit',
		second: '2-digit',
	}).formatToParts(new Date(utcMs));
	const get = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
	const asUtc = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
	return asUtc - Math.floor(utcMs / 1000) * 1000;
}
