package devsignin

import (
	"sync"
	"testing"
	"time"
)

// clock is a settable time for the codes' expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestCodes(t *testing.T) {
	t.Run("a code redeems for the token once, and is refused the second time", func(t *testing.T) {
		c := New("dev-token", nil)
		code, _ := c.Mint()
		if tok, ok := c.Redeem(code); !ok || tok != "dev-token" {
			t.Fatalf("first redeem: %q %v", tok, ok)
		}
		if tok, ok := c.Redeem(code); ok || tok != "" {
			t.Fatalf("second redeem: %q %v, want refused", tok, ok)
		}
	})
	t.Run("a code is refused from its expiry on, and stays refused", func(t *testing.T) {
		clk := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
		c := New("dev-token", clk.now)
		code, expires := c.Mint()
		if want := clk.now().Add(time.Minute); !expires.Equal(want) {
			t.Fatalf("expires %v, want %v", expires, want)
		}
		clk.add(TTL)
		if _, ok := c.Redeem(code); ok {
			t.Fatal("an expired code was redeemed")
		}
		clk.add(-time.Second)
		if _, ok := c.Redeem(code); ok {
			t.Fatal("a code refused once was redeemed later")
		}
	})
	t.Run("a code redeems just before its expiry", func(t *testing.T) {
		clk := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
		c := New("dev-token", clk.now)
		code, _ := c.Mint()
		clk.add(TTL - time.Millisecond)
		if _, ok := c.Redeem(code); !ok {
			t.Fatal("a code within its minute was refused")
		}
	})
	t.Run("an unknown code and an empty one are refused", func(t *testing.T) {
		c := New("dev-token", nil)
		c.Mint()
		for _, code := range []string{"", "AAAAAAAAAAAAAAAAAAAAAAAAAA", "not a code"} {
			if _, ok := c.Redeem(code); ok {
				t.Errorf("%q was redeemed", code)
			}
		}
	})
	t.Run("minting without end keeps at most the newest codes", func(t *testing.T) {
		c := New("dev-token", nil)
		first, _ := c.Mint()
		var last string
		for range 2 * maxCodes {
			last, _ = c.Mint()
		}
		if n := len(c.codes); n != maxCodes || len(c.order) != maxCodes {
			t.Fatalf("%d codes (%d in order) kept, want %d", n, len(c.order), maxCodes)
		}
		if _, ok := c.Redeem(first); ok {
			t.Error("the oldest code survived")
		}
		if _, ok := c.Redeem(last); !ok {
			t.Error("the newest code was forgotten")
		}
	})
	t.Run("expired codes are forgotten when the next is minted", func(t *testing.T) {
		clk := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
		c := New("dev-token", clk.now)
		for range 5 {
			c.Mint()
		}
		clk.add(TTL)
		c.Mint()
		if len(c.codes) != 1 || len(c.order) != 1 {
			t.Fatalf("%d codes kept after the others expired, want 1", len(c.codes))
		}
	})
	t.Run("codes are distinct", func(t *testing.T) {
		c := New("dev-token", nil)
		seen := map[string]bool{}
		for range 50 {
			code, _ := c.Mint()
			if seen[code] || len(code) < 26 {
				t.Fatalf("code %q repeated or short", code)
			}
			seen[code] = true
		}
	})
}
