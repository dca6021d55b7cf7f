package streams

import (
	"errors"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// errLeaseLost means a conditional write found the lease held by someone else (or by a
// newer lease of ours): the shard must be let go without writing anything more.
var errLeaseLost = errors.New("lease lost")

// The SDK's errors are read in internal/dynamo/sdkerr; these names keep the call sites short.
var (
	isExpiredIterator  = sdkerr.ExpiredIterator
	isTrimmed          = sdkerr.Trimmed
	isResourceNotFound = sdkerr.ResourceNotFound
	isConditionFailed  = sdkerr.ConditionFailed
	isResourceInUse    = sdkerr.ResourceInUse
	// readErrorKind says why a Streams call failed, for the retry metric and log level.
	// Everything but expiry, trimming and a missing resource is retried with backoff on
	// the same iterator; the kinds only say why.
	readErrorKind = sdkerr.StreamReadKind
)
