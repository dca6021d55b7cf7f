package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// scimWalkPage is the count of the walk's pages: the 100, less at a scale too
// small for more than one page of it.
func scimWalkPage(n int) int { return max(1, min(100, n/4)) }

// benchSCIMWalk measures what a provider's full GET /Users walk costs: the tenant's users
// (scimUsers of the scale, seeded straight into the command table with every item a create
// writes) walked by cursor, scimWalkPage at a time, through a meter that counts the items
// DynamoDB returns to the command API. A page should read what it returns (its id lookups
// and its users; the token's row is kept a minute), the last no more than the first.
func benchSCIMWalk(ctx context.Context, b *bench, sc scale) (*result, error) {
	n := scimUsers[sc.Name]
	per := scimWalkPage(n)
	e, err := b.newEnv(ctx, sc.FreshDB)
	if err != nil {
		return nil, err
	}
	defer e.close()
	m, err := newMeter(e.local.Endpoint, e.db)
	if err != nil {
		return nil, err
	}
	defer m.close()
	api, err := e.start(ctx, "command-api", "SSO_PROVISION_WAIT=1m", "AWS_ENDPOINT_URL_DYNAMODB="+m.url)
	if err != nil {
		return nil, err
	}
	if err := e.provision(ctx, api); err != nil {
		return nil, err
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	items := make([]item, 0, 4*n)
	ids := make([]string, 0, n)
	for i := range n {
		u := benchUser("walk", i, at)
		items = append(items, userConfig(u), history(userCreated(u)), emailGuard(u))
		for _, l := range commands.UserLookups(u) {
			items = append(items, dynamo.LookupItem(l))
		}
		ids = append(ids, u.ID)
	}
	// The seeded lookups are counted as the base of the count of live users, and of its
	// blocks, as a tenant that counted them once has them.
	items = append(items, dynamo.LiveBaseItem(events.KindUser, n), dynamo.BlocksBaseItem(events.KindUser, ids))
	if err := batchWrite(ctx, e.db, e.commandsTable(), updateConcurrency, items); err != nil {
		return nil, fmt.Errorf("seed the walk's users: %w", err)
	}
	_, body, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+tenantPath()+"/scim-tokens", []byte(`{"name":"walk"}`))
	if err != nil {
		return nil, err
	}
	var tok struct{ Token string }
	if err := json.Unmarshal(body, &tok); err != nil {
		return nil, err
	}
	base := api.url() + "/scim/v2/" + benchSystem + "/" + benchTenant + "/Users"
	r := &result{
		Name: fmt.Sprintf("scim walk users=%d count=%d", n, per), Unit: "items", BaselineUnit: "items",
		What:         fmt.Sprintf("DynamoDB items the command API reads for the last page of a GET /Users walk by cursor (count=%d), with a SCIM token", per),
		BaselineWhat: "the items it reads for the first page of the same walk",
		Target:       &target{Of: "ratios", Key: "items", Max: ptrTo(1.2)},
		Notes: []string{"items are those DynamoDB returned to the command API (GetItem, Query, BatchGetItem), counted by a proxy; a COUNT Query's counted items count as read",
			"index_* are the same walk by startIndex (Okta's paging): its first page also reads the tenant's count of live users (its base item, seeded with the users, and the shards creates keep), its later pages read their page",
			"walk_items_per_user is the whole walk's items over the users (the issue's target: at most 2): one id lookup and one user each, and the SCIM token's row once per command API process and minute",
			"index_jump_* are single pages by startIndex that no walk led to (no bookmark: Okta's jump, or another process): near the first page (startIndex 2) and near the last; each reads the tenant's block counts (18 small items), the lookups of its block before the page, and its page, so the last should read no more than the first, whatever the tenant's size"},
	}
	for range sc.Reps {
		var pages []int
		last, cursor := 0, ""
		for {
			before := m.itemsRead()
			_, out, err := b.expect(ctx, http.StatusOK, "GET", fmt.Sprintf("%s?count=%d&cursor=%s", base, per, cursor), nil, "Authorization", "Bearer "+tok.Token)
			if err != nil {
				return nil, err
			}
			pages = append(pages, m.itemsRead()-before)
			var list struct {
				NextCursor   string `json:"nextCursor"`
				ItemsPerPage int    `json:"itemsPerPage"`
			}
			if err := json.Unmarshal(out, &list); err != nil {
				return nil, err
			}
			if list.ItemsPerPage > 0 {
				// When the users fill the last page exactly, an empty page follows it.
				last = pages[len(pages)-1]
			}
			if list.NextCursor == "" {
				break
			}
			cursor = list.NextCursor
		}
		total := 0
		for _, p := range pages {
			total += p
		}
		idx, err := indexWalk(ctx, b, m, base, tok.Token, per)
		if err != nil {
			return nil, err
		}
		jumpFirst, err := jumpItems(ctx, b, m, base, tok.Token, 2, per)
		if err != nil {
			return nil, err
		}
		lastStart := max(n-per, 3)
		if (lastStart-1)%per == 0 {
			lastStart-- // not where the walk left a bookmark
		}
		jumpLast, err := jumpItems(ctx, b, m, base, tok.Token, lastStart, per)
		if err != nil {
			return nil, err
		}
		r.add(map[string]float64{"items": float64(last), "walk_items": float64(total), "pages": float64(len(pages)),
			"walk_items_per_user": float64(total) / float64(n),
			"index_first_items":   float64(idx[0]), "index_last_items": float64(idx[len(idx)-1]),
			"index_walk_items_per_user": float64(sum(idx)) / float64(n),
			"index_jump_first_items":    float64(jumpFirst), "index_jump_last_items": float64(jumpLast)}, map[string]float64{"items": float64(pages[0])})
	}
	return r, nil
}

func ptrTo(v float64) *float64 { return &v }

// indexWalk walks the users by startIndex, per at a time, as Okta pages, and returns the
// items each full page read.
func indexWalk(ctx context.Context, b *bench, m *meter, base, token string, per int) ([]int, error) {
	var pages []int
	for start := 1; ; start += per {
		before := m.itemsRead()
		_, out, err := b.expect(ctx, http.StatusOK, "GET", fmt.Sprintf("%s?startIndex=%d&count=%d", base, start, per), nil, "Authorization", "Bearer "+token)
		if err != nil {
			return nil, err
		}
		var list struct {
			ItemsPerPage int `json:"itemsPerPage"`
		}
		if err := json.Unmarshal(out, &list); err != nil {
			return nil, err
		}
		if list.ItemsPerPage == 0 {
			break
		}
		pages = append(pages, m.itemsRead()-before)
		if list.ItemsPerPage < per {
			break
		}
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("the index walk found no users")
	}
	return pages, nil
}

// jumpItems is the items one page by startIndex (start, per) reads.
func jumpItems(ctx context.Context, b *bench, m *meter, base, token string, start, per int) (int, error) {
	before := m.itemsRead()
	if _, _, err := b.expect(ctx, http.StatusOK, "GET", fmt.Sprintf("%s?startIndex=%d&count=%d", base, start, per), nil, "Authorization", "Bearer "+token); err != nil {
		return 0, err
	}
	return m.itemsRead() - before, nil
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
