package awscalls_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/ssodir/ssodir/internal/awscalls"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/eventbridge/eventbridgetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// The recorder names each call as IAM authorises it: a transaction by its item actions on
// each table, a query on an index by the index, a stream read by its stream, a table by
// the prefix placeholder — whatever the call's outcome.
func TestRecordsEachCallAsIAMAuthorisesIt(t *testing.T) {
	ctx := context.Background()
	local := dynamotest.Current(t)
	dir := t.TempDir()
	prefix := dynamotest.UniqueName("rec")
	rec, err := awscalls.New(dir, "command-api", prefix)
	if err != nil {
		t.Fatal(err)
	}
	cfg := local.AWSConfig()
	rec.Attach(&cfg)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	st := dynamodbstreams.NewFromConfig(cfg)

	commands, other := prefix+"_s_t_user_commands", prefix+"_Config"
	set := dynamo.TableSettings{Stage: "test"}
	for _, spec := range []dynamo.TableSpec{dynamo.CommandsTable(commands).With(set, "s", "t"), dynamo.ConfigTable(other)} {
		if err := dynamo.EnsureTable(ctx, db, spec); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(commands), Item: map[string]types.AttributeValue{"id": str("user#a"), "sk": str("config"), "email": str("a@x")}}},
		{Update: &types.Update{TableName: aws.String(other), Key: map[string]types.AttributeValue{"system_id": str("s"), "tenant_id": str("t")},
			UpdateExpression: aws.String("SET x = :x"), ExpressionAttributeValues: map[string]types.AttributeValue{":x": str("1")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(commands), IndexName: aws.String(dynamo.IndexUserEmail),
		KeyConditionExpression: aws.String("email = :e"), ExpressionAttributeValues: map[string]types.AttributeValue{":e": str("a@x")}}); err != nil {
		t.Fatal(err)
	}
	// A refused call is recorded too: the code asked for it.
	_, _ = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(prefix + "_missing"), Key: map[string]types.AttributeValue{"id": str("x")}})

	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(commands)})
	if err != nil {
		t.Fatal(err)
	}
	stream := aws.ToString(d.Table.LatestStreamArn)
	if _, err := st.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(commands)}); err != nil {
		t.Fatal(err)
	}
	ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(stream),
		ShardId: ds.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: page.NextShardIterator}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	calls, err := awscalls.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		if c.Service != "command-api" {
			t.Errorf("call %+v of another service", c)
		}
		got = append(got, c.Action+" "+c.Resource)
	}
	table := "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${Prefix}"
	label := stream[strings.LastIndex(stream, "/")+1:]
	for _, want := range []string{
		"dynamodb:CreateTable " + table + "_s_t_user_commands",
		"dynamodb:TagResource " + table + "_s_t_user_commands",
		"dynamodb:PutItem " + table + "_s_t_user_commands",
		"dynamodb:UpdateItem " + table + "_Config",
		"dynamodb:Query " + table + "_s_t_user_commands/index/UserEmailGSI",
		"dynamodb:GetItem " + table + "_missing",
		"dynamodb:ListStreams *",
		"dynamodb:DescribeStream " + table + "_s_t_user_commands/stream/" + label,
		"dynamodb:GetShardIterator " + table + "_s_t_user_commands/stream/" + label,
		"dynamodb:GetRecords " + table + "_s_t_user_commands/stream/" + label,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no %q among the recorded calls:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if slices.Contains(got, "dynamodb:TagResource "+table+"_Config") {
		t.Error("a table created without tags recorded dynamodb:TagResource")
	}
	// Each distinct call once: the second GetRecords on the same stream added nothing.
	seen := map[string]int{}
	for _, c := range calls {
		seen[c.Operation+" "+c.Action+" "+c.Resource]++
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%s recorded %d times", k, n)
		}
	}
}

// PutEvents is recorded as IAM authorises it: events:PutEvents on each bus its entries
// name, by name or ARN, the default bus for an entry that names none.
func TestRecordsPutEventsOnItsBuses(t *testing.T) {
	bus := eventbridgetest.New(eventbridgetest.Options{})
	defer bus.Close()
	dir := t.TempDir()
	rec, err := awscalls.New(dir, "projector", "p")
	if err != nil {
		t.Fatal(err)
	}
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("id", "secret", "")}
	rec.Attach(&cfg)
	eb := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(bus.URL) })
	entry := func(name string) ebtypes.PutEventsRequestEntry {
		e := ebtypes.PutEventsRequestEntry{Source: aws.String("ssodir.s.t"), DetailType: aws.String("io.ssodir.user.created"), Detail: aws.String(`{}`)}
		if name != "" {
			e.EventBusName = aws.String(name)
		}
		return e
	}
	if _, err := eb.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
		entry("directory-changes"), entry("directory-changes"), entry("arn:aws:events:eu-west-1:123456789012:event-bus/other"), entry("")}}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	calls, err := awscalls.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.Action+" "+c.Resource)
	}
	slices.Sort(got)
	want := []string{
		"events:PutEvents arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default",
		"events:PutEvents arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/directory-changes",
		"events:PutEvents arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/other",
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
