package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestLogKeyNamesNoPerson(t *testing.T) {
	for _, k := range []string{"user#ann.smith", "email#ann@example.org", "ann.smith", "group#g/member#ann.smith", "user:ann.smith"} {
		got := LogKey(k)
		plain := k[strings.LastIndexAny(k, "#:")+1:]
		sum := sha256.Sum256([]byte(plain))
		if strings.Contains(got, plain) || strings.Contains(got, hex.EncodeToString(sum[:])[:16]) {
			t.Errorf("LogKey(%q) = %q names the person", k, got)
		}
		if LogKey(k) != got {
			t.Errorf("LogKey(%q) is not stable within the process", k)
		}
	}
	if got := LogKey("user#ann"); !strings.HasPrefix(got, "user#~") || got == LogKey("user#bob") {
		t.Errorf("LogKey(user#ann) = %q: want the kind kept and names told apart", got)
	}
	if got := LogKey("group#admins"); got != "group#admins" {
		t.Errorf("a group's key is %q, want it as it is", got)
	}
}
