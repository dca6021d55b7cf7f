package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

const testKeyID = "arn:aws:kms:us-east-1:111122223333:key/ssodir-test"

// fakeKMS speaks the KMS JSON protocol (TrentService.GenerateDataKey and .Decrypt) and
// wraps data keys under its own master key, bound to the key id and encryption context.
type fakeKMS struct {
	master        cipher.AEAD
	generateCalls atomic.Int64
	decryptCalls  atomic.Int64
	failWith      atomic.Pointer[string] // an error type to answer every request with
}

type fakeRequest struct {
	KeyId             string
	KeySpec           string
	CiphertextBlob    []byte // base64 in JSON, as in the KMS API
	EncryptionContext map[string]string
}

func newFakeKMS(t testing.TB) (*fakeKMS, *kms.Client) {
	t.Helper()
	block, err := aes.NewCipher(randomBytes(32))
	if err != nil {
		t.Fatal(err)
	}
	master, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeKMS{master: master}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := kms.New(kms.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:       srv.Client(),
		RetryMaxAttempts: 1,
	})
	return f, client
}

func newKMSBox(t testing.TB) (*Box, *fakeKMS) {
	t.Helper()
	f, client := newFakeKMS(t)
	b, err := NewKMS(context.Background(), client, testKeyID)
	if err != nil {
		t.Fatal(err)
	}
	return b, f
}

// anotherBox returns a fresh Box (empty cache, no data key) on the same client.
func anotherBox(t testing.TB, b *Box) *Box {
	t.Helper()
	other, err := NewKMS(context.Background(), b.kms.client, b.kms.keyID)
	if err != nil {
		t.Fatal(err)
	}
	return other
}

