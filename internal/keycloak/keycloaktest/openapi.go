package keycloaktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// SpecFile is the name of Keycloak's published Admin REST API description that the double
// checks request bodies and query parameters against.
const SpecFile = "admin-api-openapi-26.6.json"

// FindSpec looks for the Admin API description the way the project keeps it: next to the
// repository, in ../shared/keycloak relative to the directory holding go.mod. It walks up
// from the working directory (a test's working directory is its package directory), so it
// works from any package. ok is false when the file is not there; the double then skips
// the schema checks rather than failing, because the file is reference data outside the
// repository.
func FindSpec() (path string, ok bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "keycloak", SpecFile)
			if _, err := os.Stat(p); err == nil {
				return p, true
			}
			return "", false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// apiSpec is the part of the OpenAPI description the double needs: for every operation,
// the query parameters it declares and the schema of its JSON body.
type apiSpec struct {
	schemas map[string]*schema
	ops     map[string]*operation // "METHOD /admin/realms/{realm}/..."
	shapes  sync.Map              // *schema → *objectShape, merged once per schema
}

type operation struct {
	query map[string]bool
	body  *schema
}

// schema is the subset of an OpenAPI 3.0 schema object that Keycloak's description uses
// for its representations.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 string             `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	AllOf                []*schema          `json:"allOf"`
}

type specParameter struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

type specOperation struct {
	Parameters  []specParameter `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
}

var (
	specMu    sync.Mutex
	specCache = map[string]*apiSpec{}
)

// loadSpec parses the description once per process: it is half a megabyte and every test
// starts its own double.
func loadSpec(path string) (*apiSpec, error) {
	specMu.Lock()
	defer specMu.Unlock()
	if s, ok := specCache[path]; ok {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keycloak openapi: %w", err)
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse keycloak openapi %s: %w", path, err)
	}
	s := &apiSpec{schemas: doc.Components.Schemas, ops: map[string]*operation{}}
	for tmpl, item := range doc.Paths {
		var shared []specParameter
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				return nil, fmt.Errorf("parse parameters of %s: %w", tmpl, err)
			}
		}
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op specOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("parse %s %s: %w", method, tmpl, err)
			}
			o := &operation{query: map[string]bool{}}
			for _, p := range append(append([]specParameter(nil), shared...), op.Parameters...) {
				if p.In == "query" {
					o.query[p.Name] = true
				}
			}
			if op.RequestBody != nil {
				if c, ok := op.RequestBody.Content["application/json"]; ok {
					o.body = c.Schema
				}
			}
			s.ops[strings.ToUpper(method)+" "+tmpl] = o
		}
	}
	specCache[path] = s
	return s, nil
}

// checkQuery rejects query parameters the operation does not declare. Keycloak itself
// ignores them, but a misspelt parameter (briefRepresentaton=false) silently changes what
// comes back, which is exactly the kind of bug the double is there to catch.
func (s *apiSpec) checkQuery(method, tmpl string, names []string) error {
	op, ok := s.ops[method+" "+tmpl]
	if !ok {
		return fmt.Errorf("%s %s is not in the Admin API description", method, tmpl)
	}
	var unknown []string
	for _, n := range names {
		if !op.query[n] {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown query parameter(s) %s for %s %s", strings.Join(unknown, ", "), method, tmpl)
	}
	return nil
}

// checkBody rejects a body with fields the operation's schema does not have, or with values
// of the wrong JSON type, as Keycloak's Jackson mapping does ("Unrecognized field").
func (s *apiSpec) checkBody(method, tmpl string, body []byte) error {
	op, ok := s.ops[method+" "+tmpl]
	if !ok {
		return fmt.Errorf("%s %s is not in the Admin API description", method, tmpl)
	}
	if op.body == nil {
		if len(bytes.TrimSpace(body)) > 0 {
			return fmt.Errorf("%s %s takes no body", method, tmpl)
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if dec.More() {
		return errors.New("body has trailing data after the JSON value")
	}
	return s.check(v, op.body, "$")
}

func (s *apiSpec) resolve(sc *schema) (*schema, error) {
	for sc != nil && sc.Ref != "" {
		name, ok := strings.CutPrefix(sc.Ref, "#/components/schemas/")
		if !ok {
			return nil, fmt.Errorf("unsupported $ref %q", sc.Ref)
		}
		next, ok := s.schemas[name]
		if !ok {
			return nil, fmt.Errorf("unknown schema %q", name)
		}
		sc = next
	}
	return sc, nil
}

func (s *apiSpec) check(v any, sc *schema, at string) error {
	sc, err := s.resolve(sc)
	if err != nil || sc == nil {
		return err
	}
	if v == nil {
		// Jackson maps null to "not set" for every field.
		return nil
	}
	shape, err := s.shapeOf(sc)
	if err != nil {
		return err
	}
	props, additional := shape.props, shape.additional
	typ := sc.Type
	if typ == "" && (props != nil || additional != nil) {
		typ = "object"
	}
	switch typ {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %s", at, jsonType(v))
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := at + "." + k
			if p, ok := props[k]; ok {
				if err := s.check(obj[k], p, child); err != nil {
					return err
				}
				continue
			}
			switch {
			case additional == nil:
				return fmt.Errorf("%s: unrecognized field %q", at, k)
			case additional.any:
			default:
				if err := s.check(obj[k], additional.schema, child); err != nil {
					return err
				}
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %s", at, jsonType(v))
		}
		for i, item := range arr {
			if err := s.check(item, sc.Items, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: want a string, got %s", at, jsonType(v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a boolean, got %s", at, jsonType(v))
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: want an integer, got %s", at, jsonType(v))
		}
		if _, err := n.Int64(); err != nil {
			return fmt.Errorf("%s: want an integer, got %s", at, n)
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s: want a number, got %s", at, jsonType(v))
		}
	}
	return nil
}

type additionalProps struct {
	any    bool
	schema *schema
}

type objectShape struct {
	props      map[string]*schema
	additional *additionalProps
}

func (s *apiSpec) shapeOf(sc *schema) (*objectShape, error) {
	if v, ok := s.shapes.Load(sc); ok {
		return v.(*objectShape), nil
	}
	props, additional, err := s.mergeShape(sc)
	if err != nil {
		return nil, err
	}
	shape := &objectShape{props: props, additional: additional}
	s.shapes.Store(sc, shape)
	return shape, nil
}

// mergeShape merges the properties of a schema and of its allOf parts.
func (s *apiSpec) mergeShape(sc *schema) (map[string]*schema, *additionalProps, error) {
	var props map[string]*schema
	var additional *additionalProps
	add := func(part *schema) error {
		part, err := s.resolve(part)
		if err != nil || part == nil {
			return err
		}
		if part.Properties != nil {
			if props == nil {
				props = map[string]*schema{}
			}
			for k, v := range part.Properties {
				props[k] = v
			}
		}
		if raw := bytes.TrimSpace(part.AdditionalProperties); len(raw) > 0 {
			switch string(raw) {
			case "true", "{}":
				additional = &additionalProps{any: true}
			case "false":
			default:
				var ap schema
				if err := json.Unmarshal(raw, &ap); err != nil {
					return fmt.Errorf("parse additionalProperties: %w", err)
				}
				additional = &additionalProps{schema: &ap}
			}
		}
		return nil
	}
	if err := add(sc); err != nil {
		return nil, nil, err
	}
	for _, part := range sc.AllOf {
		if err := add(part); err != nil {
			return nil, nil, err
		}
	}
	return props, additional, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}
