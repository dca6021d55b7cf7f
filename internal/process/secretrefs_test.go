package process

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/config"
)

// secretsManager answers GetSecretValue for the secrets it holds, as AWS does.
func secretsManager(t *testing.T, secrets map[string]string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ SecretId string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		v, ok := secrets[req.SecretId]
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || !ok {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the specified secret."})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"ARN": req.SecretId, "SecretString": v})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", srv.URL)
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "dummy")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "dummy")
}

const cursorARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ssodir/prod/cursor-key-AbCdEf"

func TestSecretsGivenByReferenceAreReadOnceAtStart(t *testing.T) {
	secretsManager(t, map[string]string{cursorARN: "the-cursor-key"})
	env := config.Map(map[string]string{"SSO_CURSOR_KEY_SECRET_ARN": cursorARN, "SSO_TABLE_PREFIX": "p"})
	got, err := ResolveSecrets(context.Background(), "query-api", env)
	if err != nil {
		t.Fatal(err)
	}
	if got.Value("SSO_CURSOR_KEY") != "the-cursor-key" || got.Value("SSO_TABLE_PREFIX") != "p" {
		t.Errorf("SSO_CURSOR_KEY %q, SSO_TABLE_PREFIX %q", got.Value("SSO_CURSOR_KEY"), got.Value("SSO_TABLE_PREFIX"))
	}
}

func TestASecretThatCannotBeReadStopsTheStart(t *testing.T) {
	secretsManager(t, map[string]string{})
	env := config.Map(map[string]string{"SSO_CURSOR_KEY_SECRET_ARN": cursorARN})
	_, err := ResolveSecrets(context.Background(), "query-api", env)
	if err == nil || !strings.Contains(err.Error(), "SSO_CURSOR_KEY_SECRET_ARN") {
		t.Errorf("error %v, want one naming SSO_CURSOR_KEY_SECRET_ARN", err)
	}
}

func TestWithoutReferencesNothingIsAsked(t *testing.T) {
	env := config.Map(map[string]string{"SSO_CURSOR_KEY": "k"})
	got, err := ResolveSecrets(context.Background(), "query-api", env)
	if err != nil || got.Value("SSO_CURSOR_KEY") != "k" {
		t.Errorf("%v, %q", err, got.Value("SSO_CURSOR_KEY"))
	}
}
