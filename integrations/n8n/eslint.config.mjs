// The lint of n8n community packages (`n8n-node lint` of @n8n/node-cli, whose configuration
// this follows), without the CLI itself: it installs only with pnpm.
import js from '@eslint/js';
import { n8nCommunityNodesPlugin } from '@n8n/eslint-plugin-community-nodes';
import n8nNodesBase from 'eslint-plugin-n8n-nodes-base';
import tseslint from 'typescript-eslint';

const community = n8nCommunityNodesPlugin.configs.recommended;

export default tseslint.config(
	{ ignores: ['dist/**', 'node_modules/**', 'scripts/**'] },
	{
		files: ['**/*.ts'],
		extends: [js.configs.recommended, tseslint.configs.recommended, community],
		rules: {
			'prefer-spread': 'off',
			'no-console': 'error',
			// A guard routes items to three outputs (Go, Skip, Hold); as an AI agent's tool it
			// would lose them, so the node is not offered as one.
			'@n8n/community-nodes/node-usable-as-tool': 'off',
		},
	},
	{ plugins: { 'n8n-nodes-base': n8nNodesBase } },
	{
		files: ['package.json'],
		extends: [community],
		rules: {
			...n8nNodesBase.configs.community.rules,
			// The project's licence is Apache-2.0, not the MIT this rule expects.
			'n8n-nodes-base/community-package-json-license-not-default': 'off',
			// No maintainer address is published yet: `author` is set when the package is.
			'n8n-nodes-base/community-package-json-author-missing': 'off',
			'@n8n/community-nodes/valid-author': 'off',
		},
		languageOptions: {
			parser: tseslint.parser,
			parserOptions: { extraFileExtensions: ['.json'] },
		},
	},
	{
		files: ['credentials/**/*.ts'],
		rules: {
			...n8nNodesBase.configs.credentials.rules,
			'n8n-nodes-base/cred-class-field-documentation-url-miscased': 'off',
			'n8n-nodes-base/cred-class-field-type-options-password-missing': 'off',
			// The package's documentation is the README it ships; there is no site to link yet.
			'n8n-nodes-base/cred-class-field-documentation-url-missing': 'off',
		},
	},
	{
		files: ['nodes/**/*.ts'],
		rules: {
			...n8nNodesBase.configs.nodes.rules,
			'n8n-nodes-base/node-class-description-inputs-wrong-regular-node': 'off',
			'n8n-nodes-base/node-class-description-outputs-wrong': 'off',
			'n8n-nodes-base/node-param-type-options-max-value-present': 'off',
		},
	},
	{
		// The package's own tests run in Node, not in n8n: its test runner, timers and fakes.
		files: ['test/**/*.ts'],
		rules: {
			'@n8n/community-nodes/no-restricted-imports': 'off',
			'@n8n/community-nodes/no-restricted-globals': 'off',
			'@n8n/community-nodes/missing-paired-item': 'off',
			'@n8n/community-nodes/no-hardcoded-secrets': 'off', // fixed test vectors
		},
	},
);
