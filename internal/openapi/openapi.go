// Package openapi serves the OpenAPI document that describes both of ssodir's HTTP APIs.
package openapi

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.json
var document []byte

// Document is the OpenAPI 3.1 document.
func Document() []byte { return document }

// Register serves the document at GET /openapi.json (open, like the probes).
func Register(e *echo.Echo) {
	e.GET("/openapi.json", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, document)
	})
}
