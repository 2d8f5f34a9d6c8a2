/**
 * What a Guard says when it stops a batch: n8n passes a node's items on only when the node
 * returns, so a Guard that throws passes none of them on, and every operation the ledger let
 * through for this batch was not written. The Guard gives each back (``release``: prepared
 * again, no hold) and says so; these are the words, kept pure for the package's tests.
 */

/** An item the ledger held, with the operation and the reason. */
export interface Held {
	index: number;
	operationId: string;
	reason: string;
}

/** An operation the Guard gave back, or could not. */
export interface Released {
	operationId: string;
	problem?: string;
}

/** The error's message when items were held and the Guard stops. One held item keeps the
 * words an error workflow or an alert may match: ``flowledger holds OP: reason``. */
export function heldMessage(held: Held[]): string {
	if (held.length === 1) return `flowledger holds ${held[0].operationId}: ${held[0].reason}`;
	const shown = held.slice(0, 5).map((h) => `${h.operationId} (${h.reason})`);
	const more = held.length > 5 ? `, and ${held.length - 5} more` : '';
	return `flowledger holds ${held.length} items: ${shown.join(', ')}${more}`;
}

/** The reason a release records in the ledger: why the item was not passed on. */
export function releaseReason(stop: string): string {
	const text = `the Guard stopped before passing this item on: ${stop}`;
	return text.length > 500 ? `${text.slice(0, 497)}...` : text;
}

/** What the error's description adds about the items the ledger had let through. */
export function releasedNote(released: Released[]): string {
	if (released.length === 0) return '';
	const given = released.filter((r) => r.problem === undefined);
	const stuck = released.filter((r) => r.problem !== undefined);
	const parts: string[] = [];
	if (given.length > 0) {
		parts.push(
			`The ledger had let ${count(given.length, 'other item')} through; none was passed on, so ${given.length === 1 ? 'it was' : 'each was'} released: prepared again, with no hold (${names(given)}).`,
		);
	}
	if (stuck.length > 0) {
		parts.push(
			`${count(stuck.length, 'operation')} could not be released (${stuck[0].problem}): ${stuck.length === 1 ? 'it stays' : 'they stay'} dispatching, and the error workflow or the sweep holds ${stuck.length === 1 ? 'it' : 'them'} for a person (${names(stuck)}).`,
		);
	}
	return parts.join(' ');
}

function count(n: number, noun: string): string {
	return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

function names(released: Released[]): string {
	const shown = released.slice(0, 5).map((r) => r.operationId);
	return released.length > 5 ? `${shown.join(', ')}, and ${released.length - 5} more` : shown.join(', ');
}
