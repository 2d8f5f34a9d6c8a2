import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { Flowledger } from '../nodes/Flowledger/Flowledger.node';

// Run from dist/test: the build copied the codex file beside the compiled node.
const dist = join(__dirname, '..');
const pkg = JSON.parse(readFileSync(join(dist, '..', 'package.json'), 'utf8'));

describe('the codex file', () => {
	test('is in dist beside the node and names it', () => {
		const codex = JSON.parse(
			readFileSync(join(dist, 'nodes', 'Flowledger', 'Flowledger.node.json'), 'utf8'),
		);
		const { description } = new Flowledger();
		assert.equal(codex.node, `${pkg.name}.${description.name}`);
		assert.equal(Number(codex.nodeVersion), description.version);
		assert.deepEqual(codex.categories, ['Development', 'Utility']);
		assert.match(codex.resources.primaryDocumentation[0].url, /^https:\/\//);
		assert.equal(codex.resources.primaryDocumentation[0].url, pkg.homepage);
	});
});
