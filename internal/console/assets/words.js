// Words for what the API names in code: a change's field ("First name", not first_name),
// its values (an erased member as "an erased person", not {"erased":true}), and who did
// it (a SCIM token by its name, its id on hover).
import { h } from './dom.js';

const FIELDS = {
  username: 'Username', email: 'Email', first_name: 'First name', last_name: 'Last name', is_active: 'Active',
  attributes: 'Attributes', password: 'Password', name: 'Name', description: 'Description', member: 'Member',
  expires_at: 'Membership ends',
};

export function fieldLabel(f) {
  if (Object.hasOwn(FIELDS, f)) return FIELDS[f];
  const words = String(f).replace(/[_.]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// isErased is the mark an erasure leaves where a person's name was (API.md: "an erased
// member shows without a name").
export const isErased = (v) => !!v && typeof v === 'object' && !Array.isArray(v) && v.erased === true;

// valueText is a change's value in words.
export function valueText(v) {
  if (v === undefined || v === null || v === '') return '—';
  if (isErased(v)) return 'an erased person';
  if (v === true) return 'yes';
  if (v === false) return 'no';
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) return v.map(valueText).join(', ');
  if (typeof v === 'object') return Object.entries(v).map(([k, x]) => `${k}: ${valueText(x)}`).join('; ');
  return String(v);
}

// value is a change's value as an element: an erased person is marked as such.
export function value(v, cls) {
  return h('span', { class: isErased(v) ? `${cls} erased` : cls }, valueText(v));
}

const SCIM = 'scim-token:';
// tokenNames are, per tenant, the names of its SCIM tokens by id, read once from the
// command API (GET …/scim-tokens, which needs tenants:admin: without it, or for a token
// revoked since, the actor shows as its id).
const tokenNames = new Map();

function namesOf(t) {
  if (!tokenNames.has(t.id)) {
    tokenNames.set(t.id, t.scimTokens()
      .then(({ data }) => new Map((data.items || []).map((x) => [x.id, x.name])))
      .catch(() => new Map()));
  }
  return tokenNames.get(t.id);
}

// actorOf is what a support person typed as "Done by", as the API names actors: a SCIM
// token's name (such as okta-prod) becomes scim-token:<its id>; anything else is as typed.
export async function actorOf(t, typed) {
  if (!typed || typed.startsWith(SCIM)) return typed;
  for (const [id, name] of await namesOf(t)) if (name === typed) return SCIM + id;
  return typed;
}

// actorTyped is an actor as the "Done by" field shows it: a SCIM token by its name once
// that is read (the field is then as the user would type it).
export function actorTyped(t, actor, input) {
  input.value = actor;
  if (!actor.startsWith(SCIM)) return;
  namesOf(t).then((names) => {
    const name = names.get(actor.slice(SCIM.length));
    if (name && input.value === actor) input.value = name;
  });
}

// actorText is who did something, in words, as far as it is known without a read.
export function actorText(actor) {
  if (actor === 'bootstrap') return 'bootstrap (the development token)';
  if (actor.startsWith(SCIM)) return `a SCIM token (${actor.slice(SCIM.length, SCIM.length + 8)}…)`;
  return actor;
}

// actorName fills el with the actor's words, and a SCIM token's name once it is read; the
// actor as the API names it is on hover.
export function actorName(t, actor, el) {
  el.textContent = actorText(actor);
  el.title = actor;
  if (actor.startsWith(SCIM)) {
    namesOf(t).then((names) => {
      const name = names.get(actor.slice(SCIM.length));
      if (name) el.textContent = `SCIM token “${name}”`;
    });
  }
  return el;
}

// membershipChange is a group membership change as the member's own timeline says it
// ("Added to group" / "Removed from group", and the group's name as the change names it),
// or null for any other item. The API puts these items in a user's feed with the group as
// their entity (docs/storage.md, "activity feed").
export function membershipChange(a) {
  if (!a.entity || !a.entity.startsWith('group:')) return null;
  const added = a.type === 'group.member_added';
  // A group delete ends every membership: each member's feed has it too.
  const deleted = a.type === 'group.deleted';
  if (!added && !deleted && a.type !== 'group.member_removed') return null;
  const c = (a.changes || {}).group;
  if (!c) return null; // a group's own item (its change is the member)
  const name = added ? c.new : c.old;
  return {
    words: added ? 'Added to group' : 'Removed from group',
    key: a.entity.slice('group:'.length),
    name: typeof name === 'string' && name ? name : a.entity.slice('group:'.length),
    // The group is gone (its name may be another group's by now): no link.
    after: deleted ? ' (group deleted)' : '',
    deleted,
  };
}
