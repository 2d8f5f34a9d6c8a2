import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { Flowledger } from '../nodes/Flowledger/Flowledger.node';

// Run from dist/test; the snapshot stays beside this file's source.
const snapshot = join(__dirname, '..', '..', 'test', 'description.snapshot.json');

describe("the node's description", () => {
	test('is what n8n stored workflows against: parameters, defaults, displayOptions, outputs', () => {
		// As n8n sends it to the editor: JSON, so what a workflow keeps is compared, not how
		// the code builds it.
		const built = JSON.parse(JSON.stringify(new Flowledger().description)) as unknown;
		assert.deepEqual(built, JSON.parse(readFileSync(snapshot, 'utf8')));
	});
});
