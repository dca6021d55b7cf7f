package scim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// PATCH (RFC 7644 section 3.5.2) as identity providers send it: op names in any case
// (Entra's "Replace"), operations without a path whose value holds attributes or dotted
// paths as keys (Okta's `{"op":"replace","value":{"active":false}}`, Entra's
// `{"name.givenName": …}`), value-path filters, `add` and `replace` on a filter that
// matches nothing creating the entry the filter describes, and `remove` of members listed
// in the value (Entra).

// maxPatchOps bounds the operations of one PATCH.
const maxPatchOps = 1000

type patchOp struct {
	op    string // add, replace or remove
	path  string // "" for none
	value any    // lower-cased keys
}

// schema is what the PATCH engine needs to know of a resource type's attributes.
type schema struct {
	multi   map[string]bool // multi-valued attributes
	complex map[string]bool // singular complex attributes
}

var userSchema = schema{
	multi: map[string]bool{"emails": true, "phonenumbers": true, "ims": true, "photos": true, "addresses": true,
		"groups": true, "entitlements": true, "roles": true, "x509certificates": true},
	complex: map[string]bool{"name": true, "meta": true, "manager": true},
}

var groupSchema = schema{multi: map[string]bool{"members": true}, complex: map[string]bool{"meta": true}}

// parsePatch decodes a PatchOp request body.
func parsePatch(body []byte) ([]patchOp, error) {
	var raw any
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, badRequest(typeInvalidSyntax, "the body is not a JSON object")
	}
	m, ok := lowerKeys(raw).(map[string]any)
	if !ok {
		return nil, badRequest(typeInvalidSyntax, "the body is not a JSON object")
	}
	if schemas, ok := m["schemas"]; ok && !containsFold(schemas, URNPatchOp) {
		return nil, badRequest(typeInvalidSyntax, "schemas must name "+URNPatchOp)
	}
	list, ok := m["operations"].([]any)
	if !ok || len(list) == 0 {
		return nil, badRequest(typeInvalidSyntax, "Operations must be a non-empty array")
	}
	if len(list) > maxPatchOps {
		return nil, badRequest(typeTooMany, fmt.Sprintf("at most %d operations", maxPatchOps))
	}
	ops := make([]patchOp, 0, len(list))
	for i, el := range list {
		o, ok := el.(map[string]any)
		if !ok {
			return nil, badRequest(typeInvalidSyntax, fmt.Sprintf("operation %d is not an object", i+1))
		}
		name, _ := o["op"].(string)
		name = strings.ToLower(name)
		if name != "add" && name != "replace" && name != "remove" {
			return nil, badRequest(typeInvalidSyntax, fmt.Sprintf("operation %d: op must be add, replace or remove", i+1))
		}
		op := patchOp{op: name, value: o["value"]}
		if p, ok := o["path"]; ok && p != nil {
			s, ok := p.(string)
			if !ok {
				return nil, badRequest(typeInvalidPath, fmt.Sprintf("operation %d: path must be a string", i+1))
			}
			op.path = strings.TrimSpace(s)
		}
		if op.path == "" && op.op == "remove" {
			return nil, badRequest(typeNoTarget, fmt.Sprintf("operation %d: remove needs a path", i+1))
		}
		if op.op != "remove" && op.value == nil {
			return nil, badRequest(typeInvalidValue, fmt.Sprintf("operation %d: %s needs a value", i+1, op.op))
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func containsFold(v any, want string) bool {
	for _, e := range elements(v) {
		if s, ok := e.(string); ok && strings.EqualFold(s, want) {
			return true
		}
	}
	return false
}

// patchPath is a parsed PATCH path: an attribute, optionally narrowed by a value filter,
// optionally down to a sub-attribute.
type patchPath struct {
	attrPath
	filter filter
}

func parsePatchPath(s string) (patchPath, error) {
	invalid := func(msg string) error { return badRequest(typeInvalidPath, fmt.Sprintf("path %q: %s", s, msg)) }
	if len(s) > maxFilterLen {
		return patchPath{}, invalid("too long")
	}
	p := &parser{}
	if err := p.lex(s); err != nil {
		return patchPath{}, invalid(err.Error())
	}
	if len(p.toks) == 0 || p.toks[0].kind != tokWord {
		return patchPath{}, invalid("must start with an attribute")
	}
	ap, err := parseAttrPath(p.toks[0].text)
	if err != nil {
		return patchPath{}, invalid(err.Error())
	}
	p.pos = 1
	out := patchPath{attrPath: ap}
	if t, ok := p.peek(); ok && t.kind == tokLBracket {
		if ap.sub != "" {
			return patchPath{}, invalid("a value filter follows an attribute, not a sub-attribute")
		}
		p.pos++
		if out.filter, err = p.or(1); err != nil {
			return patchPath{}, invalid(err.Error())
		}
		if err := p.expect(tokRBracket, "\"]\""); err != nil {
			return patchPath{}, invalid(err.Error())
		}
		if t, ok := p.peek(); ok && t.kind == tokSub {
			p.pos++
			out.sub = t.str
		}
	}
	if p.pos != len(p.toks) {
		return patchPath{}, invalid(fmt.Sprintf("unexpected %q", p.toks[p.pos].text))
	}
	return out, nil
}

// applyPatch applies ops, in order, to a resource document.
func applyPatch(doc map[string]any, ops []patchOp, sch schema) error {
	for _, op := range ops {
		if err := applyOp(doc, op, sch); err != nil {
			return err
		}
	}
	return nil
}

func applyOp(doc map[string]any, op patchOp, sch schema) error {
	value := lowerKeys(op.value)
	if op.path != "" {
		p, err := parsePatchPath(op.path)
		if err != nil {
			return err
		}
		return applyPath(doc, op.op, p, value, sch)
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return badRequest(typeInvalidValue, op.op+" without a path needs an object value")
	}
	for _, k := range slices.Sorted(mapsKeys(obj)) {
		v := obj[k]
		if sub, isObj := v.(map[string]any); isObj && isSchemaURN(k) {
			// An extension's (or the core schema's) attributes as one object.
			for _, sk := range slices.Sorted(mapsKeys(sub)) {
				if err := applyPath(doc, op.op, patchPath{attrPath: attrPath{urn: k, attr: sk}}, sub[sk], sch); err != nil {
					return err
				}
			}
			continue
		}
		p, err := parsePatchPath(k)
		if err != nil {
			return err
		}
		if err := applyPath(doc, op.op, p, v, sch); err != nil {
			return err
		}
	}
	return nil
}

// isSchemaURN reports whether a lower-cased key names a schema this port knows.
func isSchemaURN(k string) bool { return isCoreURN(k) || k == enterpriseKey }

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// applyPath applies one operation at a path. Attributes of extension schemas this port
// does not know are not kept, so operations on them change nothing.
func applyPath(doc map[string]any, op string, p patchPath, value any, sch schema) error {
	cont, inExt := doc, false
	if p.urn != "" && !isCoreURN(p.urn) {
		if p.urn != enterpriseKey {
			return nil
		}
		ext, ok := doc[p.urn].(map[string]any)
		if !ok {
			if op == "remove" {
				return nil
			}
			ext = map[string]any{}
			doc[p.urn] = ext
		}
		cont, inExt = ext, true
	}
	multi := sch.multi[p.attr] && !inExt
	switch {
	case p.filter == nil && p.sub == "":
		applyWhole(cont, op, p.attr, value, multi, sch.complex[p.attr])
	case p.filter == nil && multi:
		els := elements(cont[p.attr])
		if len(els) == 0 && op != "remove" {
			cont[p.attr] = []any{map[string]any{p.sub: value}}
			return nil
		}
		for _, el := range els {
			if m, ok := el.(map[string]any); ok {
				setSub(m, op, p.sub, value)
			}
		}
	case p.filter == nil:
		m, ok := cont[p.attr].(map[string]any)
		if !ok {
			if op == "remove" {
				return nil
			}
			m = map[string]any{}
			cont[p.attr] = m
		}
		setSub(m, op, p.sub, value)
	default:
		if !multi {
			return badRequest(typeInvalidPath, fmt.Sprintf("%s is not multi-valued: it takes no value filter", p.attr))
		}
		return applyFiltered(cont, op, p, value)
	}
	return nil
}

func setSub(m map[string]any, op, sub string, value any) {
	if op == "remove" {
		delete(m, sub)
		return
	}
	m[sub] = value
}

// applyWhole applies an operation to a whole attribute.
func applyWhole(cont map[string]any, op, attr string, value any, multi, complexAttr bool) {
	switch {
	case op == "remove" && multi && value != nil:
		// Entra removes members by listing them in the value of a remove on "members".
		gone := elements(value)
		var keep []any
		for _, el := range elements(cont[attr]) {
			if !slices.ContainsFunc(gone, func(g any) bool { return sameValue(el, g) }) {
				keep = append(keep, el)
			}
		}
		cont[attr] = keep
	case op == "remove":
		delete(cont, attr)
	case multi && op == "add":
		out := slices.Clone(elements(cont[attr]))
		for _, v := range elements(value) {
			if !slices.ContainsFunc(out, func(e any) bool { return sameValue(e, v) }) {
				out = append(out, v)
			}
		}
		cont[attr] = out
	case multi:
		cont[attr] = slices.Clone(elements(value))
	default:
		old, oldIsMap := cont[attr].(map[string]any)
		nv, newIsMap := value.(map[string]any)
		if complexAttr && oldIsMap && newIsMap {
			// Sub-attributes not in the value are left as they are (RFC 7644 3.5.2.1, 3.5.2.3).
			for k, v := range nv {
				old[k] = v
			}
			return
		}
		cont[attr] = value
	}
}

// sameValue reports whether two entries of a multi-valued attribute are the same: equal
// "value" sub-attributes (the member, the address), or equal as a whole.
func sameValue(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		av, ahas := am["value"]
		bv, bhas := bm["value"]
		if ahas && bhas {
			return reflect.DeepEqual(av, bv)
		}
	}
	return reflect.DeepEqual(a, b)
}

// applyFiltered applies an operation to the entries of a multi-valued attribute that a
// value filter selects.
func applyFiltered(cont map[string]any, op string, p patchPath, value any) error {
	els := elements(cont[p.attr])
	var matched []int
	for i, el := range els {
		if m, ok := el.(map[string]any); ok && matches(p.filter, m) {
			matched = append(matched, i)
		}
	}
	if op == "remove" {
		if p.sub == "" {
			var keep []any
			for i, el := range els {
				if !slices.Contains(matched, i) {
					keep = append(keep, el)
				}
			}
			cont[p.attr] = keep
			return nil
		}
		for _, i := range matched {
			delete(els[i].(map[string]any), p.sub)
		}
		return nil
	}
	if len(matched) == 0 {
		// The entry the filter describes does not exist: add it (Entra sends both add and
		// replace for `emails[type eq "work"].value` whether or not a work email exists).
		el, ok := template(p.filter)
		if !ok {
			return badRequest(typeNoTarget, fmt.Sprintf("no %s entry matches the filter, and the filter does not describe one to add", p.attr))
		}
		fill(el, p.sub, value)
		cont[p.attr] = append(slices.Clone(els), el)
		return nil
	}
	for _, i := range matched {
		fill(els[i].(map[string]any), p.sub, value)
	}
	cont[p.attr] = els
	return nil
}

func fill(el map[string]any, sub string, value any) {
	switch v := value.(type) {
	case map[string]any:
		if sub != "" {
			el[sub] = v
			return
		}
		for k, x := range v {
			el[k] = x
		}
	default:
		if sub == "" {
			sub = "value"
		}
		el[sub] = v
	}
}

// template is the entry a filter of `eq` comparisons joined by `and` describes.
func template(f filter) (map[string]any, bool) {
	out := map[string]any{}
	var walk func(f filter) bool
	walk = func(f filter) bool {
		switch x := f.(type) {
		case logical:
			return x.and && walk(x.l) && walk(x.r)
		case compare:
			if x.op != "eq" || x.path.sub != "" || x.path.urn != "" || x.value == nil {
				return false
			}
			out[x.path.attr] = x.value
			return true
		}
		return false
	}
	return out, walk(f)
}
