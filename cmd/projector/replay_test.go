package main

import (
	"io"
	"testing"
)

// A replay drops the old generation unless told to keep it: every kept generation holds
// two tables of the account's quota.
func TestReplayDropsTheOldGenerationUnlessKeepOld(t *testing.T) {
	cases := []struct {
		args     []string
		dropOld  bool
		wantFail bool
	}{
		{args: []string{"--system", "s", "--tenant", "t"}, dropOld: true},
		{args: []string{"--system", "s", "--tenant", "t", "--keep-old"}, dropOld: false},
		{args: []string{"--system", "s", "--tenant", "t", "--drop-old"}, dropOld: true},
		{args: []string{"--system", "s", "--tenant", "t", "--keep-old", "--drop-old"}, wantFail: true},
		{args: []string{"--system", "s"}, wantFail: true},
	}
	for _, c := range cases {
		_, _, opts, err := replayFlags(c.args, io.Discard)
		switch {
		case c.wantFail && err == nil:
			t.Errorf("%v: accepted, want an error", c.args)
		case !c.wantFail && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case !c.wantFail && opts.DropOld != c.dropOld:
			t.Errorf("%v: DropOld = %v, want %v", c.args, opts.DropOld, c.dropOld)
		}
	}
}
