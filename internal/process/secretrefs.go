package process

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ssodir/ssodir/internal/awscalls"
	"github.com/ssodir/ssodir/internal/config"
)

// ResolveSecrets reads the secrets env names by reference (<variable>_SECRET_ARN, see
// config.SecretVariables) from AWS Secrets Manager, once, and returns env with their
// values; env itself when it names none. role is the name the calls are recorded under.
func ResolveSecrets(ctx context.Context, role string, env config.Env) (config.Env, error) {
	refs, err := config.LoadSecretRefs(env)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if len(refs.Refs) == 0 {
		return env, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if refs.AWSCallLog != "" {
		rec, err := awscalls.New(refs.AWSCallLog, role, refs.TablePrefix)
		if err != nil {
			return nil, err
		}
		rec.Attach(&cfg)
		defer rec.Close()
	}
	client := secretsmanager.NewFromConfig(cfg)
	values := map[string]string{}
	for name, arn := range refs.Refs {
		out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return nil, fmt.Errorf("read %s from %s%s: %w", name, name, config.SecretRefSuffix, err)
		}
		if out.SecretString == nil || *out.SecretString == "" {
			return nil, fmt.Errorf("%s%s: the secret has no string value", name, config.SecretRefSuffix)
		}
		values[name] = *out.SecretString
	}
	return env.WithValues(values), nil
}
