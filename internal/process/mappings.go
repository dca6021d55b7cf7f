package process

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/mappings"
)

// NewMappings is Lambda mode's event source mappings (SSO_LAMBDA_*), over the process's
// AWS configuration (its calls recorded like every other).
func NewMappings(awsCfg aws.Config, c config.Lambda, log *zap.Logger) *mappings.Mappings {
	client := lambda.NewFromConfig(awsCfg, func(o *lambda.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
	return mappings.New(client, mappings.Config{Functions: []string{c.ProjectorARN, c.KeycloakSyncARN},
		FailureDestinations: map[string]string{c.ProjectorARN: c.ProjectorFailureARN, c.KeycloakSyncARN: c.KeycloakSyncFailureARN},
		Log:                 log.Named("mappings")})
}
