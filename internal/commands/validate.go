package commands

import (
	"encoding/json"
	"net/mail"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ssodir/ssodir/internal/apperr"
)

// Limits of API.md's "Objects".
const (
	maxUsername    = 128
	maxEmail       = 254
	maxName        = 255
	maxGroupName   = 128
	maxDescription = 1024
	maxAttrKeys    = 50
	maxAttrBytes   = 32 << 10
	maxAttrKey     = 255
	minPassword    = 8
	maxPassword    = 128
)

var (
	usernameRE = regexp.MustCompile(`^[a-z0-9._@-]+$`)
	idRE       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
)

// problems collects field errors so a client learns everything wrong at once.
type problems []apperr.FieldError

func (p *problems) add(field, msg string) {
	*p = append(*p, apperr.FieldError{Field: field, Message: msg})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return apperr.Invalid("the request has invalid fields", p...)
}

// ValidID reports whether s is a valid system or tenant id.
func ValidID(s string) bool { return idRE.MatchString(s) }

// NormalizeUsername lower-cases a username (as Keycloak does) and checks it.
func NormalizeUsername(s string) (string, bool) {
	u := strings.ToLower(s)
	return u, len(u) >= 1 && len(u) <= maxUsername && usernameRE.MatchString(u)
}

// GroupKey is a group name's identity: its lower-cased form.
func GroupKey(name string) string { return strings.ToLower(name) }

func checkUsername(p *problems, field, s string) string {
	u, ok := NormalizeUsername(s)
	if !ok {
		p.add(field, "must be 1–128 characters of a-z, 0-9, '.', '_', '@', '-'")
	}
	return u
}

func checkEmail(p *problems, s string) string {
	e := strings.ToLower(strings.TrimSpace(s))
	if e == "" {
		return ""
	}
	if len(e) > maxEmail {
		p.add("email", "must be at most 254 characters")
		return e
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || a.Name != "" || !strings.Contains(e[strings.LastIndexByte(e, '@')+1:], ".") {
		p.add("email", "must be a valid email address")
	}
	return e
}

func checkText(p *problems, field, s string, max int, multiline bool) {
	if !utf8.ValidString(s) {
		p.add(field, "must be valid UTF-8")
		return
	}
	if utf8.RuneCountInString(s) > max {
		p.add(field, "must be at most "+itoa(max)+" characters")
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r')) {
			p.add(field, "must not contain control characters")
			return
		}
	}
}

func checkGroupName(p *problems, s string) {
	n := utf8.RuneCountInString(s)
	if n < 1 || n > maxGroupName || !utf8.ValidString(s) {
		p.add("name", "must be 1–128 characters")
		return
	}
	if strings.TrimSpace(s) != s {
		p.add("name", "must not start or end with a space")
	}
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' ' || r == '.' || r == '_' || r == '-') {
			p.add("name", "may hold only letters, digits, space, '.', '_' and '-'")
			return
		}
	}
}

func checkAttributes(p *problems, attrs map[string][]string) {
	if attrs == nil {
		return
	}
	if len(attrs) > maxAttrKeys {
		p.add("attributes", "at most 50 keys")
	}
	for k, vs := range attrs {
		if k == "" || len(k) > maxAttrKey || !utf8.ValidString(k) || strings.IndexFunc(k, unicode.IsControl) >= 0 {
			p.add("attributes", "keys must be 1–255 characters without control characters")
			break
		}
		if vs == nil {
			p.add("attributes."+k, "must be an array of strings")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				p.add("attributes."+k, "values must be valid UTF-8")
				break
			}
		}
	}
	if b, err := json.Marshal(attrs); err == nil && len(b) > maxAttrBytes {
		p.add("attributes", "must be at most 32 KiB encoded")
	}
}

func checkPassword(p *problems, s string) {
	n := utf8.RuneCountInString(s)
	if !utf8.ValidString(s) || n < minPassword || n > maxPassword {
		p.add("password", "must be 8–128 characters")
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
