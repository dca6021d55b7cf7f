package scim

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The filter language of RFC 7644 section 3.4.2.2, with what identity providers send
// beyond its grammar: operators, keywords and attribute names in any case, and a value
// path followed by a comparison of one of its sub-attributes
// (`emails[type eq "work"].value eq "x"`, as Microsoft Entra sends it).

// maxFilterLen and maxFilterDepth bound the work one filter can ask for.
const (
	maxFilterLen   = 4096
	maxFilterDepth = 32
)

// attrPath is `[URN ":"]attr[.sub]`, lower-cased; urn is "" for the resource's core
// schema.
type attrPath struct {
	urn, attr, sub string
}

func (p attrPath) String() string {
	s := p.attr
	if p.urn != "" {
		s = p.urn + ":" + s
	}
	if p.sub != "" {
		s += "." + p.sub
	}
	return s
}

// filter is a node of a parsed filter.
type filter interface{ isFilter() }

type logical struct {
	and  bool
	l, r filter
}

type not struct{ x filter }

// compare is `path op value` or `path pr`.
type compare struct {
	path  attrPath
	op    string
	value any // string, float64, bool or nil
}

// valuePath is `attr[filter]`, optionally followed by `.sub op value`.
type valuePath struct {
	path   attrPath // without sub
	filter filter
	sub    string
	op     string
	value  any
}

func (logical) isFilter()   {}
func (not) isFilter()       {}
func (compare) isFilter()   {}
func (valuePath) isFilter() {}

// filterError is a filter that cannot be parsed: 400 invalidFilter.
type filterError struct{ msg string }

func (e *filterError) Error() string { return e.msg }

var compareOps = map[string]bool{"eq": true, "ne": true, "co": true, "sw": true, "ew": true, "gt": true, "lt": true, "ge": true, "le": true}

// parseFilter parses a filter; every failure is a *filterError.
func parseFilter(s string) (filter, error) {
	if len(s) > maxFilterLen {
		return nil, &filterError{fmt.Sprintf("filter is longer than %d bytes", maxFilterLen)}
	}
	p := &parser{toks: nil}
	if err := p.lex(s); err != nil {
		return nil, err
	}
	if len(p.toks) == 0 {
		return nil, &filterError{"filter is empty"}
	}
	f, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, &filterError{fmt.Sprintf("unexpected %q", p.toks[p.pos].text)}
	}
	return f, nil
}

type tokKind int

const (
	tokWord tokKind = iota // attribute path, keyword, operator or literal
	tokString
	tokNumber
	tokLParen
	tokRParen
	tokLBracket
	tokRBracket
	tokSub // `.sub` right after `]`
)

type token struct {
	kind tokKind
	text string
	str  string
	num  float64
}

type parser struct {
	toks []token
	pos  int
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-:.$", r)
}

func (p *parser) lex(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			p.toks = append(p.toks, token{kind: tokLParen, text: "("})
			i++
		case c == ')':
			p.toks = append(p.toks, token{kind: tokRParen, text: ")"})
			i++
		case c == '[':
			p.toks = append(p.toks, token{kind: tokLBracket, text: "["})
			i++
		case c == ']':
			p.toks = append(p.toks, token{kind: tokRBracket, text: "]"})
			i++
			if i < len(s) && s[i] == '.' {
				j := i + 1
				for j < len(s) && isWordRune(rune(s[j])) && s[j] != '.' {
					j++
				}
				if j == i+1 {
					return &filterError{"a sub-attribute name must follow \"].\""}
				}
				p.toks = append(p.toks, token{kind: tokSub, text: s[i:j], str: strings.ToLower(s[i+1 : j])})
				i = j
			}
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return &filterError{"a string is not closed"}
			}
			var v string
			if err := json.Unmarshal([]byte(s[i:j+1]), &v); err != nil {
				return &filterError{fmt.Sprintf("invalid string %s", s[i:j+1])}
			}
			p.toks = append(p.toks, token{kind: tokString, text: s[i : j+1], str: v})
			i = j + 1
		default:
			j := i
			for j < len(s) {
				r := rune(s[j])
				if r >= 0x80 || !isWordRune(r) {
					break
				}
				j++
			}
			if j == i {
				return &filterError{fmt.Sprintf("unexpected character %q", c)}
			}
			w := s[i:j]
			if n, err := strconv.ParseFloat(w, 64); err == nil && (w[0] == '-' || (w[0] >= '0' && w[0] <= '9')) {
				if math.IsInf(n, 0) || math.IsNaN(n) {
					return &filterError{fmt.Sprintf("invalid number %s", w)}
				}
				p.toks = append(p.toks, token{kind: tokNumber, text: w, num: n})
			} else {
				p.toks = append(p.toks, token{kind: tokWord, text: w})
			}
			i = j
		}
	}
	return nil
}

