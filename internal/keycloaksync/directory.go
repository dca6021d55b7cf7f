// Package keycloaksync is the keycloak-sync process's logic: it turns each tenant's
// directory events into Keycloak calls (Handler, through internal/keycloak's Syncer),
// writing the write model's current state rather than the record's; parks a tenant whose
// realm fails, so that its records wait in order without holding delivery slots (Health);
// runs full reconciles of each tenant's realm against its read model, spread over the
// interval and re-checked action by action against the write model (Reconciler); re-drives
// dead letters tenant by tenant (Redrive); and records what it did per tenant for
// `keycloak-sync status`. docs/keycloak-sync.md has the rules.
package keycloaksync

import (
	"context"
	"fmt"
	"iter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/projections"
)

// QueryDB is the read access the directory needs.
type QueryDB interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Directory is a tenant's directory as its read model holds it, paged with Queries on the
// read table's GSIs (never a Scan).
type Directory struct {
	db    QueryDB
	table string
}

var _ keycloak.Directory = (*Directory)(nil)

// NewDirectory reads the directory from a tenant's current read table.
func NewDirectory(db QueryDB, usersTable string) *Directory {
	return &Directory{db: db, table: usersTable}
}

func (d *Directory) query(ctx context.Context, index, keyAttr, keyValue string, yield func(map[string]types.AttributeValue) bool) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#k = :v"),
		ExpressionAttributeNames:  map[string]string{"#k": keyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: keyValue}},
	}
	p := dynamodb.NewQueryPaginator(d.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("read %s of %s: %w", index, d.table, dynamo.TranslateRead(err))
		}
		for _, it := range page.Items {
			if !yield(it) {
				return nil
			}
		}
	}
	return nil
}

// Groups are the live groups, by name.
func (d *Directory) Groups(ctx context.Context) iter.Seq2[keycloak.DirectoryGroup, error] {
	return func(yield func(keycloak.DirectoryGroup, error) bool) {
		var decodeErr error
		err := d.query(ctx, dynamo.IndexGroupName, "kind", "group", func(it map[string]types.AttributeValue) bool {
			g, err := projections.DecodeGroup(it)
			if err != nil {
				decodeErr = err
				return false
			}
			return yield(keycloak.DirectoryGroup{ID: g.GroupID, Name: g.Name, Description: g.Description, Attributes: g.Attributes, Version: g.Version}, nil)
		})
		if err = firstErr(decodeErr, err); err != nil {
			yield(keycloak.DirectoryGroup{}, err)
		}
	}
}

// Users are the live users with the ids of their groups.
func (d *Directory) Users(ctx context.Context) iter.Seq2[keycloak.DirectoryUser, error] {
	return func(yield func(keycloak.DirectoryUser, error) bool) {
		groupsOf, err := d.memberships(ctx)
		if err != nil {
			yield(keycloak.DirectoryUser{}, err)
			return
		}
		var decodeErr error
		err = d.query(ctx, dynamo.IndexUserUpdatedAt, "kind", "user", func(it map[string]types.AttributeValue) bool {
			u, err := projections.DecodeUser(it)
			if err != nil {
				decodeErr = err
				return false
			}
			return yield(keycloak.DirectoryUser{
				ID: u.UserID, Username: u.Username, Email: u.Email, FirstName: u.FirstName, LastName: u.LastName,
				Active: u.IsActive, Attributes: u.Attributes, Version: u.Version, Groups: groupsOf[u.Username],
			}, nil)
		})
		if err = firstErr(decodeErr, err); err != nil {
			yield(keycloak.DirectoryUser{}, err)
		}
	}
}

// memberships maps usernames to the ids of their groups, group by group.
func (d *Directory) memberships(ctx context.Context) (map[string][]string, error) {
	type group struct{ key, id string }
	var groups []group
	var decodeErr error
	err := d.query(ctx, dynamo.IndexGroupName, "kind", "group", func(it map[string]types.AttributeValue) bool {
		g, err := projections.DecodeGroup(it)
		if err != nil {
			decodeErr = err
			return false
		}
		groups = append(groups, group{key: g.Key, id: g.GroupID})
		return true
	})
	if err = firstErr(decodeErr, err); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, g := range groups {
		err := d.query(ctx, dynamo.IndexGroupMember, "member_of", g.key, func(it map[string]types.AttributeValue) bool {
			m, err := projections.DecodeMembership(it)
			if err != nil {
				decodeErr = err
				return false
			}
			out[m.Username] = append(out[m.Username], g.id)
			return true
		})
		if err = firstErr(decodeErr, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
