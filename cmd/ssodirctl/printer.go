package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/spf13/cobra"
	"github.com/ssodir/ssodir/client"
)

// printer writes objects as a table, JSON or YAML (-o). JSON and YAML keep the API's own
// field names; a list is an array.
type printer struct {
	w      io.Writer
	format string
}

// one prints a single object.
func (p *printer) one(v any, header []string, row []string) error {
	switch p.format {
	case "json":
		return p.json(v)
	case "yaml":
		return p.yaml(v)
	}
	return p.table(header, [][]string{row})
}

// list prints a list of objects (rows hold the table's cells for each).
func (p *printer) list(items any, header []string, rows [][]string) error {
	switch p.format {
	case "json":
		return p.json(items)
	case "yaml":
		return p.yaml(items)
	}
	return p.table(header, rows)
}

func (p *printer) json(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// yaml goes through JSON so that the keys are the API's (snake_case) names.
func (p *printer) yaml(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return err
	}
	enc := yaml.NewEncoder(p.w)
	enc.SetIndent(2)
	if err := enc.Encode(generic); err != nil {
		return err
	}
	return enc.Close()
}

func (p *printer) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

var (
	userHeader     = []string{"USERNAME", "EMAIL", "FIRST NAME", "LAST NAME", "ACTIVE", "VERSION", "UPDATED"}
	groupHeader    = []string{"NAME", "DESCRIPTION", "VERSION", "UPDATED"}
	activityHeader = []string{"OCCURRED", "TYPE", "ENTITY", "ACTOR", "VERSION", "CHANGED"}
	tenantHeader   = []string{"SYSTEM", "TENANT", "STATUS", "KEYCLOAK", "UPDATED"}
)

func userRow(u client.User) []string {
	return []string{u.Username, u.Email, u.FirstName, u.LastName, strconv.FormatBool(u.IsActive), strconv.FormatInt(u.Version, 10), u.UpdatedAt}
}

func groupRow(g client.Group) []string {
	return []string{g.Name, g.Description, strconv.FormatInt(g.Version, 10), g.UpdatedAt}
}

func activityRow(a client.Activity) []string {
	fields := make([]string, 0, len(a.Changes))
	for f := range a.Changes {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	return []string{a.OccurredAt, a.Type, a.Entity, a.Actor, strconv.FormatInt(a.Version, 10), strings.Join(fields, ",")}
}

func tenantRow(t client.Tenant) []string {
	kc := "-"
	if t.Keycloak != nil {
		kc = t.Keycloak.URL + " realm " + t.Keycloak.Realm
	}
	return []string{t.SystemID, t.TenantID, t.Status, kc, t.UpdatedAt}
}

// tenantListCommand is a `list` subcommand printing every item of one of --tenant's lists
// (its SCIM tokens, its webhooks), a row each; an empty list prints as [] in JSON.
func tenantListCommand[T any](s *settings, short, example string, list func(*client.TenantClient, context.Context) ([]T, error),
	header []string, row func(T) []string) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   short,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tc, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			items, err := list(tc, cmd.Context())
			if err != nil {
				return err
			}
			if items == nil {
				items = []T{}
			}
			rows := make([][]string, 0, len(items))
			for _, it := range items {
				rows = append(rows, row(it))
			}
			return p.list(items, header, rows)
		},
	}
}
