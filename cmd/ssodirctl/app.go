package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"
	"golang.org/x/term"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/config"
)

// Exit codes, documented in --help.
const (
	exitOK         = 0
	exitFailure    = 1 // the API or the network failed, or something unexpected
	exitUsage      = 2 // bad flags or arguments, or input the API rejects (400)
	exitNotFound   = 3 // an unknown tenant, user or group
	exitConflict   = 4 // a name or email taken, a stale --if-match, a reused key
	exitIncomplete = 5 // an import or export finished with lines it could not bring in
)

const exitCodesHelp = `Exit codes:
  0  success
  1  failure: the API or the network failed
  2  usage: bad flags or arguments, or input the API rejected (400)
  3  not found: an unknown tenant, user or group
  4  conflict: a username, email or group name taken, a stale --if-match, a reused key
  5  incomplete: an import finished with invalid lines or conflicts (see its summary)
`

const envHelp = `Environment (flags win over it):
  SSODIR_COMMAND_URL     command API base URL (default http://127.0.0.1:8080)
  SSODIR_QUERY_URL       query API base URL (default http://127.0.0.1:8081)
  SSODIR_SYSTEM          system of the tenant to work in
  SSODIR_TENANT          tenant to work in
  SSODIR_TOKEN           bearer token (a JWT, or the development bootstrap token)
  SSODIR_TOKEN_FILE      file holding the bearer token
  SSODIR_OIDC_TOKEN_URL, SSODIR_OIDC_CLIENT_ID, SSODIR_OIDC_CLIENT_SECRET
                         get tokens with the client credentials grant instead
  SSODIR_OUTPUT          table, json or yaml (default table)
`

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitError carries an exit code chosen by a command (an incomplete import).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// settings are the global flags, defaulted from SSODIR_* variables.
type settings struct {
	commandURL, queryURL string
	system, tenant       string
	tokenFile            string
	oidcTokenURL         string
	oidcClientID         string
	output               string

	env config.Env
	io  stdio
	// httpClient is for tests; nil means the client's default.
	httpClient *http.Client
}

