// Package process is the start-up plumbing the ssodir binaries share: Main (signals, one
// exit), the logger, the metrics registry, the secret box chosen by configuration, the
// one-line error a failed start prints, and the two service shapes — HTTPService for the
// APIs and Consumer for the stream consumers.
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ssodir/ssodir/internal/awscalls"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/secrets"
)

// NewLogger is a JSON logger on stderr at the configured level.
func NewLogger(service string, level zapcore.Level) (*zap.Logger, error) {
	return NewLoggerTo(service, level, nil)
}

// NewLoggerTo is NewLogger writing to w instead of stderr (nil: stderr), so that tests can
// read what a process logs.
func NewLoggerTo(service string, level zapcore.Level, w io.Writer) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.OutputPaths = []string{"stderr"}
	// Errors are wrapped with their context; a stack trace on each adds only noise.
	cfg.DisableStacktrace = true
	cfg.EncoderConfig.TimeKey = "time"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	var opts []zap.Option
	if w != nil {
		opts = append(opts, zap.WrapCore(func(zapcore.Core) zapcore.Core {
			return zapcore.NewCore(zapcore.NewJSONEncoder(cfg.EncoderConfig), zapcore.AddSync(w), cfg.Level)
		}))
	}
	log, err := cfg.Build(opts...)
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return log.With(zap.String("service", service)), nil
}

// NewSecrets is the secret box: AWS KMS when a key id is configured, else the local key.
func NewSecrets(ctx context.Context, c config.Common, awsCfg aws.Config) (*secrets.Box, error) {
	if c.KMSKeyID != "" {
		return secrets.NewKMS(ctx, kms.NewFromConfig(awsCfg), c.KMSKeyID)
	}
	if c.SecretKey == nil {
		return nil, errors.New("no secret key configured")
	}
	return secrets.NewLocal(c.SecretKey)
}

// NewClients is the process's AWS clients, from its configuration: when SSO_AWS_CALL_LOG
// is set, every call they make is recorded there (internal/awscalls).
func NewClients(ctx context.Context, service string, c config.Common) (*dynamo.Clients, error) {
	var configure []func(*aws.Config)
	if c.AWSCallLog != "" {
		rec, err := awscalls.New(c.AWSCallLog, service, c.TablePrefix)
		if err != nil {
			return nil, err
		}
		configure = append(configure, rec.Attach)
	}
	return dynamo.NewClients(ctx, c.DynamoEndpoint, c.StreamsEndpoint, configure...)
}

// Role is the name a process's AWS calls are recorded under: the service's own, or
// "<service>-admin" for an operator's command (replay, reconcile, dead-letters, status),
// which runs with the operator's credentials, not the function's role.
func Role(service string, args []string) string {
	if len(args) > 0 {
		return service + "-admin"
	}
	return service
}

// TableSettings are the settings of the tables the process creates, from its configuration.
func TableSettings(c config.Common) dynamo.TableSettings {
	t := c.Tables
	return dynamo.TableSettings{Stage: t.Stage, PointInTimeRecovery: t.PointInTimeRecovery,
		DeletionProtection: t.DeletionProtection, KMSKey: t.KMSKey, SystemTablesExist: t.SystemTablesExist}
}

// OneLine folds an error (possibly joined from several) into one line.
func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// Exit prints err on one line, prefixed with the binary's name, and exits non-zero; nil
// exits 0. It is the one place a binary exits.
func Exit(name string, err error) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, OneLine(err))
	os.Exit(1)
}

// WatermillLogger adapts zap to watermill's logger.
func WatermillLogger(log *zap.Logger) watermill.LoggerAdapter { return wmLogger{log: log} }

type wmLogger struct{ log *zap.Logger }

func fields(f watermill.LogFields) []zap.Field {
	out := make([]zap.Field, 0, len(f))
	for k, v := range f {
		out = append(out, zap.Any(k, v))
	}
	return out
}

func (l wmLogger) Error(msg string, err error, f watermill.LogFields) {
	l.log.Error(msg, append(fields(f), zap.Error(err))...)
}
func (l wmLogger) Info(msg string, f watermill.LogFields)  { l.log.Info(msg, fields(f)...) }
func (l wmLogger) Debug(msg string, f watermill.LogFields) { l.log.Debug(msg, fields(f)...) }
func (l wmLogger) Trace(msg string, f watermill.LogFields) { l.log.Debug(msg, fields(f)...) }
func (l wmLogger) With(f watermill.LogFields) watermill.LoggerAdapter {
	return wmLogger{log: l.log.With(fields(f)...)}
}

// CPUProfile starts a CPU profile of the process into "<prefix>.<pid>" when prefix is set
// (SSO_CPU_PROFILE: for finding where a service's time goes under `make bench`) and
// returns what ends it; without a prefix it does nothing.
func CPUProfile(prefix string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "SSO_CPU_PROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "SSO_CPU_PROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
