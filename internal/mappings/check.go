package mappings

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"go.uber.org/zap"
)

// Log lines of Check, which the stage's metric filters count (deploy/alarms.go): one per
// mapping that does not poll, and one per check, whose absence means the check stopped.
const (
	LogNotPolling = "event source mapping not polling"
	LogChecked    = "event source mappings checked"
)

// Checked is what Check found.
type Checked struct {
	Mappings, NotPolling int
	// Updated counts the mappings brought to this version's settings (update.go).
	Updated int
}

// Check reads the state of every mapping of each function (ListEventSourceMappings, the one
// call it makes) and logs each that does not poll: Disabled or Disabling (Lambda disables a
// mapping that lost access to its stream or function), or whose poller reports a PROBLEM.
// A consumer that stops polling publishes no IteratorAge at all, so this check, not the
// iterator age, is what notices it. Mappings being created, updated or deleted are fine.
// A mapping whose settings are an older version's is updated (update.go): this is how the
// mappings of existing tenants follow an upgrade.
func (m *Mappings) Check(ctx context.Context) (Checked, error) {
	var c Checked
	for _, fn := range m.cfg.Functions {
		in := &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(fn), MaxItems: aws.Int32(100)}
		for {
			var out *lambda.ListEventSourceMappingsOutput
			err := m.call(ctx, func(ctx context.Context) (err error) {
				out, err = m.lambda.ListEventSourceMappings(ctx, in)
				return err
			})
			if err != nil {
				return c, fmt.Errorf("list the event source mappings of %s: %w", fn, err)
			}
			for _, e := range out.EventSourceMappings {
				c.Mappings++
				state, result := aws.ToString(e.State), aws.ToString(e.LastProcessingResult)
				if state == "Disabled" || state == "Disabling" || strings.HasPrefix(result, "PROBLEM") {
					c.NotPolling++
					m.cfg.Log.Warn(LogNotPolling, zap.String("function", fn), zap.String("uuid", aws.ToString(e.UUID)),
						zap.String("stream", aws.ToString(e.EventSourceArn)), zap.String("state", state),
						zap.String("state_reason", aws.ToString(e.StateTransitionReason)), zap.String("last_result", result))
				}
				updated, err := m.repair(ctx, fn, e)
				if err != nil {
					return c, err
				}
				if updated {
					c.Updated++
				}
			}
			if aws.ToString(out.NextMarker) == "" {
				break
			}
			in.Marker = out.NextMarker
		}
	}
	m.cfg.Log.Info(LogChecked, zap.Int("mappings", c.Mappings), zap.Int("not_polling", c.NotPolling), zap.Int("updated", c.Updated))
	return c, nil
}
