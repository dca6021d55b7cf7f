package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// consoleLinkCommand prints a web console link that signs in once, within a minute, with
// the development token: the link carries a one-time code, never the token, so the copy
// the browser's history keeps signs no one in.
func consoleLinkCommand(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:   "console-link",
		Short: "Print a one-time sign-in link to the web console (development installations)",
		Long: `Print a link to the web console that signs in with the development token
(SSO_BOOTSTRAP_TOKEN, which must be this command's token too). The link holds a
one-time code valid for one minute, never the token; open it at once. With --system and
--tenant it opens that tenant.`,
		Example: `  SSODIR_TOKEN=$(cat .data/dev-token) ssodirctl console-link --system demo --tenant acme`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := s.client(cmd.Context())
			if err != nil {
				return err
			}
			code, err := c.MintConsoleSignInCode(cmd.Context())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(s.io.out, consoleLink(s.queryURL, code.Code, s.system, s.tenant))
			return err
		},
	}
}

// consoleLink is the console's sign-in route with the code (and the tenant to open) in its
// fragment, which never reaches a server.
func consoleLink(queryURL, code, system, tenant string) string {
	q := url.Values{"code": {code}}
	if system != "" && tenant != "" {
		q.Set("tenant", system+"/"+tenant)
	}
	return strings.TrimRight(queryURL, "/") + "/console/#/signin?" + q.Encode()
}
