package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/secrets"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// verify is the Standard Webhooks verification, written from the specification alone: the
// key is the base64 after "whsec_"; the signed content is id.timestamp.body; the header holds
// space-separated "v1,<base64 HMAC-SHA256>" signatures, any of which may match.
func verify(t *testing.T, secret string, h http.Header, body []byte) bool {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + string(body)))
	want := mac.Sum(nil)
	for _, sig := range strings.Split(h.Get("webhook-signature"), " ") {
		v, enc, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func TestSignMatchesTheSpecificationsExample(t *testing.T) {
	// The Standard Webhooks reference libraries' test vector.
	got, err := webhooks.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestSignedHeadersVerifyWithEitherSecretAfterARotation(t *testing.T) {
	current, err := webhooks.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	previous, _ := webhooks.NewSecret()
	other, _ := webhooks.NewSecret()
	if !strings.HasPrefix(current, "whsec_") || current == previous {
		t.Fatalf("secrets %q, %q", current, previous)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(current, "whsec_"))
	if len(key) < 24 {
		t.Fatalf("a secret's key is %d bytes", len(key))
	}
	body := []byte(`{"specversion":"1.0","id":"e1"}`)
	ts := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	if err := webhooks.SignHeaders(h, []string{current, previous}, "e1", ts, body); err != nil {
		t.Fatal(err)
	}
	if h.Get("webhook-id") != "e1" || h.Get("webhook-timestamp") != strconv.FormatInt(ts.Unix(), 10) {
		t.Fatalf("headers %v", h)
	}
	if n := len(strings.Split(h.Get("webhook-signature"), " ")); n != 2 {
		t.Fatalf("%d signatures, want 2: %q", n, h.Get("webhook-signature"))
	}
	for _, s := range []string{current, previous} {
		if !verify(t, s, h, body) {
			t.Fatalf("the signature does not verify with %s", s)
		}
	}
	if verify(t, other, h, body) {
		t.Fatal("a third secret verifies")
	}
	if verify(t, current, h, append(body, ' ')) {
		t.Fatal("an altered body verifies")
	}
}

func TestSignRefusesWhatIsNotASecret(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 8))} {
		if _, err := webhooks.Sign(s, "id", time.Now(), nil); err == nil {
			t.Errorf("secret %q was taken", s)
		}
	}
}

func TestBackoffFollowsTheScheduleAndStaysWithinAnHour(t *testing.T) {
	want := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}
	for i, w := range want {
		if got := webhooks.Backoff(i + 1); got != w {
			t.Errorf("after attempt %d: %s, want %s", i+1, got, w)
		}
	}
	var total time.Duration
	attempts := 0
	for n := 1; total < webhooks.GiveUpAfter; n++ {
		b := webhooks.Backoff(n)
		if b > time.Hour || b < webhooks.Backoff(max(n-1, 1)) {
			t.Fatalf("after attempt %d: %s (not growing up to an hour)", n, b)
		}
		total += b
		attempts++
	}
	if attempts < 20 || webhooks.Backoff(1000) != time.Hour {
		t.Fatalf("%d attempts in a day; Backoff(1000) = %s", attempts, webhooks.Backoff(1000))
	}
}

func TestTheSecretsBoxIsNotThePasswordsBox(t *testing.T) {
	if _, err := webhooks.NewBox(nil, nil); err == nil {
		t.Fatal("a box without a key")
	}
	secretKey := make([]byte, 32)
	secretKey[0] = 7
	derived, err := webhooks.NewBox(nil, secretKey)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := derived.Encrypt(t.Context(), []byte("whsec_x"), "aad")
	if err != nil {
		t.Fatal(err)
	}
	passwords, _ := secrets.NewLocal(secretKey)
	if _, err := passwords.Decrypt(t.Context(), ct, "aad"); err == nil {
		t.Fatal("the passwords' key opens a webhook secret")
	}
	again, _ := webhooks.NewBox(nil, secretKey)
	if pt, err := again.Decrypt(t.Context(), ct, "aad"); err != nil || string(pt) != "whsec_x" {
		t.Fatalf("%q, %v", pt, err)
	}
}
