package queries

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/identity"
)

// Limits of API.md's "Query API" and "Objects".
const (
	DefaultLimit   = 50
	MaxLimit       = 500
	maxPrefix      = 255
	maxActor       = 255
	dayLayout      = "2006-01-02"
	paramLimit     = "limit"
	paramCursor    = "cursor"
	paramEmail     = "email"
	paramLastName  = "last_name_prefix"
	paramFirstName = "first_name_prefix"
	paramUsername  = "username_prefix"
	paramOrder     = "order"
	paramEntity    = "entity"
	paramActor     = "actor"
	paramDay       = "day"
)

// Order is the direction of the list of all users.
type Order string

const (
	OrderUpdatedDesc Order = "updated_desc"
	OrderUpdatedAsc  Order = "updated_asc"
)

// PageRequest is where a page starts and how long it is.
type PageRequest struct {
	// Limit is 1–MaxLimit; 0 means DefaultLimit.
	Limit int
	// Cursor is the next_cursor of the previous page; empty for the first.
	Cursor string
}

func (p PageRequest) size() int {
	if p.Limit == 0 {
		return DefaultLimit
	}
	return p.Limit
}

func (p PageRequest) check() error {
	if p.Limit < 0 || p.Limit > MaxLimit {
		return apperr.InvalidField(paramLimit, "must be an integer from 1 to 500")
	}
	return nil
}

// UsersQuery selects the users list: by email, by a username or name prefix, or all by
// update time. At most one of Email, UsernamePrefix, LastNamePrefix and FirstNamePrefix is
// set; Order applies only to the list of all users.
type UsersQuery struct {
	Email           string
	UsernamePrefix  string
	LastNamePrefix  string
	FirstNamePrefix string
	Order           Order
	Page            PageRequest
}

// normalize lower-cases the case-insensitive inputs and checks every one.
func (q UsersQuery) normalize() (UsersQuery, error) {
	var p problems
	set := 0
	if q.Email != "" {
		set++
		q.Email = identity.NormalizeEmail(q.Email)
		// An address is ASCII in practice; bounding bytes also bounds what reaches DynamoDB.
		if len(q.Email) > identity.MaxEmail {
			p.Add(paramEmail, "must be at most 254 characters")
		} else {
			text(&p, paramEmail, q.Email, 1, identity.MaxEmail)
		}
	}
	if q.UsernamePrefix != "" {
		set++
		// Every prefix of a username is itself 1–128 characters of the username alphabet;
		// a prefix outside it could match no one, so it is refused as a typo would be.
		u, ok := identity.NormalizeUsername(q.UsernamePrefix)
		if !ok {
			p.Add(paramUsername, "must be 1–128 characters of a-z, 0-9, '.', '_', '@', '-' (any case)")
		}
		q.UsernamePrefix = u
	}
	if q.LastNamePrefix != "" {
		set++
		text(&p, paramLastName, q.LastNamePrefix, 1, maxPrefix)
		q.LastNamePrefix = strings.ToLower(q.LastNamePrefix)
	}
	if q.FirstNamePrefix != "" {
		set++
		text(&p, paramFirstName, q.FirstNamePrefix, 1, maxPrefix)
		q.FirstNamePrefix = strings.ToLower(q.FirstNamePrefix)
	}
	if set > 1 {
		p.Add(paramEmail, "give at most one of email, username_prefix, last_name_prefix and first_name_prefix")
	}
	switch q.Order {
	case "":
		if set == 0 {
			q.Order = OrderUpdatedDesc
		}
	case OrderUpdatedDesc, OrderUpdatedAsc:
		if set > 0 {
			p.Add(paramOrder, "applies only to the list of all users; email, username and name prefix lists have a fixed order")
		}
	default:
		p.Add(paramOrder, "must be updated_desc or updated_asc")
	}
	if err := q.Page.check(); err != nil {
		return q, err
	}
	return q, p.Err(invalidQuery)
}

// ActivityQuery selects the activity feed of one entity, one actor or one UTC day: exactly
// one of Entity, Actor and Day is set.
type ActivityQuery struct {
	// Entity is "user:<username>" or "group:<name>".
	Entity string
	Actor  string
	// Day is YYYY-MM-DD, a UTC day.
	Day  string
	Page PageRequest
}

func (q ActivityQuery) normalize() (ActivityQuery, error) {
	var p problems
	set := 0
	if q.Entity != "" {
		set++
		kind, key, ok := strings.Cut(q.Entity, ":")
		switch {
		case !ok:
			p.Add(paramEntity, "must be user:<username> or group:<name>")
		case kind == "user":
			u, ok := identity.NormalizeUsername(key)
			if !ok {
				p.Add(paramEntity, "user:<username> needs a username of 1–128 characters of a-z, 0-9, '.', '_', '@', '-'")
			}
			q.Entity = "user:" + u
		case kind == "group":
			if !identity.ValidGroupName(key) {
				p.Add(paramEntity, "group:<name> needs a name of 1–128 letters, digits, spaces, '.', '_', '-'")
			}
			q.Entity = "group:" + identity.GroupKey(key)
		default:
			p.Add(paramEntity, "must be user:<username> or group:<name>")
		}
	}
	if q.Actor != "" {
		set++
		text(&p, paramActor, q.Actor, 1, maxActor)
	}
	if q.Day != "" {
		set++
		if d, err := time.Parse(dayLayout, q.Day); err != nil || d.Format(dayLayout) != q.Day {
			p.Add(paramDay, "must be a date YYYY-MM-DD")
		}
	}
	if set != 1 {
		p.Add(paramEntity, "give exactly one of entity, actor and day")
	}
	if err := q.Page.check(); err != nil {
		return q, err
	}
	return q, p.Err(invalidQuery)
}

