// Copies the icons and the node's codex file (Flowledger.node.json: its categories and
// documentation link) next to the compiled node and credential, where n8n looks for them.
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
for (const dir of ['nodes/Flowledger', 'credentials']) {
	for (const name of fs.readdirSync(path.join(root, dir))) {
		if (name.endsWith('.svg') || name.endsWith('.node.json')) {
			fs.mkdirSync(path.join(root, 'dist', dir), { recursive: true });
			fs.copyFileSync(path.join(root, dir, name), path.join(root, 'dist', dir, name));
		}
	}
}
