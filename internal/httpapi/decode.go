package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
)

// DecodeJSON decodes the request body, a single JSON object, into v (a pointer). Every
// failure the request causes is an *apperr.Error a client can act on: 415 for another media type, 413 for a
// body over MaxBodyBytes, 400 naming the offset or field for anything else, including
// unknown fields, so that a typo in a field name is reported, not silently ignored.
func DecodeJSON(c echo.Context, v any) error {
	if err := checkJSONContentType(c.Request().Header.Get(echo.HeaderContentType)); err != nil {
		return err
	}
	data, err := readBody(c.Request().Body)
	if err != nil {
		return err
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return apperr.Invalid("request body is empty")
	}
	// Also rules out null, which would decode into a struct as if nothing had been sent.
	if trimmed[0] != '{' {
		return apperr.Invalid("request body must be a JSON object")
	}

	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apperr.Invalid("request body has data after the JSON object")
	}
	return nil
}

func checkJSONContentType(header string) error {
	mediaType, params, err := mime.ParseMediaType(header)
	if err != nil || mediaType != echo.MIMEApplicationJSON {
		return errUnsupportedMedia()
	}
	for name, value := range params {
		if name != "charset" || !strings.EqualFold(value, "utf-8") {
			return errUnsupportedMedia()
		}
	}
	return nil
}

func errUnsupportedMedia() *apperr.Error {
	return &apperr.Error{Kind: apperr.KindUnsupportedMedia, Code: apperr.CodeUnsupportedMediaType,
		Message: "request body must be application/json"}
}

// readBody reads at most MaxBodyBytes, whether or not limitBody ran before.
func readBody(body io.Reader) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge), err == nil && len(data) > MaxBodyBytes:
		return nil, errTooLarge()
	case err != nil:
		invalid := apperr.Invalid("request body could not be read")
		invalid.Err = err
		return nil, invalid
	}
	return data, nil
}

// decodeError turns encoding/json's errors into messages in the client's terms: JSON field
// names and JSON types, never Go's.
func decodeError(err error) error {
	if e, ok := apperr.As(err); ok {
		// A field type's own UnmarshalJSON already judged the value.
		return e
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var target *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &target):
		// The handler passed a non-pointer: a bug, answered as internal.
		return fmt.Errorf("decode request body: %w", err)
	case errors.As(err, &syntax):
		return apperr.Invalid(fmt.Sprintf("request body is not valid JSON at offset %d", syntax.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apperr.Invalid("request body is not valid JSON: it ends early")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return apperr.Invalid("request body must be a JSON object")
		}
		return apperr.InvalidField(typ.Field, fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type), typ.Value))
	}
	// encoding/json reports an unknown field only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unquoted, uErr := strconv.Unquote(name); uErr == nil {
			name = unquoted
		}
		return apperr.Invalid(fmt.Sprintf("unknown field %q", name),
			apperr.FieldError{Field: name, Message: "unknown field"})
	}
	invalid := apperr.Invalid("request body does not match the expected shape")
	invalid.Err = err
	return invalid
}

// jsonKind names the JSON type a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}
