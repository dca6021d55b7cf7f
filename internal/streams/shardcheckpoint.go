package streams

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// saveCheckpoint writes progress; it reports true when the lease turned out to be lost.
func (w *shardWorker) saveCheckpoint(ctx context.Context) bool {
	if w.lastDone == "" || w.lastDone == w.checkpoint {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := w.s.leases.checkpoint(cctx, w.stream.StreamARN, w.shardID, w.s.cfg.Owner, w.token, w.lastDone)
	cancel()
	switch {
	case errors.Is(err, errLeaseLost):
		w.log.Warn("checkpoint refused: another process holds the lease; stopping the shard without writing",
			zap.String("sequence_number", w.lastDone))
		return true
	case err != nil:
		if ctx.Err() == nil {
			w.log.Warn("checkpoint failed; retrying at the next interval", zap.Error(err))
		}
		return false
	}
	w.checkpoint = w.lastDone
	return false
}

// finish checkpoints the end of a closed shard, all its records done, and gives the
// lease up; the children become eligible. It reports whether that was written.
func (w *shardWorker) finish(ctx context.Context) (bool, error) {
	err := w.retryIO(ctx, "finish shard", func(ctx context.Context) error {
		return w.s.leases.release(ctx, w.stream.StreamARN, w.shardID, w.s.cfg.Owner, w.token, shardEnd)
	})
	switch {
	case err == nil:
		w.log.Info("shard finished", zap.String("last_sequence_number", w.lastDone))
		w.noteRelease()
		return true, nil
	case errors.Is(err, errLeaseLost):
		w.log.Warn("lease lost before the shard's end could be checkpointed; its new holder finishes it")
	}
	return false, err
}

// release writes the last checkpoint and gives the lease up.
func (w *shardWorker) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := w.s.leases.release(ctx, w.stream.StreamARN, w.shardID, w.s.cfg.Owner, w.token, w.lastDone)
	switch {
	case errors.Is(err, errLeaseLost):
		w.log.Warn("lease already taken over at release; nothing written")
		return nil
	case err != nil:
		w.log.Error("release of lease failed; peers take it when our heartbeat row is gone", zap.Error(err))
		return err
	}
	w.log.Info("shard lease released", zap.String("checkpoint", w.lastDone))
	w.noteRelease()
	return nil
}

// noteRelease tells peers there may be a shard to take (its children, or itself); if
// that fails they find it at their next full read.
func (w *shardWorker) noteRelease() {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := w.s.leases.noteRelease(ctx, w.s.cfg.Owner); err != nil {
		w.log.Warn("noting the release for peers failed; they see it at their next full read", zap.Error(err))
	}
}

// retryIO runs fn until it succeeds, the lease is lost, or the worker stops.
func (w *shardWorker) retryIO(ctx context.Context, what string, fn func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(cctx)
		cancel()
		if err == nil || errors.Is(err, errLeaseLost) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.log.Warn(what+" failed; retrying", zap.Int("attempt", attempt), zap.Error(err))
		t := time.NewTimer(backoff(w.s.cfg.RetryBackoff, w.s.cfg.MaxRetryBackoff, attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-w.graceful:
			t.Stop()
			return errStopping
		}
	}
}