// problems collects field errors so that a client learns everything wrong at once.
type problems = apperr.Fields

// invalidQuery is the message of a query's validation failure.
const invalidQuery = "invalid query parameters"

// text checks a free-text parameter: valid UTF-8, min–max characters, no control
// characters (stored names never hold any, and `\u0001` separates the name sort keys).
func text(p *problems, field, s string, minLen, maxLen int) {
	if !utf8.ValidString(s) {
		p.Add(field, "must be valid UTF-8")
		return
	}
	if n := utf8.RuneCountInString(s); n < minLen || n > maxLen {
		p.Add(field, "must be "+strconv.Itoa(minLen)+"–"+strconv.Itoa(maxLen)+" characters")
		return
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		p.Add(field, "must not contain control characters")
	}
}

// ParseQuery parses a raw query string and refuses parameters outside allowed and
// parameters given more than once: a misspelt filter must not silently list everything.
func ParseQuery(rawQuery string, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, apperr.Invalid("the query string is malformed")
	}
	var p problems
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case !slices.Contains(allowed, name):
			p.Add(printable(name), "unknown query parameter")
		case len(v[name]) > 1:
			p.Add(name, "given more than once")
		}
	}
	return v, p.Err(invalidQuery)
}

// printable keeps a client's unknown parameter name safe to echo back in a problem.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// ParsePageRequest reads limit and cursor.
func ParsePageRequest(v url.Values) (PageRequest, error) {
	var p PageRequest
	if s, ok := one(v, paramLimit); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit || strings.TrimLeft(s, "0123456789") != "" {
			return p, apperr.InvalidField(paramLimit, "must be an integer from 1 to 500")
		}
		p.Limit = n
	}
	if s, ok := one(v, paramCursor); ok {
		if s == "" {
			return p, invalidCursor("must not be empty")
		}
		p.Cursor = s
	}
	return p, nil
}

// ParseUsersQuery reads the parameters of GET /users.
func ParseUsersQuery(rawQuery string) (UsersQuery, error) {
	v, err := ParseQuery(rawQuery, paramEmail, paramUsername, paramLastName, paramFirstName, paramOrder, paramLimit, paramCursor)
	if err != nil {
		return UsersQuery{}, err
	}
	var q UsersQuery
	var p problems
	for name, dst := range map[string]*string{paramEmail: &q.Email, paramUsername: &q.UsernamePrefix, paramLastName: &q.LastNamePrefix, paramFirstName: &q.FirstNamePrefix} {
		if s, ok := one(v, name); ok {
			if s == "" {
				p.Add(name, "must not be empty")
			}
			*dst = s
		}
	}
	if s, ok := one(v, paramOrder); ok {
		q.Order = Order(s)
		if s == "" {
			p.Add(paramOrder, "must be updated_desc or updated_asc")
		}
	}
	if err := p.Err(invalidQuery); err != nil {
		return q, err
	}
	if q.Page, err = ParsePageRequest(v); err != nil {
		return q, err
	}
	return q.normalize()
}

// ParseListQuery reads the parameters of a list that takes only limit and cursor.
func ParseListQuery(rawQuery string) (PageRequest, error) {
	v, err := ParseQuery(rawQuery, paramLimit, paramCursor)
	if err != nil {
		return PageRequest{}, err
	}
	return ParsePageRequest(v)
}

// ParseActivityQuery reads the parameters of GET /activity.
func ParseActivityQuery(rawQuery string) (ActivityQuery, error) {
	v, err := ParseQuery(rawQuery, paramEntity, paramActor, paramDay, paramLimit, paramCursor)
	if err != nil {
		return ActivityQuery{}, err
	}
	var q ActivityQuery
	var p problems
	for name, dst := range map[string]*string{paramEntity: &q.Entity, paramActor: &q.Actor, paramDay: &q.Day} {
		if s, ok := one(v, name); ok {
			if s == "" {
				p.Add(name, "must not be empty")
			}
			*dst = s
		}
	}
	if err := p.Err(invalidQuery); err != nil {
		return q, err
	}
	if q.Page, err = ParsePageRequest(v); err != nil {
		return q, err
	}
	return q.normalize()
}

// ParseMinVersion reads X-Min-Version: absent (no values) is 0; anything but one positive
// integer is invalid.
func ParseMinVersion(values []string) (int64, error) {
	if len(values) == 0 {
		return 0, nil
	}
	bad := apperr.InvalidField("X-Min-Version", "must be one positive integer")
	if len(values) > 1 {
		return 0, bad
	}
	s := strings.TrimSpace(values[0])
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, bad
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, bad
	}
	return n, nil
}

func one(v url.Values, name string) (string, bool) {
	vs, ok := v[name]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}
