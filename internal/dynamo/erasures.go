package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
)

// Erasures is `{p}_erasures`, the erasure ledger (docs/erasure.md): one PII-free item per
// erasure, kept for ever, so that a restored backup can be erased again.
func (n Names) Erasures() string { return n.Prefix + "_erasures" }

// ErasuresTable is the ledger's spec: pk `tenant` (`<system>/<tenant>`), sk `erasure_id`.
func ErasuresTable(name string) TableSpec {
	return TableSpec{Input: table(name, []string{"tenant", "erasure_id"}, "tenant", "erasure_id")}
}

// ErasureStatusPending and ErasureStatusDone are an erasure's and its places' states.
const (
	ErasureStatusPending = "pending"
	ErasureStatusDone    = "done"
)

// ErasureLedgerPut is the Put of a new erasure's ledger entry: every place pending.
func ErasureLedgerPut(table, system, tenant string, e commands.Erasure) (*types.Put, error) {
	places := make(map[string]types.AttributeValue, len(e.Places))
	for _, p := range e.Places {
		places[p] = str(ErasureStatusPending)
	}
	item := map[string]types.AttributeValue{
		"tenant":       str(system + "/" + tenant),
		"erasure_id":   str(e.ID),
		"status":       str(ErasureStatusPending),
		"requested_at": str(FormatTime(e.RequestedAt)),
		"requested_by": str(e.Actor),
		"reason":       str(e.Reason),
		"places":       &types.AttributeValueMemberM{Value: places},
	}
	if e.AllIncarnations {
		item["all_incarnations"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if len(e.UserIDHashes) > 0 {
		item["user_id_hashes"] = &types.AttributeValueMemberSS{Value: e.UserIDHashes}
	}
	return &types.Put{
		TableName: aws.String(table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(erasure_id)"),
	}, nil
}
