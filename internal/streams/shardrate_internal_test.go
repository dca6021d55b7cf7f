package streams

import (
	"testing"
	"time"
)

// Against DynamoDB Local a busy shard is read again without pause, not at AWS's budget
// (400 ms for two consumers); against AWS the budget is the default.
func TestShardReadRateFor(t *testing.T) {
	c := Config{PollInterval: 20 * time.Millisecond, ShardReadRate: ShardReadRateFor(true)}
	c.setDefaults()
	if got := c.shardReadInterval(); got != localReadInterval {
		t.Fatalf("local read interval = %v, want %v", got, localReadInterval)
	}
	aws := Config{PollInterval: 250 * time.Millisecond, ShardReadRate: ShardReadRateFor(false)}
	aws.setDefaults()
	if got := aws.shardReadInterval(); got != 400*time.Millisecond {
		t.Fatalf("AWS read interval = %v, want 400ms (5 GetRecords per second shared by two consumers)", got)
	}
}
