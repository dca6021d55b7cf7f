package keycloaksync

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/erasure"
)

// TestErasureDeletesTheKeycloakUserButNeverALaterOneOfTheName: the user.erased record
// deletes the person's Keycloak user and marks the erasure's keycloak place done; the same
// record delivered again after a new user took the freed name leaves the new user alone.
func TestErasureDeletesTheKeycloakUserButNeverALaterOneOfTheName(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	ledger := erasure.NewLedger(w.db, w.names)
	w.handler.cfg.Erasures = ledger
	w.exec(commands.CreateUser{Username: "zed", Email: "zed@example.com", FirstName: "Zed"})
	w.apply(w.records("user#zed")...)
	if _, ok := w.kc.UserByUsername(testRealm, "zed"); !ok {
		t.Fatal("no Keycloak user to erase")
	}
	id := uuid.NewString()
	d := commands.Deps{Store: w.store, Now: time.Now, NewID: uuid.NewString}
	if _, err := commands.NewEraseUserHandler(d).Handle(ctx, w.tenant, commands.EraseUser{Username: "zed", Reason: "a request", ErasureID: id},
		commands.Meta{Actor: "dpo", CommandID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	recs := w.records("user#zed")
	erased := recs[len(recs)-1]
	w.apply(erased)
	if _, ok := w.kc.UserByUsername(testRealm, "zed"); ok {
		t.Fatal("the erased user is still in Keycloak")
	}
	e, err := ledger.Get(ctx, w.tenant.System, w.tenant.ID, id)
	if err != nil || e.Places[commands.PlaceKeycloak] != "done" {
		t.Fatalf("ledger %+v, %v: want the keycloak place done", e, err)
	}

	// The erasure removes the partition (internal/erasure); a new zed takes the name.
	table := w.names.Commands(w.tenant.System, w.tenant.ID)
	out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: "user#zed"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if _, err := w.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}}); err != nil {
			t.Fatal(err)
		}
	}
	w.exec(commands.CreateUser{Username: "zed", Email: "zed@new.example"})
	w.apply(w.records("user#zed")...)
	w.apply(erased) // delivered again (a lease handover, a re-drive)
	if u, ok := w.kc.UserByUsername(testRealm, "zed"); !ok || u.Email != "zed@new.example" {
		t.Fatalf("the new zed is %+v (present %v), want them kept", u, ok)
	}
}
