/**
 * "Test connection" for the Flowledger API credential: one ``GET /v1/token`` (any valid token
 * may call it) and one plain sentence about what is wrong, or which token answered.
 */
import type {
	ICredentialTestFunctions,
	ICredentialsDecrypted,
	INodeCredentialTestResult,
} from 'n8n-workflow';

import { LedgerError, SIGNATURE_HEADER, joinUrl, parseBody, pathOf, signature } from './transport';

export interface ProbeRequest {
	method: 'GET';
	url: string;
	headers: Record<string, string>;
	timeout: number;
}

/** Answers any HTTP status; throws only when nothing answered. */
export type Probe = (request: ProbeRequest) => Promise<{ status: number; body: unknown }>;

export interface TestedCredential {
	baseUrl: string;
	token: string;
	signingSecret: string;
}

export interface TestResult {
	status: 'OK' | 'Error';
	message: string;
}

const WRITE_SCOPES = new Set(['write', 'operator']);

/** The credential's "Test connection" (the node's ``testedBy``): the probe sent through n8n. */
export async function flowledgerApiTest(
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
}

export async function testConnection(
	probe: Probe,
	credential: TestedCredential,
	nowMs: number = Date.now(),
): Promise<TestResult> {
	const baseUrl = credential.baseUrl.trim();
	if (!/^https?:\/\/./.test(baseUrl)) {
		return error('the base URL must start with http:// or https://');
	}
	if (credential.token.trim() === '') return error('no token: paste a flowledger write token');
	const url = joinUrl(baseUrl, '/v1/token');
	const headers: Record<string, string> = {
		Accept: 'application/json',
		Authorization: `Bearer ${credential.token.trim()}`,
	};
	if (credential.signingSecret.trim() !== '') {
		try {
			headers[SIGNATURE_HEADER] = signature(
				credential.signingSecret,
				Math.floor(nowMs / 1000),
				'GET',
				pathOf(url),
				'',
			);
		} catch (e) {
			return error((e as LedgerError).message);
		}
	}
	let answer: { status: number; body: unknown };
	try {
		answer = await probe({ method: 'GET', url, headers, timeout: 10_000 });
	} catch (e) {
		const err = (typeof e === 'object' && e !== null ? e : {}) as Record<string, unknown>;
		const why = typeof err.code === 'string' ? err.code : String(err.message ?? e);
		return error(
			`cannot reach the ledger at ${baseUrl} (${why}): is \`flowledger serve\` running, and can n8n reach that address? From n8n in a container, 127.0.0.1 is the container itself.`,
		);
	}
	const body = parseBody(answer.body);
	const ledgerError = body?.error as Record<string, unknown> | undefined;
	const said = typeof ledgerError?.message === 'string' ? `: ${ledgerError.message}` : '';
	if (answer.status === 401) {
		return error(`the ledger refused the token (401${codeOf(ledgerError)})${said}`);
	}
	if (answer.status === 403) return error(`the ledger refused the token (403)${said}`);
	if (answer.status === 404) {
		return error(
			`${baseUrl} answered 404 for /v1/token: is this the flowledger receiver (flowledger serve), at its root?`,
		);
	}
	if (answer.status !== 200 || typeof body?.scope !== 'string') {
		return error(`${baseUrl} answered ${answer.status}, not as the flowledger receiver does`);
	}
	const name = String(body.name ?? '?');
	if (!WRITE_SCOPES.has(body.scope)) {
		return error(
			`token ${name} has the ${body.scope} scope; the Flowledger node needs a write token (flowledger token create --scope write)`,
		);
	}
	if (body.signing === true && credential.signingSecret.trim() === '') {
		return error(`token ${name} must sign its requests: paste its signing secret`);
	}
	return { status: 'OK', message: `connected as token ${name} (${body.scope})` };
}

function error(message: string): TestResult {
	return { status: 'Error', message };
}

function codeOf(ledgerError: Record<string, unknown> | undefined): string {
	return typeof ledgerError?.code === 'string' ? ` ${ledgerError.code}` : '';
}
