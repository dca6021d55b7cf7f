// Package projections turns ssodir's domain events into the tenant's read model (the
// `_users` table) and activity feed (the `_activities` table), as laid out in
// docs/storage.md.
//
// Projections are declared as data: NewReducers maps every event type to a pure Reducer
// that turns an events.Envelope into Effects — the writes it needs. A Projector executes
// them against table names given per call (Tables), so a replay writes into fresh tables
// through the same code path as the live stream consumer.
//
// Every write is idempotent and order-proof: applying a record twice, or the records of
// one aggregate in any order, leaves the tables as applying them once in order would.
//
//   - Config items (users, groups) and membership tombstones are upserts: a Put of the full
//     state the event carries, conditioned on `attribute_not_exists(version) OR
//     version < :v`. A failed condition means "already this new or newer" and is success.
//   - Deletes leave tombstones (`is_deleted: true`, the version, no GSI key attributes), so
//     a late older record cannot bring the entity back and no index shows it.
//   - A membership is versioned by the group version of its last membership event. An add
//     is written live only if no group delete at or after its version and no user delete
//     at or after its membership revision has been projected (a TransactWriteItems with
//     ConditionChecks on both config items). Otherwise its tombstone form is written, which
//     is exactly what the live item becomes when a later delete cascades over it — so the
//     final item does not depend on the order.
//   - A user or group delete cascades: it flips every live membership it covers into a
//     tombstone (SET is_deleted, REMOVE member_id, member_of), keeping the membership's
//     version, so a later membership event of the group still orders against it.
//   - Activity items have a key derived from the event (`entity#<kind>:<key>`,
//     `<occurred_at>#<event_id>`), so a plain Put rewrites the same item.
//
// Batching: BatchWriteItem cannot carry conditions, so only the activity puts are safe to
// batch. ApplyBatch (for replays) batches those, coalesces the rest to the newest version
// per item — a lower version's conditional write could only lose — and runs the
// conditional writes with bounded concurrency, which order-proofness makes safe.
package projections
