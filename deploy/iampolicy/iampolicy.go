// Package iampolicy evaluates the policy statements of a synthesized CloudFormation template
// the way IAM does, for the parts ssodir's stack uses: identity policies (a role's) and
// resource policies (a key's, a topic's, a queue's, with their principals), actions and
// resources with the wildcards * and ?, explicit Deny over Allow in either, a key policy that
// must allow a call itself or delegate to IAM (the account as principal), and the condition
// operators StringEquals, StringLike, ArnEquals, ArnLike and Bool (with IfExists), evaluated
// against the request's context keys (kms:ViaService, aws:SourceArn, aws:SecureTransport…).
// CloudFormation intrinsics (Ref, Fn::GetAtt, Fn::Join) are resolved to the values a test
// gives for the stage. Anything else (NotAction, NotResource, NotPrincipal, another operator
// or intrinsic) is an error, never a silent allow or deny.
package iampolicy

import (
	"fmt"
	"slices"
	"strings"
)

// Statement is one policy statement with its intrinsics resolved.
type Statement struct {
	Sid       string
	Effect    string
	Actions   []string
	Resources []string
	// Conditions: operator → key → values.
	Conditions map[string]map[string][]string
	// Principals of a resource policy's statement: "*", "AWS:<arn or account>",
	// "Service:<name>"; none in an identity policy.
	Principals []string
}

// Request is one call to authorise.
type Request struct {
	// Principal is who calls: "AWS:<role arn>" or "Service:<name>" (for resource policies).
	Principal string
	Action    string
	Resource  string
	Context   map[string]string
}

// Values resolve intrinsics: "AWS::Region" and other pseudo parameters, "Ref:<logical id>"
// and "GetAtt:<logical id>.<attribute>".
type Values map[string]string

// Resolve turns a template value (a string or an intrinsic) into a string.
func (v Values) Resolve(x any) (string, error) {
	switch t := x.(type) {
	case string:
		return t, nil
	case map[string]any:
		if len(t) != 1 {
			return "", fmt.Errorf("not an intrinsic: %v", t)
		}
		for fn, arg := range t {
			switch fn {
			case "Ref":
				name, _ := arg.(string)
				if val, ok := v[name]; ok && strings.HasPrefix(name, "AWS::") {
					return val, nil
				}
				if val, ok := v["Ref:"+name]; ok {
					return val, nil
				}
				return "", fmt.Errorf("no value for Ref %v", arg)
			case "Fn::GetAtt":
				parts, _ := arg.([]any)
				if len(parts) != 2 {
					return "", fmt.Errorf("bad Fn::GetAtt %v", arg)
				}
				key := fmt.Sprintf("GetAtt:%v.%v", parts[0], parts[1])
				if val, ok := v[key]; ok {
					return val, nil
				}
				return "", fmt.Errorf("no value for %s", key)
			case "Fn::Join":
				parts, _ := arg.([]any)
				if len(parts) != 2 {
					return "", fmt.Errorf("bad Fn::Join %v", arg)
				}
				sep, _ := parts[0].(string)
				items, _ := parts[1].([]any)
				var out []string
				for _, it := range items {
					s, err := v.Resolve(it)
					if err != nil {
						return "", err
					}
					out = append(out, s)
				}
				return strings.Join(out, sep), nil
			}
			return "", fmt.Errorf("unsupported intrinsic %s", fn)
		}
	}
	return "", fmt.Errorf("unsupported value %T %v", x, x)
}

