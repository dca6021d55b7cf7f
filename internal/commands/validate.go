package commands

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/identity"
)

// Limits of API.md's "Objects" (those of names are identity's).
const (
	maxName        = 255
	maxDescription = 1024
	maxAttrKeys    = 50
	maxAttrBytes   = 32 << 10
	maxAttrKey     = 255
	minPassword    = 8
	maxPassword    = 128
)

// problems collects field errors so a client learns everything wrong at once.
type problems = apperr.Fields

// invalidRequest is the message of a command's validation failure.
const invalidRequest = "the request has invalid fields"

func checkUsername(p *problems, field, s string) string {
	u, ok := identity.NormalizeUsername(s)
	if !ok {
		p.Add(field, identity.UsernameRule)
		// The old rule lower-cased even a username too long to check; keep echoing that.
		u = strings.ToLower(s)
	}
	return u
}

func checkEmail(p *problems, s string) string {
	e := identity.NormalizeEmail(s)
	if e == "" {
		return ""
	}
	if msg := identity.EmailProblem(e); msg != "" {
		p.Add("email", msg)
	}
	return e
}

func checkText(p *problems, field, s string, max int, multiline bool) {
	if !utf8.ValidString(s) {
		p.Add(field, "must be valid UTF-8")
		return
	}
	if utf8.RuneCountInString(s) > max {
		p.Add(field, "must be at most "+itoa(max)+" characters")
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r')) {
			p.Add(field, "must not contain control characters")
			return
		}
	}
}

func checkGroupName(p *problems, s string) {
	for _, msg := range identity.GroupNameProblems(s) {
		p.Add("name", msg)
	}
}

func checkAttributes(p *problems, attrs map[string][]string) {
	if attrs == nil {
		return
	}
	if len(attrs) > maxAttrKeys {
		p.Add("attributes", "at most 50 keys")
	}
	for k, vs := range attrs {
		if k == "" || len(k) > maxAttrKey || !utf8.ValidString(k) || strings.IndexFunc(k, unicode.IsControl) >= 0 {
			p.Add("attributes", "keys must be 1–255 characters without control characters")
			break
		}
		if vs == nil {
			p.Add("attributes."+k, "must be an array of strings")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				p.Add("attributes."+k, "values must be valid UTF-8")
				break
			}
		}
	}
	if vs, ok := attrs[identity.ExternalIDAttribute]; ok && (len(vs) != 1 || vs[0] == "" || len(vs[0]) > identity.MaxExternalID) {
		p.Add("attributes."+identity.ExternalIDAttribute, "must hold one value of 1–1024 bytes")
	}
	if b, err := json.Marshal(attrs); err == nil && len(b) > maxAttrBytes {
		p.Add("attributes", "must be at most 32 KiB encoded")
	}
}

func checkPassword(p *problems, s string) {
	n := utf8.RuneCountInString(s)
	if !utf8.ValidString(s) || n < minPassword || n > maxPassword {
		p.Add("password", "must be 8–128 characters")
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
