// Package streams consumes DynamoDB streams as a watermill message.Subscriber, so that any
// watermill handler can consume the directory's events. It is shared by cmd/projector and
// cmd/keycloak-sync; each is a "consumer" with its own leases, checkpoints and dead
// letters, and each may run as several processes that share the shards.
//
// # Use
//
//	names := dynamo.Names{Prefix: prefix} // the binaries take every table name from it
//	streams.EnsureTables(ctx, db, names.StreamLeases(), names.DeadLetters())
//	sub, err := streams.NewSubscriber(streams.Config{
//		Consumer: "projector", LeaseTable: ..., DeadLetters: deadletters.New(db, ..., "projector"),
//		Source: tenants, Streams: streamsClient, DB: dynamoClient,
//		OnGap: markTenantForReplay, TimestampAttribute: "recorded_at_ms",
//		Logger: log, Registerer: prometheus.DefaultRegisterer,
//	})
//	router.AddMiddleware(streams.FailureReason)
//	router.AddConsumerHandler("projector", "user_commands", sub, func(msg *message.Message) error {
//		rec, err := streams.DecodeRecord(msg)
//		...
//	})
//
// DecodeRecord gives a message's Record back with dynamodb/types attribute values: the
// Subscriber hands it over in the message's context. The payload is empty unless
// Config.Payloads asks for the Record as JSON (attribute values in DynamoDB's own lossless
// JSON shape), for messages that leave the process; DecodeRecord reads that too. The UUID is
// derived from stream ARN and sequence number, so a redelivery has the same UUID. Metadata
// carries system, tenant, table, stream, shard, sequence number, aggregate, event name,
// attempt and, for TTL deletions, ttl_deletion=true.
//
// # Streams and shards
//
// The Source is polled every SourceInterval; a stream it no longer names is let go. Each
// followed stream's shards are listed with DescribeStream and get a row in the lease table
// with their parent. A stream found with lease rows already (a restart) is read from them
// at once and listed again by the sweep. Streams just found, and streams whose shard just
// ended (its children must start), are listed before the periodic sweep of every stream
// (ShardSyncInterval), which goes one stream at a time between them, so a new tenant
// never waits behind a sweep. A stream the Source names without its ARN is found with
// ListStreams. A shard may be read only once its parent is finished: its row says
// SHARD_END, written when a reader got no next iterator from GetRecords (an empty page is
// not the end), or the parent is neither listed nor known. What DescribeStream says about
// a parent being open or closed is never trusted. A shard without a checkpoint is read from
// TRIM_HORIZON; LATEST is never used.
//
// # AWS limits and what an idle stream costs
//
// Every Streams call keeps within AWS's limits, whatever the number of streams and
// processes (budget.go): GetRecords at most ShardReadRate/Consumers per shard per process
// (5/2 by default: one process reads a shard, two consumers read every stream),
// DescribeStream and ListStreams at most their account rate / Consumers / live processes
// of the consumer (10/s and 5/s on AWS), by token buckets that follow the process count
// each lease round. A shard with records is read as fast as its budget allows (a page
// holds up to 1,000 records); after an empty page the pause is PollInterval, doubling
// with every empty page up to IdlePollMax (1s), and the first page with records ends it.
// An idle shard therefore costs one GetRecords per IdlePollMax per consumer, and a write
// to it is seen within IdlePollMax. ssodir_stream_get_records_total{consumer,result} and
// ssodir_stream_api_calls_total{consumer,call} count the calls.
//
// # Leases
//
// The lease table has one partition per consumer: a row per (stream, shard), and a
// heartbeat row per live process whose counter the process bumps every LeaseDuration/5.
// A process is dead to a peer when that peer has seen its counter stand still for
// LeaseDuration on the peer's own clock, so clock skew does not matter. Every lease round
// (also every LeaseDuration/5) a process reads the heartbeat rows only (a key range: its
// cost grows with the processes, not the shards). It reads the whole partition every
// LeaseScanInterval (30s), and at once when a process joins, leaves or dies, a peer asks
// it for a shard (the peer bumps handover_asks on its heartbeat row), a peer released or
// finished a shard (it bumps releases on its own), or one of its acquisitions lost a
// race; new shard rows it wrote and shards it finished are acted on from what it knows,
// without a read. On a full read it:
//   - stops at once, without writing, any shard whose row names another owner or token;
//   - hands over (finish in-flight, checkpoint, release) a shard a peer asked for;
//   - takes free shards, and shards of dead owners, up to ceil(eligible / live processes);
//   - asks the busiest live peer for one shard if that peer holds two or more above it.
//
// Every write made under a lease (checkpoint, release, gap mark) is conditional on the row
// still naming this owner and the token drawn when the lease was taken, so a process that
// was paused and lost its lease can never move a checkpoint back; its first refused write
// stops the shard. A process whose heartbeats fail for most of a lease stops its shards
// itself. With the default 10s lease, a dead process's shards move within about 12s;
// Close (or cancelling the Subscribe context) releases them for an immediate takeover.
//
// A lease move never lets two handlers of one aggregate run at once. Every handler's
// context derives from its shard worker. A worker that stops (a handover asked by a peer,
// Close, the Subscribe context ending, a stream let go) stops reading and delivering,
// gives its in-flight handlers ShutdownTimeout, then cancels their contexts, and writes
// its checkpoint and releases the lease only after every one of them has returned; the
// heartbeat goes on meanwhile, so peers cannot judge the lease expired. A handler that
// ignores its context thus holds the shard (and Close) until it returns. Where the lease
// is already lost (the row names another owner or token), the worker writes nothing and
// cancels its handlers at once; that only happens after our heartbeats stood still for a
// lease, and a process fences itself first: once its heartbeats have failed for
// LeaseDuration - LeaseDuration/5 it cancels its handlers without grace. The overlap with
// a new holder is therefore bounded by how long a handler takes to return after its
// context is cancelled, less one heartbeat tick (2s by default), or by a process paused
// longer than that (GC, a frozen VM), which no lease can rule out: handlers must still
// refuse to write older over newer (the projector's versioned upserts do).
//
// # Delivery, retries and checkpoints
//
// Records of one aggregate (the value of AggregateAttribute in the keys, "id" by default)
// are delivered one at a time in shard order, and a child shard starts only after its
// parent is finished, so an aggregate's order holds across splits. Records of different
// aggregates are in flight together, up to MaxInFlight per process. A nacked record is
// redelivered after a doubling backoff; after MaxAttempts deliveries it becomes a dead
// letter with the reason the handler put on the message (SetFailureReason, or the
// FailureReason middleware), and the shard moves on. While an aggregate has a dead letter
// its later records are parked as dead letters too ("blocked behind <seq>") instead of
// being applied; the dead-letter store (Config.DeadLetters, internal/deadletters) is what
// blocks, so this survives restarts and lease moves.
//
// A handler whose downstream is failing as a whole (a tenant's Keycloak realm hangs,
// answers 5xx, or 429 with Retry-After) calls Park(msg, until) and returns an error: the
// record's shard stops reading and delivering, gives its slots back, and delivers that
// record again, alone, no earlier than until; records that were in flight with it and
// fail meanwhile wait too and follow it, in order, once it is acked. Parked deliveries
// do not count toward MaxAttempts, so a long outage never dead-letters; a parked record
// that fails without Park ends the park (its downstream answered): the records held behind
// it go on, and it is retried as any other.
//
// The checkpoint is the sequence number up to which every record is acked or
// dead-lettered; it is written every CheckpointInterval, at a shard's end, and on release.
// Delivery is at least once: after a crash up to a CheckpointInterval of records (and a
// zombie's last records) come again, so handlers must be idempotent, which the projector's
// versioned upserts are.
//
// Expired iterators are replaced by one AFTER_SEQUENCE_NUMBER the last record read: records
// read and not yet acked are held in memory and still gate the checkpoint, so nothing is
// lost or delivered twice. Throttling, server errors and dropped connections are retried
// with backoff on the same iterator.
//
// # Gaps
//
// TrimmedDataAccessException on a shard from which nothing has been read and which has no
// checkpoint only means the iterator was taken while the shard was empty (DynamoDB Local
// does this on new tables): a fresh TRIM_HORIZON iterator loses nothing. With a checkpoint
// it means records after it were trimmed by the 24-hour retention, and so does a shard with
// an unfinished checkpoint that no longer exists. Either is a gap: an error log, the
// ssodir_stream_gaps_total metric, gap_after on the lease row, and Config.OnGap, which is
// retried until it succeeds (the lead marks the tenant as needing a replay). Only then does
// the shard go on with the oldest data still there.
//
// # Tables
//
// Lease table (pk consumer S, sk lease_key S; on demand):
//
//	lease_key "shard#<stream arn>#<shard id>": stream_arn, shard_id, parent_shard_id,
//	    system_id, tenant_id, table_name, lease_owner, lease_token, handover_to,
//	    checkpoint ("" | sequence number | "SHARD_END"), gap_after, gap_at, updated_at
//	lease_key "owner#<owner id>": owner_id, heartbeat (N, bumped), heartbeat_at,
//	    handover_asks (N, bumped by a peer asking for a shard), releases (N, bumped by the
//	    owner when it releases or finishes a shard)
//
// Rows of finished shards are deleted once the stream no longer lists them; heartbeat rows
// are deleted at Close, or by a peer once the owner is dead and holds nothing.
//
// Dead-letter table (pk consumer S, sk entry_key S; on demand):
//
//	entry_key "<system>#<tenant>#<table>#<aggregate>#<sequence number, 0-padded to 40>"
//	    ("#" and "%" in the parts are %-escaped), system_id, tenant_id, table_name,
//	    stream_arn, shard_id, sequence_number, aggregate, attempts, reason,
//	    blocked_behind, dead_lettered_at, record (JSON) or record_gz (gzip, above 300 KB),
//	    redrive_failures
//
// so listing a system or tenant and re-driving an aggregate in order are each a Query.
//
// # Metrics
//
// ssodir_stream_records_total{consumer,event}, ssodir_stream_apply_seconds
// {consumer}, ssodir_stream_lag_seconds{consumer,system,tenant} (apply time minus the
// writer's TimestampAttribute, not the rounded stream time), ssodir_stream_iterator_age_seconds
// {consumer} (a histogram over every page read with records), ssodir_stream_leases_held{consumer},
// ssodir_stream_dead_letters_total{consumer,system,tenant,kind},
// ssodir_stream_dead_letters_parked{consumer,system,tenant}, ssodir_stream_gaps_total
// {consumer,system,tenant}, ssodir_stream_read_retries_total{consumer,kind},
// ssodir_stream_parked{consumer,system,tenant} (1 while a handler holds one of the tenant's
// streams with Park) and ssodir_stream_parked_records{consumer,system,tenant} (records
// waiting behind it), ssodir_stream_get_records_total{consumer,result},
// ssodir_stream_api_calls_total{consumer,call}.
//
// Series per tenant and consumer: lag_seconds, 1 for a tenant that had traffic. The dead-letter,
// gap and park series of a tenant exist only while it has dead letters, had a gap, or is
// parked.
package streams
