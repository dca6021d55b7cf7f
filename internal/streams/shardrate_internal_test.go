package streams

import (
	"testing"
	"time"
)

// Against DynamoDB Local a busy shard is read once per poll, not at AWS's budget (400 ms
// for two consumers); against AWS the budget is the default.
func TestShardReadRateFor(t *testing.T) {
	c := Config{PollInterval: 20 * time.Millisecond, ShardReadRate: ShardReadRateFor(true, 20*time.Millisecond)}
	c.setDefaults()
	if got := c.shardReadInterval(); got != 20*time.Millisecond {
		t.Fatalf("local read interval = %v, want the poll (20ms)", got)
	}
	aws := Config{PollInterval: 250 * time.Millisecond, ShardReadRate: ShardReadRateFor(false, 250*time.Millisecond)}
	aws.setDefaults()
	if got := aws.shardReadInterval(); got != 400*time.Millisecond {
		t.Fatalf("AWS read interval = %v, want 400ms (5 GetRecords per second shared by two consumers)", got)
	}
}
