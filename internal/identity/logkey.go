package identity

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// logKey keys LogKey's hashes: random per process and never stored, so a log line's hash
// correlates the lines of one process but no one can compute it from a name afterwards
// (an erased person cannot be found again in the logs: docs/erasure.md).
var logKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("identity: no randomness for the log key: " + err.Error())
	}
	return k
}()

// LogKey is what a log line may say of an aggregate or item key (`user#<username>`,
// `email#<address>`, `member#<username>`, an entity `user:<username>`, a bare username):
// the kind before the first '#' or ':' and a keyed hash of the rest, never the name itself. A group's key (`group#<key>`)
// names no person and stays as it is. Log lines name users by id or by this, only.
func LogKey(key string) string {
	i := strings.IndexAny(key, "#:")
	if i < 0 {
		return "~" + keyedHash(key)
	}
	kind, sep, rest := key[:i], key[i:i+1], key[i+1:]
	if rest == "" || (kind == "group" && !strings.ContainsAny(rest, "#:")) {
		return key
	}
	return kind + sep + "~" + keyedHash(rest)
}

func keyedHash(v string) string {
	m := hmac.New(sha256.New, logKey)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))[:16]
}