func (p *parser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

func (p *parser) keyword(kw string) bool {
	t, ok := p.peek()
	if ok && t.kind == tokWord && strings.EqualFold(t.text, kw) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) or(depth int) (filter, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.keyword("or") {
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = logical{and: false, l: l, r: r}
	}
	return l, nil
}

func (p *parser) and(depth int) (filter, error) {
	l, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	for p.keyword("and") {
		r, err := p.primary(depth)
		if err != nil {
			return nil, err
		}
		l = logical{and: true, l: l, r: r}
	}
	return l, nil
}

func (p *parser) expect(k tokKind, what string) error {
	t, ok := p.peek()
	if !ok || t.kind != k {
		if !ok {
			return &filterError{"the filter ends where " + what + " was expected"}
		}
		return &filterError{fmt.Sprintf("expected %s, not %q", what, t.text)}
	}
	p.pos++
	return nil
}

func (p *parser) primary(depth int) (filter, error) {
	if depth > maxFilterDepth {
		return nil, &filterError{"the filter nests too deep"}
	}
	t, ok := p.peek()
	if !ok {
		return nil, &filterError{"the filter ends where an expression was expected"}
	}
	if t.kind == tokLParen {
		p.pos++
		f, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		return f, p.expect(tokRParen, "\")\"")
	}
	if t.kind == tokWord && strings.EqualFold(t.text, "not") && p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == tokLParen {
		p.pos += 2
		f, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		return not{x: f}, p.expect(tokRParen, "\")\"")
	}
	if t.kind != tokWord {
		return nil, &filterError{fmt.Sprintf("expected an attribute, not %q", t.text)}
	}
	p.pos++
	path, err := parseAttrPath(t.text)
	if err != nil {
		return nil, err
	}
	if n, ok := p.peek(); ok && n.kind == tokLBracket {
		if path.sub != "" {
			return nil, &filterError{fmt.Sprintf("%q: a value filter follows an attribute, not a sub-attribute", t.text)}
		}
		p.pos++
		inner, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if err := p.expect(tokRBracket, "\"]\""); err != nil {
			return nil, err
		}
		vp := valuePath{path: path, filter: inner}
		if s, ok := p.peek(); ok && s.kind == tokSub {
			p.pos++
			vp.sub = s.str
			if vp.op, vp.value, err = p.comparison(); err != nil {
				return nil, err
			}
		}
		return vp, nil
	}
	op, value, err := p.comparison()
	if err != nil {
		return nil, err
	}
	return compare{path: path, op: op, value: value}, nil
}

// comparison reads `op value` or `pr`.
func (p *parser) comparison() (string, any, error) {
	t, ok := p.peek()
	if !ok || t.kind != tokWord {
		return "", nil, &filterError{"expected an operator (eq, ne, co, sw, ew, gt, lt, ge, le, pr)"}
	}
	op := strings.ToLower(t.text)
	p.pos++
	if op == "pr" {
		return op, nil, nil
	}
	if !compareOps[op] {
		return "", nil, &filterError{fmt.Sprintf("unknown operator %q", t.text)}
	}
	v, ok := p.peek()
	if !ok {
		return "", nil, &filterError{"the filter ends where a value was expected"}
	}
	p.pos++
	switch v.kind {
	case tokString:
		return op, v.str, nil
	case tokNumber:
		return op, v.num, nil
	case tokWord:
		switch strings.ToLower(v.text) {
		case "true":
			return op, true, nil
		case "false":
			return op, false, nil
		case "null":
			return op, nil, nil
		}
	}
	return "", nil, &filterError{fmt.Sprintf("expected a value (a string, number, true, false or null), not %q", v.text)}
}

// parseAttrPath splits `[URN:]attr[.sub]` and lower-cases it.
func parseAttrPath(s string) (attrPath, error) {
	var p attrPath
	rest := s
	if len(s) > 4 && strings.EqualFold(s[:4], "urn:") {
		i := strings.LastIndexByte(s, ':')
		p.urn, rest = strings.ToLower(s[:i]), s[i+1:]
	}
	attr, sub, hasSub := strings.Cut(rest, ".")
	if attr == "" || (hasSub && (sub == "" || strings.Contains(sub, "."))) || strings.Contains(attr, ":") {
		return p, &filterError{fmt.Sprintf("%q is not an attribute path", s)}
	}
	p.attr, p.sub = strings.ToLower(attr), strings.ToLower(sub)
	return p, nil
}

// caseExact are the attributes whose strings compare case-sensitively (RFC 7643's
// caseExact); every other string compares without regard to case.
var caseExact = map[string]bool{"id": true, "externalid": true, "password": true}

// matches evaluates f against a resource (a lower-cased document, see doc.go).
func matches(f filter, res map[string]any) bool {
	switch x := f.(type) {
	case logical:
		if x.and {
			return matches(x.l, res) && matches(x.r, res)
		}
		return matches(x.l, res) || matches(x.r, res)
	case not:
		return !matches(x.x, res)
	case compare:
		vals := valuesAt(res, x.path)
		exact := caseExact[x.path.attr] && x.path.urn == ""
		if x.op == "pr" {
			if x.path.sub == "" {
				return present(container(res, x.path.urn)[x.path.attr])
			}
			for _, v := range vals {
				if present(v) {
					return true
				}
			}
			return false
		}
		if x.op == "ne" {
			// ne matches when no value equals (an absent attribute included).
			for _, v := range vals {
				if compareValue(v, "eq", x.value, exact) {
					return false
				}
			}
			return true
		}
		if x.op == "eq" && x.value == nil {
			return len(vals) == 0 || !present(vals[0])
		}
		for _, v := range vals {
			if compareValue(v, x.op, x.value, exact) {
				return true
			}
		}
		return false
	case valuePath:
		for _, el := range elements(container(res, x.path.urn)[x.path.attr]) {
			m, ok := el.(map[string]any)
			if !ok || !matches(x.filter, m) {
				continue
			}
			if x.op == "" {
				return true
			}
			if matches(compare{path: attrPath{attr: x.sub}, op: x.op, value: x.value}, m) {
				return true
			}
		}
		return false
	}
	return false
}

// container is the part of a document an attribute of urn lives in: the document itself
// for the core schema, the extension's object otherwise.
func container(res map[string]any, urn string) map[string]any {
	if urn == "" || isCoreURN(urn) {
		return res
	}
	m, _ := res[urn].(map[string]any)
	return m
}

func elements(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	}
	return []any{v}
}

