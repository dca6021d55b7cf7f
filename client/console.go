package client

import (
	"context"
	"net/http"
)

// ConsoleSignInCode is a one-time code that signs the web console in with the development
// token: open <query API>/console/#/signin?code=<Code> before ExpiresAt (a minute).
type ConsoleSignInCode struct {
	Code      string `json:"code"`
	ExpiresAt string `json:"expires_at"`
}

// MintConsoleSignInCode asks the query API for a one-time console sign-in code. Only a
// development installation serves it (SSO_BOOTSTRAP_TOKEN set), and only to the client
// whose token is that development token: a JWT is refused (403).
func (c *Client) MintConsoleSignInCode(ctx context.Context) (*ConsoleSignInCode, error) {
	var out ConsoleSignInCode
	if _, err := c.call(ctx, c.query, http.MethodPost, "/console/dev-codes", nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
