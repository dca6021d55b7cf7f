package mappings

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"go.uber.org/zap"
)

// Upgrades. A mapping made by an older version keeps the settings it was made with — an
// upgrade that replaced the failure destination (the stage's shared StreamFailures queue
// gave way to one queue per consumer, and the old one is deleted) would leave every
// existing tenant's mappings sending the records ESM gives up on to a queue that is gone.
// So a mapping whose settings differ from those Ensure makes is updated in place
// (UpdateEventSourceMapping): by Ensure when it finds the mapping exists, and by Check,
// which reads every mapping every few minutes, so that every tenant's mappings follow an
// upgrade without a provisioning of their own. Enabled is left as it is (an operator may
// have disabled a mapping on purpose), and so is the starting position, which a mapping
// cannot change.

// want is the mapping Ensure makes from streamARN to fn.
func (m *Mappings) want(fn, streamARN string) *lambda.CreateEventSourceMappingInput {
	in := &lambda.CreateEventSourceMappingInput{
		FunctionName:                   aws.String(fn),
		EventSourceArn:                 aws.String(streamARN),
		StartingPosition:               types.EventSourcePositionTrimHorizon,
		BatchSize:                      aws.Int32(BatchSize),
		ParallelizationFactor:          aws.Int32(1),
		FunctionResponseTypes:          []types.FunctionResponseType{types.FunctionResponseTypeReportBatchItemFailures},
		BisectBatchOnFunctionError:     aws.Bool(true),
		MaximumRetryAttempts:           aws.Int32(MaximumRetryAttempts),
		MaximumRecordAgeInSeconds:      aws.Int32(MaximumRecordAgeSeconds),
		MaximumBatchingWindowInSeconds: aws.Int32(0),
		Enabled:                        aws.Bool(true),
	}
	if dest := m.cfg.FailureDestinations[fn]; dest != "" {
		in.DestinationConfig = &types.DestinationConfig{OnFailure: &types.OnFailure{Destination: aws.String(dest)}}
	}
	return in
}

func onFailure(d *types.DestinationConfig) string {
	if d == nil || d.OnFailure == nil {
		return ""
	}
	return aws.ToString(d.OnFailure.Destination)
}

// differs lists the settings in which the mapping e differs from want.
func differs(e types.EventSourceMappingConfiguration, want *lambda.CreateEventSourceMappingInput) []string {
	var d []string
	if onFailure(e.DestinationConfig) != onFailure(want.DestinationConfig) {
		d = append(d, "DestinationConfig")
	}
	for _, c := range []struct {
		name      string
		have, got *int32
	}{
		{"BatchSize", e.BatchSize, want.BatchSize},
		{"ParallelizationFactor", e.ParallelizationFactor, want.ParallelizationFactor},
		{"MaximumRetryAttempts", e.MaximumRetryAttempts, want.MaximumRetryAttempts},
		{"MaximumRecordAgeInSeconds", e.MaximumRecordAgeInSeconds, want.MaximumRecordAgeInSeconds},
		{"MaximumBatchingWindowInSeconds", e.MaximumBatchingWindowInSeconds, want.MaximumBatchingWindowInSeconds},
	} {
		if aws.ToInt32(c.have) != aws.ToInt32(c.got) {
			d = append(d, c.name)
		}
	}
	if aws.ToBool(e.BisectBatchOnFunctionError) != aws.ToBool(want.BisectBatchOnFunctionError) {
		d = append(d, "BisectBatchOnFunctionError")
	}
	if !slices.Equal(e.FunctionResponseTypes, want.FunctionResponseTypes) {
		d = append(d, "FunctionResponseTypes")
	}
	return d
}

// repair updates the mapping e of fn to the settings Ensure makes, if they differ; updated
// says whether it did. A mapping being created, updated or deleted is left for later.
func (m *Mappings) repair(ctx context.Context, fn string, e types.EventSourceMappingConfiguration) (updated bool, err error) {
	switch aws.ToString(e.State) {
	case "Creating", "Updating", "Deleting", "Enabling", "Disabling":
		return false, nil
	}
	want := m.want(fn, aws.ToString(e.EventSourceArn))
	diff := differs(e, want)
	if len(diff) == 0 {
		return false, nil
	}
	in := &lambda.UpdateEventSourceMappingInput{
		UUID: e.UUID, FunctionName: aws.String(fn),
		BatchSize: want.BatchSize, ParallelizationFactor: want.ParallelizationFactor, FunctionResponseTypes: want.FunctionResponseTypes,
		BisectBatchOnFunctionError: want.BisectBatchOnFunctionError, MaximumRetryAttempts: want.MaximumRetryAttempts,
		MaximumRecordAgeInSeconds: want.MaximumRecordAgeInSeconds, MaximumBatchingWindowInSeconds: want.MaximumBatchingWindowInSeconds,
		DestinationConfig: want.DestinationConfig,
	}
	if in.DestinationConfig == nil {
		in.DestinationConfig = &types.DestinationConfig{OnFailure: &types.OnFailure{}} // none: removes the old one
	}
	if err := m.call(ctx, func(ctx context.Context) error {
		_, err := m.lambda.UpdateEventSourceMapping(ctx, in)
		return err
	}); err != nil {
		return false, fmt.Errorf("update event source mapping %s of %s: %w", aws.ToString(e.UUID), fn, err)
	}
	m.cfg.Log.Info("event source mapping updated to this version's settings", zap.String("function", fn),
		zap.String("stream", aws.ToString(e.EventSourceArn)), zap.String("uuid", aws.ToString(e.UUID)), zap.Strings("changed", diff))
	return true, nil
}

// repairExisting reads the mapping of streamARN to fn that Lambda says exists, and repairs it.
func (m *Mappings) repairExisting(ctx context.Context, fn, streamARN string) error {
	in := &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(fn), EventSourceArn: aws.String(streamARN), MaxItems: aws.Int32(100)}
	var out *lambda.ListEventSourceMappingsOutput
	if err := m.call(ctx, func(ctx context.Context) (err error) {
		out, err = m.lambda.ListEventSourceMappings(ctx, in)
		return err
	}); err != nil {
		return fmt.Errorf("read the event source mapping of %s to %s: %w", streamARN, fn, err)
	}
	for _, e := range out.EventSourceMappings {
		if aws.ToString(e.EventSourceArn) != streamARN {
			continue
		}
		if _, err := m.repair(ctx, fn, e); err != nil {
			return err
		}
	}
	return nil
}
