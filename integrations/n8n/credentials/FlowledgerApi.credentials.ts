import type { IAuthenticate, ICredentialType, INodeProperties, Icon } from 'n8n-workflow';

/**
 * Where the ledger is and how to call it, kept once for every Flowledger node. The test
 * behind "Test connection" is the node's ``flowledgerApiTest`` (it names what is wrong:
 * unreachable, a refused token, the wrong scope, a signing secret missing). There is no
 * declarative ``test`` here: n8n would run it instead, and a request without a signature
 * cannot test a signing token, nor tell a read token from a write one.
 */
export class FlowledgerApi implements ICredentialType {
	name = 'flowledgerApi';

	displayName = 'Flowledger API';

	icon: Icon = { light: 'file:flowledger.svg', dark: 'file:flowledger.dark.svg' };

	properties: INodeProperties[] = [
		{
			displayName: 'Base URL',
			name: 'baseUrl',
			type: 'string',
			default: 'http://127.0.0.1:8787',
			required: true,
			description:
				'Where n8n reaches `flowledger serve`. From n8n in a container, the host is not 127.0.0.1 (e.g. http://host.docker.internal:8787).',
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			required: true,
			description: 'A write token: `flowledger token create --name n8n --scope write`',
		},
		{
			displayName: 'Signing Secret',
			name: 'signingSecret',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description:
				'Only for a token created with --signing: the 64 hex characters printed with it. Requests are then signed (X-Flowledger-Signature, v2).',
		},
		{
			displayName: 'Source Name',
			name: 'source',
			type: 'string',
			default: '',
			description:
				'This n8n as flowledger.toml names it in [[sources]] (e.g. prod-n8n); sent with each dispatch so that executions are matched to the right instance',
		},
	];

	/** ``Authorization: Bearer <token>`` on each request. A function rather than the generic
	 * ``'=Bearer {{$credentials.token}}'``, which n8n would evaluate as an expression (in its
	 * expression sandbox) for every call to the ledger. */
	authenticate: IAuthenticate = async (credentials, requestOptions) => ({
		...requestOptions,
		headers: { ...requestOptions.headers, Authorization: `Bearer ${String(credentials.token ?? '')}` },
	});
}