func (f *fakeKMS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		writeKMSError(w, "MissingAuthenticationTokenException", "unsigned request")
		return
	}
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeKMSError(w, "SerializationException", err.Error())
		return
	}
	if e := f.failWith.Load(); e != nil {
		writeKMSError(w, *e, "injected failure")
		return
	}
	if req.KeyId != testKeyID {
		writeKMSError(w, "NotFoundException", "no such key")
		return
	}
	boundTo, _ := json.Marshal(map[string]any{"key": req.KeyId, "ctx": req.EncryptionContext})
	switch target := r.Header.Get("X-Amz-Target"); target {
	case "TrentService.GenerateDataKey":
		f.generateCalls.Add(1)
		if req.KeySpec != "AES_256" {
			writeKMSError(w, "ValidationException", "unsupported KeySpec")
			return
		}
		dk := randomBytes(32)
		writeKMS(w, map[string]any{
			"KeyId":          testKeyID,
			"Plaintext":      dk,
			"CiphertextBlob": f.master.Seal(nil, nil, dk, boundTo),
		})
	case "TrentService.Decrypt":
		f.decryptCalls.Add(1)
		dk, err := f.master.Open(nil, nil, req.CiphertextBlob, boundTo)
		if err != nil {
			writeKMSError(w, "InvalidCiphertextException", "")
			return
		}
		writeKMS(w, map[string]any{"KeyId": testKeyID, "Plaintext": dk, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
	default:
		writeKMSError(w, "UnknownOperationException", target)
	}
}

func writeKMS(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(body)
}

func writeKMSError(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

func TestKMSRoundTrip(t *testing.T) {
	b, _ := newKMSBox(t)
	ctx := context.Background()
	ct := mustEncrypt(t, b, "client-secret-value", "client_secret:acme/eu")
	if !strings.HasPrefix(ct, kmsPrefix) {
		t.Fatalf("ciphertext %q lacks prefix %q", ct, kmsPrefix)
	}
	for name, box := range map[string]*Box{"the same box": b, "a fresh box": anotherBox(t, b)} {
		got, err := box.Decrypt(ctx, ct, "client_secret:acme/eu")
		if err != nil {
			t.Fatalf("%s: decrypt: %v", name, err)
		}
		if string(got) != "client-secret-value" {
			t.Errorf("%s: decrypt = %q", name, got)
		}
	}
}

func TestKMSReusesOneDataKeyForManyMessages(t *testing.T) {
	b, f := newKMSBox(t)
	if f.generateCalls.Load() != 0 {
		t.Fatal("NewKMS called GenerateDataKey")
	}
	var keys = map[string]bool{}
	for range 20 {
		ct := mustEncrypt(t, b, "pw", "password:acme/eu/jdoe")
		keys[strings.Split(ct, ".")[2]] = true
	}
	if n := f.generateCalls.Load(); n != 1 {
		t.Errorf("GenerateDataKey calls = %d, want 1", n)
	}
	if len(keys) != 1 {
		t.Errorf("distinct encrypted data keys = %d, want 1", len(keys))
	}
}

func TestKMSReplacesTheDataKeyAfterMaxUses(t *testing.T) {
	b, f := newKMSBox(t)
	b.kms.maxUses = 3
	for range 7 {
		mustEncrypt(t, b, "pw", "aad")
	}
	if n := f.generateCalls.Load(); n != 3 {
		t.Errorf("GenerateDataKey calls = %d, want 3", n)
	}
}

func TestKMSReplacesTheDataKeyAfterMaxAge(t *testing.T) {
	b, f := newKMSBox(t)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.kms.now = func() time.Time { return now }
	first := mustEncrypt(t, b, "pw", "aad")
	now = now.Add(59 * time.Minute)
	mustEncrypt(t, b, "pw", "aad")
	if n := f.generateCalls.Load(); n != 1 {
		t.Fatalf("GenerateDataKey calls before an hour = %d, want 1", n)
	}
	now = now.Add(time.Minute)
	mustEncrypt(t, b, "pw", "aad")
	if n := f.generateCalls.Load(); n != 2 {
		t.Fatalf("GenerateDataKey calls after an hour = %d, want 2", n)
	}
	// Messages under the old key still open.
	if _, err := b.Decrypt(context.Background(), first, "aad"); err != nil {
		t.Fatal(err)
	}
}

func TestKMSDecryptAsksKMSOncePerDataKey(t *testing.T) {
	b, f := newKMSBox(t)
	b.kms.maxUses = 2
	var cts []string
	for range 6 { // three data keys
		cts = append(cts, mustEncrypt(t, b, "pw", "aad"))
	}
	for _, ct := range cts {
		if _, err := b.Decrypt(context.Background(), ct, "aad"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.decryptCalls.Load(); n != 0 {
		t.Errorf("Decrypt calls by the encrypting box = %d, want 0", n)
	}
	other := anotherBox(t, b)
	for range 3 {
		for _, ct := range cts {
			if _, err := other.Decrypt(context.Background(), ct, "aad"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := f.decryptCalls.Load(); n != 3 {
		t.Errorf("Decrypt calls by a fresh box = %d, want 3 (one per data key)", n)
	}
}

func TestKMSDecryptCacheIsBounded(t *testing.T) {
	b, f := newKMSBox(t)
	b.kms.maxUses = 1
	var cts []string
	for range 3 {
		cts = append(cts, mustEncrypt(t, b, "pw", "aad"))
	}
	other := anotherBox(t, b)
	other.kms.maxCached = 2
	for _, ct := range append(cts, cts[2], cts[0]) { // the last one was evicted
		if _, err := other.Decrypt(context.Background(), ct, "aad"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.decryptCalls.Load(); n != 4 {
		t.Errorf("Decrypt calls = %d, want 4", n)
	}
	if n := len(other.kms.cache); n != 2 {
		t.Errorf("cached keys = %d, want 2", n)
	}
}

func TestKMSErrorsSurfaceAsErrors(t *testing.T) {
	b, f := newKMSBox(t)
	ct := mustEncrypt(t, b, "pw", "aad")
	f.failWith.Store(aws.String("DisabledException"))

	fresh := anotherBox(t, b)
	_, err := fresh.Encrypt(context.Background(), []byte("plaintext-sentinel"), "aad")
	var disabled *types.DisabledException
	if !errors.As(err, &disabled) {
		t.Fatalf("encrypt: err = %v, want DisabledException", err)
	}
	if strings.Contains(err.Error(), "plaintext-sentinel") {
		t.Error("error contains the plaintext")
	}
	_, err = fresh.Decrypt(context.Background(), ct, "aad")
	if !errors.As(err, &disabled) || errors.Is(err, ErrCiphertext) {
		t.Fatalf("decrypt: err = %v, want DisabledException and not ErrCiphertext", err)
	}
}

func TestKMSDecryptRejectsWrongAADTamperingAndOtherMasterKeys(t *testing.T) {
	b, _ := newKMSBox(t)
	ctx := context.Background()
	ct := mustEncrypt(t, b, "pw", "password:acme/eu/jdoe")
	if _, err := b.Decrypt(ctx, ct, "password:acme/eu/other"); !errors.Is(err, ErrCiphertext) {
		t.Errorf("wrong aad: err = %v, want ErrCiphertext", err)
	}
	for _, m := range tamperings(ct) {
		if _, err := anotherBox(t, b).Decrypt(ctx, m, "password:acme/eu/jdoe"); err == nil {
			t.Fatalf("tampered ciphertext %q decrypted", m)
		}
	}
	for i := range len(ct) {
		if _, err := b.Decrypt(ctx, ct[:i], "password:acme/eu/jdoe"); err == nil {
			t.Fatalf("ciphertext truncated to %d chars decrypted", i)
		}
	}
	elsewhere, _ := newKMSBox(t) // same key id, another master key
	if _, err := elsewhere.Decrypt(ctx, ct, "password:acme/eu/jdoe"); !errors.Is(err, ErrCiphertext) {
		t.Errorf("other master key: err = %v, want ErrCiphertext", err)
	}
	if _, err := newLocalBox(t).Decrypt(ctx, ct, "password:acme/eu/jdoe"); !errors.Is(err, ErrCiphertext) {
		t.Errorf("local box: err = %v, want ErrCiphertext", err)
	}
	if _, err := b.Decrypt(ctx, mustEncrypt(t, newLocalBox(t), "pw", "aad"), "aad"); !errors.Is(err, ErrCiphertext) {
		t.Errorf("local ciphertext in a KMS box: err = %v, want ErrCiphertext", err)
	}
}

func TestKMSBoxIsSafeForConcurrentUse(t *testing.T) {
	b, f := newKMSBox(t)
	b.kms.maxUses = 5
	reader := anotherBox(t, b)
	reader.kms.maxCached = 3
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				aad := "password:acme/eu/" + string(rune('a'+g))
				ct, err := b.Encrypt(context.Background(), []byte{byte(i)}, aad)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := reader.Decrypt(context.Background(), ct, aad)
				if err != nil || len(got) != 1 || got[0] != byte(i) {
					t.Errorf("decrypt = %v, %v", got, err)
				}
			}
		})
	}
	wg.Wait()
	if n := f.generateCalls.Load(); n != 16 {
		t.Errorf("GenerateDataKey calls = %d, want 16 (80 messages, 5 per key)", n)
	}
}

func TestNewKMSRejectsMissingClientOrKeyID(t *testing.T) {
	_, client := newFakeKMS(t)
	if _, err := NewKMS(context.Background(), nil, testKeyID); err == nil {
		t.Error("nil client: no error")
	}
	if _, err := NewKMS(context.Background(), client, ""); err == nil {
		t.Error("empty key id: no error")
	}
}
