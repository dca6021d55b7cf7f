package httpapi

import (
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
)

// decodePathParams percent-decodes every path parameter of every route, once, before any
// route middleware or handler reads it: handlers then take c.Param as the value meant
// (a username "ann@example.com", a group name "Sales EU") and never decode again.
//
// echo routes on the request's raw path when it has one — when the client encoded a
// character that needs no encoding in a path, such as '@' as %40, or one that does, such
// as a space — and then leaves every parameter as sent; without a raw path it routes on
// the decoded path and the parameters are decoded already. Decoding here in both cases
// would decode twice ("%2540" would become "@").
func decodePathParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().URL.RawPath == "" {
			return next(c)
		}
		values := c.ParamValues()
		if len(values) == 0 {
			return next(c)
		}
		decoded := make([]string, len(values))
		for i, v := range values {
			d, err := url.PathUnescape(v)
			if err != nil {
				// net/http refuses such a path before routing; another way in (a Lambda
				// event) may not.
				return apperr.Invalid("the path holds a malformed percent-encoding")
			}
			decoded[i] = d
		}
		c.SetParamValues(decoded...)
		return next(c)
	}
}
