package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/identity"
)

// userRecord is one user of an import or export file (JSON Lines, or a CSV row). Export
// writes it without a password: passwords are never readable.
type userRecord struct {
	Username   string              `json:"username"`
	Email      string              `json:"email,omitempty"`
	FirstName  string              `json:"first_name,omitempty"`
	LastName   string              `json:"last_name,omitempty"`
	IsActive   *bool               `json:"is_active,omitempty"`
	Attributes map[string][]string `json:"attributes,omitempty"`
	Groups     []string            `json:"groups,omitempty"`
	Password   string              `json:"password,omitempty"`
}

// groupRecord is one group of a groups file.
type groupRecord struct {
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Attributes  map[string][]string `json:"attributes,omitempty"`
}

// line is one record of a file with its line number and what is wrong with it.
type line[T any] struct {
	no       int
	rec      T
	problems []string
}

// fileFormat is csv or jsonl: from --format, else from the file's extension.
func fileFormat(flag, path string) (string, error) {
	switch flag {
	case "csv", "jsonl":
		return flag, nil
	case "":
	default:
		return "", usagef("--format %q: want csv or jsonl", flag)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return "csv", nil
	case ".jsonl", ".ndjson", ".json":
		return "jsonl", nil
	}
	return "", usagef("%s: cannot tell the format from the name; give --format csv or --format jsonl", path)
}

// readJSONLines decodes one record per non-blank line; unknown fields are mistakes.
func readJSONLines[T any](r io.Reader) ([]line[T], error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var out []line[T]
	for no := 1; sc.Scan(); no++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		l := line[T]{no: no}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l.rec); err != nil {
			l.problems = append(l.problems, "not a valid record: "+err.Error())
		} else if dec.More() {
			l.problems = append(l.problems, "more than one JSON value on the line")
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return out, nil
}

// CSV columns: username, email, first_name, last_name, is_active (true/false), groups and
// password, and attr.<key> for each attribute; several groups or attribute values are
// separated by semicolons. Only username is required; an empty cell is an absent value.
var userColumns = []string{"username", "email", "first_name", "last_name", "is_active", "groups", "password"}

const csvListSeparator = ";"

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, csvListSeparator) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func readUsersCSV(r io.Reader) ([]line[userRecord], error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0
	header, err := cr.Read()
	if err != nil {
		return nil, usagef("read the CSV header: %v", err)
	}
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		header[i] = h
		if !slices.Contains(userColumns, h) && !(strings.HasPrefix(h, "attr.") && len(h) > len("attr.")) {
			return nil, usagef("CSV column %q: the columns are %s and attr.<key>", h, strings.Join(userColumns, ", "))
		}
		if seen[h] {
			return nil, usagef("CSV column %q appears twice", h)
		}
		seen[h] = true
	}
	if !seen["username"] {
		return nil, usagef("the CSV header has no username column")
	}
	var out []line[userRecord]
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		no, _ := cr.FieldPos(0)
		l := line[userRecord]{no: no}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			l.no = pe.Line
			l.problems = append(l.problems, "not valid CSV: "+pe.Err.Error())
			out = append(out, l)
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		for i, cell := range row {
			if cell == "" {
				continue
			}
			switch h := header[i]; h {
			case "username":
				l.rec.Username = cell
			case "email":
				l.rec.Email = cell
			case "first_name":
				l.rec.FirstName = cell
			case "last_name":
				l.rec.LastName = cell
			case "password":
				l.rec.Password = cell
			case "groups":
				l.rec.Groups = splitList(cell)
			case "is_active":
				b, err := strconv.ParseBool(cell)
				if err != nil {
					l.problems = append(l.problems, fmt.Sprintf("is_active %q: want true or false", cell))
				}
				l.rec.IsActive = &b
			default:
				if l.rec.Attributes == nil {
					l.rec.Attributes = map[string][]string{}
				}
				l.rec.Attributes[strings.TrimPrefix(h, "attr.")] = splitList(cell)
			}
		}
		out = append(out, l)
	}
}

// fieldProblems turns a validation error of internal/commands (the API's own rules) into
// readable problems.
func fieldProblems(err error) []string {
	var ae *apperr.Error
	if !errors.As(err, &ae) || len(ae.Fields) == 0 {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range ae.Fields {
		out = append(out, f.Field+": "+f.Message)
	}
	return out
}

// validateUsers checks every line with the API's rules and against the file's other
// lines: a username or email (any case) on two lines is a problem of the second.
func validateUsers(lines []line[userRecord]) {
	usernames, emails := map[string]int{}, map[string]int{}
	for i := range lines {
		l := &lines[i]
		if len(l.problems) > 0 {
			continue
		}
		c := commands.CreateUser{Username: l.rec.Username, Email: l.rec.Email, FirstName: l.rec.FirstName,
			LastName: l.rec.LastName, Attributes: l.rec.Attributes}
		if l.rec.Password != "" {
			c.Password = &l.rec.Password
		}
		if err := c.Validate(); err != nil {
			l.problems = append(l.problems, fieldProblems(err)...)
		}
		for _, g := range l.rec.Groups {
			gc := commands.CreateGroup{Name: g}
			if err := gc.Validate(); err != nil {
				l.problems = append(l.problems, fmt.Sprintf("group %q: %s", g, strings.Join(fieldProblems(err), "; ")))
			}
		}
		if len(l.problems) > 0 {
			continue
		}
		l.rec.Username, l.rec.Email = c.Username, c.Email
		if prev, ok := usernames[c.Username]; ok {
			l.problems = append(l.problems, fmt.Sprintf("username %s is also on line %d", c.Username, prev))
		} else {
			usernames[c.Username] = l.no
		}
		if c.Email != "" {
			if prev, ok := emails[c.Email]; ok {
				l.problems = append(l.problems, fmt.Sprintf("email %s is also on line %d", c.Email, prev))
			} else {
				emails[c.Email] = l.no
			}
		}
	}
}

func validateGroups(lines []line[groupRecord]) {
	names := map[string]int{}
	for i := range lines {
		l := &lines[i]
		if len(l.problems) > 0 {
			continue
		}
		c := commands.CreateGroup{Name: l.rec.Name, Description: l.rec.Description, Attributes: l.rec.Attributes}
		if err := c.Validate(); err != nil {
			l.problems = append(l.problems, fieldProblems(err)...)
			continue
		}
		key := identity.GroupKey(l.rec.Name)
		if prev, ok := names[key]; ok {
			l.problems = append(l.problems, fmt.Sprintf("group %s is also on line %d", l.rec.Name, prev))
		} else {
			names[key] = l.no
		}
	}
}

// importKey is a line's Idempotency-Key: derived from the line's number and content, so
// that running the same file again (after a crash, say) sends the same keys and nothing is
// written twice. The password is left out of the derivation so that no hash of it ever
// travels in a header; the API still tells a changed password apart (its request hash
// covers the body) and answers idempotency_key_reused.
func importKey(kind string, no int, rec any) string {
	b, _ := json.Marshal(rec)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s", kind, no, b))
	return "ssodirctl-import-" + kind + "-" + base64.RawURLEncoding.EncodeToString(sum[:24])
}

// problemLines reports the lines that have problems, one problem per output line.
func problemLines[T any](w io.Writer, lines []line[T]) int {
	n := 0
	for _, l := range lines {
		if len(l.problems) == 0 {
			continue
		}
		n++
		for _, p := range l.problems {
			fmt.Fprintf(w, "line %d: %s\n", l.no, p)
		}
	}
	return n
}