// valuesAt are the values a path names: of every element of a multi-valued attribute;
// a complex value without a sub-attribute stands for its "value" (RFC 7644 3.4.2.2).
func valuesAt(res map[string]any, p attrPath) []any {
	var out []any
	for _, el := range elements(container(res, p.urn)[p.attr]) {
		m, isMap := el.(map[string]any)
		switch {
		case p.sub != "" && isMap:
			if v, ok := m[p.sub]; ok {
				out = append(out, v)
			}
		case p.sub == "" && isMap:
			if v, ok := m["value"]; ok {
				out = append(out, v)
			}
		case p.sub == "":
			out = append(out, el)
		}
	}
	return out
}

func present(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func compareValue(have any, op string, want any, exact bool) bool {
	switch w := want.(type) {
	case string:
		h, ok := have.(string)
		if !ok {
			if b, isBool := have.(bool); isBool {
				h = strconv.FormatBool(b)
			} else {
				return false
			}
		}
		if ta, err := time.Parse(time.RFC3339Nano, h); err == nil && op != "co" && op != "sw" && op != "ew" {
			if tw, err := time.Parse(time.RFC3339Nano, w); err == nil {
				return orderOp(op, ta.Compare(tw))
			}
		}
		if !exact {
			h, w = strings.ToLower(h), strings.ToLower(w)
		}
		switch op {
		case "eq":
			return h == w
		case "co":
			return strings.Contains(h, w)
		case "sw":
			return strings.HasPrefix(h, w)
		case "ew":
			return strings.HasSuffix(h, w)
		}
		return orderOp(op, strings.Compare(h, w))
	case float64:
		h, ok := have.(float64)
		if !ok {
			return false
		}
		switch {
		case h < w:
			return orderOp(op, -1)
		case h > w:
			return orderOp(op, 1)
		}
		return orderOp(op, 0)
	case bool:
		h, ok := have.(bool)
		if !ok {
			if s, isStr := have.(string); isStr {
				b, err := strconv.ParseBool(strings.ToLower(s))
				h, ok = b, err == nil
			}
		}
		return ok && op == "eq" && h == w
	}
	return false
}

func orderOp(op string, c int) bool {
	switch op {
	case "eq":
		return c == 0
	case "gt":
		return c > 0
	case "ge":
		return c >= 0
	case "lt":
		return c < 0
	case "le":
		return c <= 0
	}
	return false
}