// list is a value that may be one item or a list of them, resolved.
func (v Values) list(x any) ([]string, error) {
	items, ok := x.([]any)
	if !ok {
		items = []any{x}
	}
	var out []string
	for _, it := range items {
		s, err := v.Resolve(it)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Parse reads a template's identity PolicyDocument (a role's: no principals).
func Parse(doc map[string]any, v Values) ([]Statement, error) { return parse(doc, v, false) }

// ParseResource reads a resource policy (a KeyPolicy, a topic's or a queue's
// PolicyDocument): every statement names its principals.
func ParseResource(doc map[string]any, v Values) ([]Statement, error) { return parse(doc, v, true) }

func parse(doc map[string]any, v Values, resource bool) ([]Statement, error) {
	raw, _ := doc["Statement"].([]any)
	var out []Statement
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("statement %v is not an object", r)
		}
		for _, unsupported := range []string{"NotAction", "NotResource", "NotPrincipal"} {
			if _, ok := m[unsupported]; ok {
				return nil, fmt.Errorf("statement %v: %s is not supported by this evaluator", m["Sid"], unsupported)
			}
		}
		st := Statement{Conditions: map[string]map[string][]string{}}
		principal, has := m["Principal"]
		switch {
		case has && !resource:
			return nil, fmt.Errorf("statement %v: a Principal in an identity policy", m["Sid"])
		case !has && resource:
			return nil, fmt.Errorf("statement %v: a resource policy's statement without a Principal", m["Sid"])
		case has:
			ps, err := v.principals(principal)
			if err != nil {
				return nil, fmt.Errorf("statement %v: %w", m["Sid"], err)
			}
			st.Principals = ps
		}
		st.Sid, _ = m["Sid"].(string)
		st.Effect, _ = m["Effect"].(string)
		if st.Effect != "Allow" && st.Effect != "Deny" {
			return nil, fmt.Errorf("statement %s: effect %q", st.Sid, st.Effect)
		}
		var err error
		if st.Actions, err = v.list(m["Action"]); err != nil {
			return nil, fmt.Errorf("statement %s: %w", st.Sid, err)
		}
		if st.Resources, err = v.list(m["Resource"]); err != nil {
			return nil, fmt.Errorf("statement %s: %w", st.Sid, err)
		}
		conds, _ := m["Condition"].(map[string]any)
		for op, keys := range conds {
			km, ok := keys.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("statement %s: condition %s", st.Sid, op)
			}
			st.Conditions[op] = map[string][]string{}
			for k, vals := range km {
				if st.Conditions[op][k], err = v.list(vals); err != nil {
					return nil, fmt.Errorf("statement %s: condition %s %s: %w", st.Sid, op, k, err)
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// principals reads a Principal: "*" or {"AWS"|"Service": one or a list}.
func (v Values) principals(x any) ([]string, error) {
	if x == "*" {
		return []string{"*"}, nil
	}
	m, ok := x.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, fmt.Errorf("principal %v", x)
	}
	var out []string
	for kind, vals := range m {
		if kind != "AWS" && kind != "Service" {
			return nil, fmt.Errorf("principal kind %s is not supported by this evaluator", kind)
		}
		list, err := v.list(vals)
		if err != nil {
			return nil, fmt.Errorf("principal %s: %w", kind, err)
		}
		for _, p := range list {
			if kind == "AWS" && p == "*" {
				out = append(out, "*")
				continue
			}
			out = append(out, kind+":"+p)
		}
	}
	return out, nil
}

// Allowed reports whether the statements allow the request: some Allow statement matches
// and no Deny does. by lists the Sids of the Allow statements that match.
func Allowed(statements []Statement, req Request) (allowed bool, by []string, err error) {
	for _, st := range statements {
		ok, err := st.Matches(req)
		if err != nil {
			return false, nil, err
		}
		if !ok {
			continue
		}
		if st.Effect == "Deny" {
			return false, nil, nil
		}
		by = append(by, st.Sid)
	}
	return len(by) > 0, by, nil
}

// Matches reports whether the statement applies to the request (its action, resource and
// conditions), whatever its effect.
func (st Statement) Matches(req Request) (bool, error) {
	if !slices.ContainsFunc(st.Actions, func(a string) bool { return Glob(strings.ToLower(a), strings.ToLower(req.Action)) }) {
		return false, nil
	}
	if !slices.ContainsFunc(st.Resources, func(r string) bool { return Glob(r, req.Resource) }) {
		return false, nil
	}
	for op, keys := range st.Conditions {
		for key, want := range keys {
			ok, err := condition(op, req.Context, key, want)
			if err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

// condition evaluates one operator on one key: true when the request's value matches any
// of the wanted values. A key the request lacks fails the condition, unless IfExists.
func condition(op string, ctx map[string]string, key string, want []string) (bool, error) {
	base, ifExists := strings.CutSuffix(op, "IfExists")
	got, present := ctx[key]
	if !present {
		return ifExists, nil
	}
	var match func(pattern, value string) bool
	switch base {
	case "StringEquals", "ArnEquals":
		match = func(p, v string) bool { return p == v }
	case "StringLike", "ArnLike":
		match = Glob
	case "Bool":
		match = func(p, v string) bool { return strings.EqualFold(p, v) }
	default:
		return false, fmt.Errorf("condition operator %s is not supported by this evaluator", op)
	}
	return slices.ContainsFunc(want, func(p string) bool { return match(p, got) }), nil
}

// Glob matches value against pattern, where * is any run of characters (also ':' and
// '/', as in IAM) and ? any one character.
func Glob(pattern, value string) bool {
	p, v := 0, 0
	star, mark := -1, 0
	for v < len(value) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == value[v]):
			p++
			v++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, v
			p++
		case star >= 0:
			p = star + 1
			mark++
			v = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Decide is IAM's decision on a call within one account, by a principal whose identity
// policy is identity (none for a service), on a resource whose policy is resource (none:
// nil). An explicit Deny in either refuses. A key policy (keyPolicy) must allow the call
// itself: naming the principal, or naming the account (its root), which delegates to the
// identity policy. Any other resource's policy adds to the identity policy: either allows.
// account is the caller's account. by says which statements decided.
func Decide(identity, resource []Statement, req Request, account string, keyPolicy bool) (allowed bool, by []string, err error) {
	idAllowed, idBy, err := Allowed(identity, req)
	if err != nil {
		return false, nil, err
	}
	for _, st := range identity {
		if st.Effect != "Deny" {
			continue
		}
		if ok, err := st.Matches(req); err != nil || ok {
			return false, []string{"identity Deny " + st.Sid}, err
		}
	}
	var direct, delegated []string
	for _, st := range resource {
		ok, err := st.Matches(req)
		if err != nil {
			return false, nil, err
		}
		if !ok {
			continue
		}
		who := st.principal(req.Principal, account)
		if who == noOne {
			continue
		}
		if st.Effect == "Deny" {
			return false, []string{"resource Deny " + st.Sid}, nil
		}
		if who == exactly {
			direct = append(direct, "resource "+st.Sid)
		} else {
			delegated = append(delegated, "resource "+st.Sid)
		}
	}
	switch {
	case len(direct) > 0:
		return true, direct, nil
	case keyPolicy:
		if len(delegated) > 0 && idAllowed {
			return true, append(delegated, idBy...), nil
		}
		return false, nil, nil
	}
	return idAllowed, idBy, nil
}

type principalMatch int

const (
	noOne principalMatch = iota
	exactly
	// account: the statement names the caller's account, which leaves the decision to its
	// identity policy.
	account
)

func (st Statement) principal(caller, acct string) principalMatch {
	for _, p := range st.Principals {
		switch {
		case p == "*" || p == caller:
			return exactly
		case strings.HasPrefix(caller, "AWS:") && acct != "" &&
			(p == "AWS:"+acct || (strings.HasPrefix(p, "AWS:arn:") && strings.HasSuffix(p, ":iam::"+acct+":root"))):
			return account
		}
	}
	return noOne
}
