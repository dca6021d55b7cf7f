package streams

import (
	"fmt"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"
)

// SetFailureReason records why a handler is about to nack msg. If the record's retries
// run out, the reason is stored with its dead letter; without it the dead letter only
// says that the handler nacked.
func SetFailureReason(msg *message.Message, err error) {
	if err == nil {
		return
	}
	msg.Metadata.Set(MetaFailureReason, truncate(err.Error(), maxReason))
}

// FailureReason is a watermill handler middleware that records a failing handler's error
// (or panic) on the message with SetFailureReason before the router nacks it. Add it
// first (outermost) so it sees the final error after any retry middleware.
func FailureReason(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) (out []*message.Message, err error) {
		defer func() {
			// The router would recover the panic too, but without telling us why.
			if p := recover(); p != nil {
				err = fmt.Errorf("handler panic: %v", p)
			}
			SetFailureReason(msg, err)
		}()
		return h(msg)
	}
}

// maxReason bounds a failure reason: a handler error can embed a whole response body.
const maxReason = 4000

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
