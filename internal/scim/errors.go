package scim

import (
	"github.com/ssodir/ssodir/internal/apperr"
)

// SCIM's detail error keywords (RFC 7644 section 3.12, RFC 9865 section 2.1) travel as
// the code of an apperr.Error; the codes of the commands map to them in scimTypeOf.
const (
	typeInvalidFilter = "invalidFilter"
	typeInvalidSyntax = "invalidSyntax"
	typeInvalidPath   = "invalidPath"
	typeNoTarget      = "noTarget"
	typeInvalidValue  = "invalidValue"
	typeMutability    = "mutability"
	typeUniqueness    = "uniqueness"
	typeInvalidCursor = "invalidCursor"
	typeTooMany       = "tooMany"
)

var scimTypes = map[string]bool{typeInvalidFilter: true, typeInvalidSyntax: true, typeInvalidPath: true, typeNoTarget: true,
	typeInvalidValue: true, typeMutability: true, typeUniqueness: true, typeInvalidCursor: true, typeTooMany: true}

// badRequest is a 400 with a SCIM detail keyword.
func badRequest(scimType, detail string) *apperr.Error {
	return &apperr.Error{Kind: apperr.KindInvalid, Code: scimType, Message: detail}
}

// scimTypeOf is the detail keyword of an error, "" when SCIM defines none for it.
func scimTypeOf(e *apperr.Error) string {
	if scimTypes[e.Code] {
		return e.Code
	}
	switch e.Code {
	case apperr.CodeValidationFailed:
		return typeInvalidValue
	case apperr.CodeUsernameTaken, apperr.CodeEmailTaken, apperr.CodeGroupExists:
		return typeUniqueness
	}
	return ""
}