func (s *settings) client(ctx context.Context) (*client.Client, error) {
	var ts oauth2.TokenSource
	switch {
	case s.oidcTokenURL != "":
		secret := s.env.Value("SSODIR_OIDC_CLIENT_SECRET")
		if s.oidcClientID == "" || secret == "" {
			return nil, usagef("--oidc-token-url needs --oidc-client-id and SSODIR_OIDC_CLIENT_SECRET")
		}
		ts = client.ClientCredentials(context.WithoutCancel(ctx), s.oidcTokenURL, s.oidcClientID, secret)
	case s.tokenFile != "":
		b, err := os.ReadFile(s.tokenFile)
		if err != nil {
			return nil, usagef("token file: %v", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, usagef("token file %s is empty", s.tokenFile)
		}
		ts = client.StaticToken(tok)
	case s.env.Value("SSODIR_TOKEN") != "":
		ts = client.StaticToken(strings.TrimSpace(s.env.Value("SSODIR_TOKEN")))
	default:
		return nil, usagef("no token: set SSODIR_TOKEN, or --token-file, or --oidc-token-url with a client id and secret")
	}
	c, err := client.New(client.Config{CommandURL: s.commandURL, QueryURL: s.queryURL, Token: ts, HTTPClient: s.httpClient, UserAgent: "ssodirctl",
		OnRetry: retryNote(s.io.err, s.commandURL, s.queryURL)})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return c, nil
}

// tenantClient is the client scoped to --system and --tenant.
func (s *settings) tenantClient(ctx context.Context) (*client.TenantClient, error) {
	if s.system == "" || s.tenant == "" {
		return nil, usagef("which tenant? set --system and --tenant (or SSODIR_SYSTEM and SSODIR_TENANT)")
	}
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Tenant(s.system, s.tenant), nil
}

// tenantPrinter is the client scoped to --system and --tenant, and the printer of
// --output: what most commands on a tenant start with.
func (s *settings) tenantPrinter(ctx context.Context) (*client.TenantClient, *printer, error) {
	tc, err := s.tenantClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.printer()
	if err != nil {
		return nil, nil, err
	}
	return tc, p, nil
}

// systemClient is the client and printer for a command on --system's tenants.
func (s *settings) systemClient(ctx context.Context) (*client.Client, *printer, error) {
	if s.system == "" {
		return nil, nil, usagef("which system? set --system (or SSODIR_SYSTEM)")
	}
	c, err := s.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.printer()
	if err != nil {
		return nil, nil, err
	}
	return c, p, nil
}

func (s *settings) printer() (*printer, error) {
	switch s.output {
	case "table", "json", "yaml":
		return &printer{w: s.io.out, format: s.output}, nil
	}
	return nil, usagef("--output %q: want table, json or yaml", s.output)
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func newRoot(s *settings) *cobra.Command {
	root := &cobra.Command{
		Use:   "ssodirctl",
		Short: "Administer an ssodir directory: users, groups, tenants, imports and exports",
		Long: `ssodirctl administers an ssodir directory through its command and query APIs.

` + envHelp + "\n" + exitCodesHelp,
		Example: `  export SSODIR_TOKEN=... SSODIR_SYSTEM=acme SSODIR_TENANT=eu
  ssodirctl tenants create eu
  ssodirctl users create jdoe --email jdoe@example.com --first-name Jane --last-name Doe
  ssodirctl users list --last-name-prefix do -o json
  ssodirctl import users people.csv
  ssodirctl export users > backup.jsonl`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f := root.PersistentFlags()
	f.StringVar(&s.commandURL, "command-url", orDefault(s.env.Value("SSODIR_COMMAND_URL"), "http://127.0.0.1:8080"), "command API base URL")
	f.StringVar(&s.queryURL, "query-url", orDefault(s.env.Value("SSODIR_QUERY_URL"), "http://127.0.0.1:8081"), "query API base URL")
	f.StringVarP(&s.system, "system", "s", s.env.Value("SSODIR_SYSTEM"), "system of the tenant")
	f.StringVarP(&s.tenant, "tenant", "t", s.env.Value("SSODIR_TENANT"), "tenant to work in")
	f.StringVar(&s.tokenFile, "token-file", s.env.Value("SSODIR_TOKEN_FILE"), "file holding the bearer token (else SSODIR_TOKEN)")
	f.StringVar(&s.oidcTokenURL, "oidc-token-url", s.env.Value("SSODIR_OIDC_TOKEN_URL"), "token endpoint for the client credentials grant")
	f.StringVar(&s.oidcClientID, "oidc-client-id", s.env.Value("SSODIR_OIDC_CLIENT_ID"), "client id for the client credentials grant (secret: SSODIR_OIDC_CLIENT_SECRET)")
	f.StringVarP(&s.output, "output", "o", orDefault(s.env.Value("SSODIR_OUTPUT"), "table"), "output format: table, json or yaml")
	root.SetIn(s.io.in)
	root.SetOut(s.io.out)
	root.SetErr(s.io.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	root.AddCommand(usersCommand(s), groupsCommand(s), activityCommand(s), tenantsCommand(s), scimTokensCommand(s), importCommand(s), exportCommand(s), consoleLinkCommand(s), erasuresCommand(s), eventsCommand(s), webhooksCommand(s), accessReportCommand(s))
	return root
}

// run executes one command line and returns the process's exit code.
func run(ctx context.Context, args []string, io stdio, env config.Env) int {
	return runWith(ctx, args, &settings{env: env, io: io})
}

func runWith(ctx context.Context, args []string, s *settings) int {
	root := newRoot(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(s.io.err, "ssodirctl:", err)
	return exitCode(err)
}

func exitCode(err error) int {
	var ue *usageError
	var ee *exitError
	var ae *client.Error
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ae):
		switch {
		case ae.Status == http.StatusNotFound:
			return exitNotFound
		case ae.Status == http.StatusConflict || ae.Status == http.StatusPreconditionFailed || ae.Status == http.StatusUnprocessableEntity:
			return exitConflict
		case ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusUnauthorized && ae.Status != http.StatusForbidden:
			return exitUsage
		}
	case apperr.KindOf(err) == apperr.KindNotFound:
		// A command that reads the stage's tables itself (`erasures resume` of an unknown
		// erasure, an unknown tenant): not found, as the API's 404.
		return exitNotFound
	case strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "accepts ") ||
		strings.HasPrefix(err.Error(), "requires ") || strings.Contains(err.Error(), "arg(s)"):
		return exitUsage
	}
	return exitFailure
}

// isTerminal reports whether r or w is a terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// group is a command that only holds subcommands: alone it prints its help, with an
// unknown subcommand it is a usage error (cobra would print the help and exit 0).
func group(use, short string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
}
