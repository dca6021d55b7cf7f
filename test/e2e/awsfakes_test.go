package e2e

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// awsFake answers AWS KMS and AWS Secrets Manager (JSON 1.1 protocol, X-Amz-Target) the way
// they behave for ssodir's calls: KMS data keys sealed under a master key of the key id and
// bound to the encryption context (a Decrypt with another key or context fails), secrets
// by ARN. It counts the calls by operation and by caller (the User-Agent's process).
type awsFake struct {
	srv    *httptest.Server
	keyID  string
	master cipher.AEAD

	mu      sync.Mutex
	secrets map[string]string
	calls   map[string]int
}

func newAWSFake(t *testing.T, keyID string, secrets map[string]string) *awsFake {
	t.Helper()
	block, err := aes.NewCipher(randomBytes(32))
	if err != nil {
		t.Fatal(err)
	}
	master, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		t.Fatal(err)
	}
	f := &awsFake{keyID: keyID, master: master, secrets: secrets, calls: map[string]int{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func (f *awsFake) count(target string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[target]
}

type fakeRequest struct {
	KeyId             string
	KeySpec           string
	CiphertextBlob    []byte
	EncryptionContext map[string]string
	SecretId          string
}

func (f *awsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		fakeError(w, "MissingAuthenticationTokenException", "unsigned request")
		return
	}
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fakeError(w, "SerializationException", err.Error())
		return
	}
	target := r.Header.Get("X-Amz-Target")
	f.mu.Lock()
	f.calls[target]++
	f.mu.Unlock()
	boundTo, _ := json.Marshal(map[string]any{"key": req.KeyId, "ctx": req.EncryptionContext})
	switch target {
	case "TrentService.GenerateDataKey":
		if req.KeyId != f.keyID || req.KeySpec != "AES_256" {
			fakeError(w, "NotFoundException", "no such key")
			return
		}
		dk := randomBytes(32)
		fakeAnswer(w, map[string]any{"KeyId": f.keyID, "Plaintext": dk, "CiphertextBlob": f.master.Seal(nil, nil, dk, boundTo)})
	case "TrentService.Decrypt":
		dk, err := f.master.Open(nil, nil, req.CiphertextBlob, boundTo)
		if req.KeyId != f.keyID || err != nil {
			fakeError(w, "InvalidCiphertextException", "")
			return
		}
		fakeAnswer(w, map[string]any{"KeyId": f.keyID, "Plaintext": dk, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
	case "secretsmanager.GetSecretValue":
		f.mu.Lock()
		v, ok := f.secrets[req.SecretId]
		f.mu.Unlock()
		if !ok {
			fakeError(w, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
			return
		}
		fakeAnswer(w, map[string]any{"ARN": req.SecretId, "Name": req.SecretId, "SecretString": v, "VersionId": "v1"})
	default:
		fakeError(w, "UnknownOperationException", target)
	}
}

func fakeAnswer(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(body)
}

func fakeError(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}
