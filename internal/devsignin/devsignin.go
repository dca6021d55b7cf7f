// Package devsignin lets `make run` print a web console link that does not carry the
// development token: the link carries a one-time code, and the console exchanges it for
// the token. A code is valid for a minute and for one exchange, so the copy that the
// browser's history keeps of the link signs no one in.
//
// It exists only where SSO_BOOTSTRAP_TOKEN is set (a development installation). Codes live
// in the memory of the query API that minted them: the query API writes nothing, and a
// development installation runs one query API.
package devsignin

import (
	"crypto/rand"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/objects"
)

// Paths of the two routes, next to the console they serve.
const (
	MintPath   = "/console/dev-codes"
	RedeemPath = "/console/dev-codes/redeem"
)

// TTL is how long a minted code may be exchanged.
const TTL = time.Minute

// maxCodes bounds the codes waiting for their exchange; minting beyond it forgets the
// oldest, so a loop that mints without end holds a bounded amount of memory.
const maxCodes = 64

// Codes mints and redeems the one-time codes of one query API.
type Codes struct {
	token string
	now   func() time.Time

	mu    sync.Mutex
	codes map[[sha256.Size]byte]time.Time // hash of a code → when it expires
	order [][sha256.Size]byte             // minting order, to forget the oldest
}

// New makes the codes that redeem for token, the development bootstrap token. now is the
// clock (nil: time.Now).
func New(token string, now func() time.Time) *Codes {
	if now == nil {
		now = time.Now
	}
	return &Codes{token: token, now: now, codes: map[[sha256.Size]byte]time.Time{}}
}

// Mint makes a new code and says until when it may be exchanged. Only its hash is kept.
func (c *Codes) Mint() (string, time.Time) {
	code := rand.Text()
	h := sha256.Sum256([]byte(code))
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.prune(now)
	for len(c.order) >= maxCodes {
		delete(c.codes, c.order[0])
		c.order = c.order[1:]
	}
	expires := now.Add(TTL)
	c.codes[h] = expires
	c.order = append(c.order, h)
	return code, expires
}

// Redeem answers the token for a code minted here, unexpired and never redeemed before;
// whatever the answer, the code cannot be redeemed again.
func (c *Codes) Redeem(code string) (string, bool) {
	h := sha256.Sum256([]byte(code))
	c.mu.Lock()
	defer c.mu.Unlock()
	expires, ok := c.codes[h]
	if !ok {
		return "", false
	}
	delete(c.codes, h)
	if !c.now().Before(expires) {
		return "", false
	}
	return c.token, true
}

// prune forgets expired codes.
func (c *Codes) prune(now time.Time) {
	kept := c.order[:0]
	for _, h := range c.order {
		if expires, ok := c.codes[h]; ok && now.Before(expires) {
			kept = append(kept, h)
		} else {
			delete(c.codes, h)
		}
	}
	c.order = kept
}

// Minted is the answer to a mint.
type Minted struct {
	Code      string `json:"code"`
	ExpiresAt string `json:"expires_at"`
}

// Redeemed is the answer to an exchange.
type Redeemed struct {
	Token   string `json:"token"`
	Subject string `json:"subject"`
}

type redeemRequest struct {
	Code string `json:"code"`
}

// Register serves the two routes: mint behind authn (the caller must then hold the
// development token itself, not merely a token with every scope), redeem open (the code
// is the credential). Both answers carry secrets, so neither may be cached.
func Register(e *echo.Echo, codes *Codes, authn echo.MiddlewareFunc) {
	e.POST(MintPath, func(c echo.Context) error {
		if !httpapi.PrincipalFrom(c).Bootstrap {
			return apperr.Forbidden("only the development token mints console sign-in codes")
		}
		code, expires := codes.Mint()
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusCreated, Minted{Code: code, ExpiresAt: objects.Timestamp(expires)})
	}, authn)
	e.POST(RedeemPath, func(c echo.Context) error {
		var in redeemRequest
		if err := httpapi.DecodeJSON(c, &in); err != nil {
			return err
		}
		token, ok := codes.Redeem(in.Code)
		if !ok {
			return apperr.InvalidField("code", "is unknown, expired or already used: print a fresh sign-in link")
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, Redeemed{Token: token, Subject: auth.BootstrapSubject})
	})
}
