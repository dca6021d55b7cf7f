package secrets

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
)

func newLocalBox(t testing.TB) *Box {
	t.Helper()
	b, err := NewLocal(randomBytes(keySize))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustEncrypt(t testing.TB, b *Box, plaintext, aad string) string {
	t.Helper()
	ct, err := b.Encrypt(context.Background(), []byte(plaintext), aad)
	if err != nil {
		t.Fatalf("encrypt: %v", err)
	}
	return ct
}

func TestLocalRoundTrip(t *testing.T) {
	b := newLocalBox(t)
	for name, plaintext := range map[string]string{
		"an empty secret":      "",
		"a password":           "correct horse battery staple",
		"binary bytes":         "\x00\xff\x10\n\"",
		"a long client secret": strings.Repeat("s3cr3t", 700),
	} {
		t.Run(name, func(t *testing.T) {
			ct := mustEncrypt(t, b, plaintext, "password:acme/eu/jdoe")
			if !strings.HasPrefix(ct, localPrefix) {
				t.Errorf("ciphertext %q lacks prefix %q", ct, localPrefix)
			}
			for _, r := range ct {
				if r <= ' ' || r > '~' {
					t.Fatalf("ciphertext has unprintable rune %q", r)
				}
			}
			if plaintext != "" && strings.Contains(ct, plaintext) {
				t.Error("ciphertext contains the plaintext")
			}
			got, err := b.Decrypt(context.Background(), ct, "password:acme/eu/jdoe")
			if err != nil {
				t.Fatalf("decrypt: %v", err)
			}
			if !bytes.Equal(got, []byte(plaintext)) {
				t.Errorf("decrypt = %q, want %q", got, plaintext)
			}
		})
	}
}

func TestNewLocalRejectsKeysThatAreNot32Bytes(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := NewLocal(make([]byte, n)); err == nil {
			t.Errorf("NewLocal with a %d-byte key: no error", n)
		}
	}
}

func TestEncryptingTheSamePlaintextTwiceUsesDifferentNonces(t *testing.T) {
	b := newLocalBox(t)
	a := mustEncrypt(t, b, "same", "password:acme/eu/jdoe")
	c := mustEncrypt(t, b, "same", "password:acme/eu/jdoe")
	if a == c {
		t.Fatal("two encryptions of the same plaintext are identical")
	}
	na, _ := b64.DecodeString(strings.TrimPrefix(a, localPrefix))
	nc, _ := b64.DecodeString(strings.TrimPrefix(c, localPrefix))
	if bytes.Equal(na[:12], nc[:12]) {
		t.Fatal("two encryptions share a nonce")
	}
}

func TestDecryptWithAnotherKeyFails(t *testing.T) {
	ct := mustEncrypt(t, newLocalBox(t), "secret", "password:acme/eu/jdoe")
	_, err := newLocalBox(t).Decrypt(context.Background(), ct, "password:acme/eu/jdoe")
	if !errors.Is(err, ErrCiphertext) {
		t.Fatalf("err = %v, want ErrCiphertext", err)
	}
}

func TestDecryptWithAnotherAADFails(t *testing.T) {
	b := newLocalBox(t)
	ct := mustEncrypt(t, b, "secret", "password:acme/eu/jdoe")
	for _, aad := range []string{"", "password:acme/eu/jdo", "password:acme/eu/jdoe ", "client_secret:acme/eu", "password:acme/us/jdoe"} {
		if _, err := b.Decrypt(context.Background(), ct, aad); !errors.Is(err, ErrCiphertext) {
			t.Errorf("aad %q: err = %v, want ErrCiphertext", aad, err)
		}
	}
}

// tamperings returns every ciphertext that differs from ct by one flipped bit in one decoded
// byte of its last part, and by one changed character anywhere (header included).
func tamperings(ct string) []string {
	var out []string
	dot := strings.LastIndexByte(ct, '.')
	raw, err := b64.DecodeString(ct[dot+1:])
	if err != nil {
		panic(err)
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			m := bytes.Clone(raw)
			m[i] ^= bit
			out = append(out, ct[:dot+1]+b64.EncodeToString(m))
		}
	}
	for i := range ct {
		c := byte('A')
		if ct[i] == 'A' {
			c = 'B'
		}
		out = append(out, ct[:i]+string(c)+ct[i+1:])
	}
	return out
}

func TestDecryptOfATamperedCiphertextFails(t *testing.T) {
	b := newLocalBox(t)
	ct := mustEncrypt(t, b, "secret", "password:acme/eu/jdoe")
	for _, m := range tamperings(ct) {
		if _, err := b.Decrypt(context.Background(), m, "password:acme/eu/jdoe"); err == nil {
			t.Fatalf("tampered ciphertext %q decrypted", m)
		}
	}
}

func TestDecryptOfATruncatedCiphertextFails(t *testing.T) {
	b := newLocalBox(t)
	ct := mustEncrypt(t, b, "secret", "password:acme/eu/jdoe")
	for i := range len(ct) {
		if _, err := b.Decrypt(context.Background(), ct[:i], "password:acme/eu/jdoe"); !errors.Is(err, ErrCiphertext) {
			t.Fatalf("truncated to %d chars: err = %v, want ErrCiphertext", i, err)
		}
	}
}

func TestDecryptOfGarbageFails(t *testing.T) {
	b := newLocalBox(t)
	for _, s := range []string{
		"", ".", "v1", "v1.", "v1.local", "v1.local.", "v1.local.!!!!", "v1.local.AAAA",
		"v1.local." + strings.Repeat("A", 37), "v1.local." + strings.Repeat("A", 38) + "=",
		"v2.local.AAAA", "v1.kms.", "v1.kms.AAAA.AAAA", "plain text password",
		"\x00\xff", strings.Repeat("v1.local.", 1000),
	} {
		if _, err := b.Decrypt(context.Background(), s, "aad"); !errors.Is(err, ErrCiphertext) {
			t.Errorf("Decrypt(%q): err = %v, want ErrCiphertext", s, err)
		}
	}
}

func FuzzDecrypt(f *testing.F) {
	local := newLocalBox(f)
	kmsBox, _ := newKMSBox(f)
	ctx := context.Background()
	valid := map[string]bool{}
	for _, b := range []*Box{local, kmsBox} {
		for _, p := range []string{"", "secret"} {
			ct := mustEncrypt(f, b, p, "aad")
			valid[ct] = true
			f.Add(ct)
			f.Add(ct[:len(ct)-1])
			f.Add(ct + "A")
		}
	}
	for _, s := range []string{"", "v1.local.", "v1.kms.", "v1.kms..", "v1.kms.AA.", "v1.kms..AA", "garbage", "v1.local.====", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, b := range []*Box{local, kmsBox} {
			got, err := b.Decrypt(ctx, s, "aad")
			// The base64 is strict, so only an untouched ciphertext can open.
			if err == nil && !valid[s] {
				t.Fatalf("Decrypt(%q) = %q, want an error", s, got)
			}
		}
	})
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails; it crashes the program instead
	return b
}
