package scim

import (
	"strings"
)

// projection is a request's `attributes` or `excludedAttributes` (RFC 7644 section
// 3.4.2.5): which attributes of a resource to return. schemas and id are always returned.
type projection struct {
	include, exclude []attrPath
}

func parseProjection(attributes, excluded string) (projection, error) {
	var p projection
	var err error
	if p.include, err = attrList(attributes); err != nil {
		return p, err
	}
	p.exclude, err = attrList(excluded)
	return p, err
}

func attrList(s string) ([]attrPath, error) {
	var out []attrPath
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := parseAttrPath(part)
		if err != nil {
			return nil, badRequest(typeInvalidValue, "attributes: "+err.Error())
		}
		if isCoreURN(p.urn) {
			p.urn = ""
		}
		out = append(out, p)
	}
	return out, nil
}

// wants reports whether the answer includes the top-level attribute attr (lower-cased),
// so that what it leaves out need not be read at all (a group's members).
func (p projection) wants(attr string) bool {
	for _, x := range p.exclude {
		if x.urn == "" && x.attr == attr && x.sub == "" {
			return false
		}
	}
	if len(p.include) == 0 {
		return true
	}
	for _, x := range p.include {
		if x.urn == "" && x.attr == attr {
			return true
		}
	}
	return false
}

// asked reports whether the request names attributes at all.
func (p projection) asked() bool { return len(p.include) > 0 || len(p.exclude) > 0 }

// apply returns the parts of a rendered resource the projection asks for.
func (p projection) apply(res map[string]any) map[string]any {
	if !p.asked() {
		return res
	}
	if len(p.include) > 0 {
		out := map[string]any{}
		for _, k := range []string{"schemas", "id"} {
			if v, ok := res[k]; ok {
				out[k] = v
			}
		}
		for _, a := range p.include {
			copyPath(out, res, a)
		}
		res = out
	}
	for _, a := range p.exclude {
		if a.urn == "" && (a.attr == "id" || a.attr == "schemas") {
			continue
		}
		dropPath(res, a)
	}
	return res
}

// key finds the key of m that is name in any case.
func key(m map[string]any, name string) (string, bool) {
	for k := range m {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// within is the object an attribute path lives in: the resource, or its extension's
// object (made in out when make is set).
func within(res map[string]any, urn string, make bool) map[string]any {
	if urn == "" {
		return res
	}
	k, ok := key(res, urn)
	if !ok {
		if !make {
			return nil
		}
		k = urn
		if urn == enterpriseKey {
			k = URNEnterpriseUser
		}
		res[k] = map[string]any{}
	}
	m, _ := res[k].(map[string]any)
	return m
}

func copyPath(out, res map[string]any, a attrPath) {
	src := within(res, a.urn, false)
	if src == nil {
		return
	}
	k, ok := key(src, a.attr)
	if !ok {
		return
	}
	dst := within(out, a.urn, true)
	if a.sub == "" {
		dst[k] = src[k]
		return
	}
	switch v := src[k].(type) {
	case map[string]any:
		sk, ok := key(v, a.sub)
		if !ok {
			return
		}
		m, _ := dst[k].(map[string]any)
		if m == nil {
			m = map[string]any{}
			dst[k] = m
		}
		m[sk] = v[sk]
	case []any:
		var els []any
		for _, el := range v {
			if em, ok := el.(map[string]any); ok {
				if sk, ok := key(em, a.sub); ok {
					els = append(els, map[string]any{sk: em[sk]})
				}
			}
		}
		dst[k] = els
	}
}

func dropPath(res map[string]any, a attrPath) {
	src := within(res, a.urn, false)
	if src == nil {
		return
	}
	k, ok := key(src, a.attr)
	if !ok {
		return
	}
	if a.sub == "" {
		delete(src, k)
		return
	}
	switch v := src[k].(type) {
	case map[string]any:
		if sk, ok := key(v, a.sub); ok {
			delete(v, sk)
		}
	case []any:
		for _, el := range v {
			if em, ok := el.(map[string]any); ok {
				if sk, ok := key(em, a.sub); ok {
					delete(em, sk)
				}
			}
		}
	}
}
