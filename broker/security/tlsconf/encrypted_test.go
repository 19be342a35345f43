package tlsconf

import (
	"crypto"
	_ "crypto/sha1" // PBKDF2-HMAC-SHA1 keys.
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/youmark/pkcs8"

	"github.com/cascade-kafka/cascade/internal/certtest"
)

// encryptedKey returns cert's private key as an ENCRYPTED PRIVATE KEY PEM
// block under password: written by openssl pkcs8 -topk8 with args where
// openssl is installed, else by the pkcs8 library with opts (nil: skip the
// case, which only openssl writes).
func encryptedKey(t *testing.T, dir, name string, cert *certtest.Cert, password string, opts *pkcs8.Opts, args ...string) string {
	t.Helper()
	if path, err := exec.LookPath("openssl"); err == nil {
		in := filepath.Join(dir, name+".plain.pem")
		if err := os.WriteFile(in, []byte(cert.KeyPEM()), 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".enc.pem")
		cmd := exec.Command(path, append([]string{"pkcs8", "-topk8", "-in", in, "-out", out, "-passout", "pass:" + password}, args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl pkcs8 %v: %v: %s", args, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if opts == nil {
		t.Skipf("%s: only openssl writes this form, and it is not installed", name)
	}
	blk, _ := pem.Decode([]byte(cert.KeyPEM()))
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := pkcs8.MarshalPrivateKey(key, []byte(password), opts)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}))
}

// TestEncryptedPEMKeys: ssl.keystore.type=PEM with ssl.key.password reads
// PKCS#8 keys encrypted with PBES2, in a key store file and in
// ssl.keystore.key, and a TLS client connects; a wrong or missing password,
// a password for an unencrypted key and a PBES1 key are refused at load.
func TestEncryptedPEMKeys(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "CN=Test CA")
	srv := ca.Issue(t, "CN=localhost,O=Cascade", "localhost", "127.0.0.1")
	const pw = "key-pw"
	pbkdf2 := func(c pkcs8.Cipher, h pkcs8.Opts) *pkcs8.Opts {
		h.Cipher = c
		return &h
	}
	sha256 := pkcs8.Opts{KDFOpts: pkcs8.PBKDF2Opts{SaltSize: 16, IterationCount: 2048, HMACHash: crypto.SHA256}}
	sha1 := pkcs8.Opts{KDFOpts: pkcs8.PBKDF2Opts{SaltSize: 16, IterationCount: 2048, HMACHash: crypto.SHA1}}
	good := []struct {
		name string
		opts *pkcs8.Opts
		args []string
	}{
		// openssl 3's default: PBES2, AES-256-CBC, PBKDF2-HMAC-SHA256.
		{"openssl3-default", pbkdf2(pkcs8.AES256CBC, sha256), nil},
		{"aes128-cbc-hmac-sha1", pbkdf2(pkcs8.AES128CBC, sha1), []string{"-v2", "aes-128-cbc", "-v2prf", "hmacWithSHA1"}},
		{"des-ede3-cbc", pbkdf2(pkcs8.TripleDESCBC, sha256), []string{"-v2", "des3"}},
		{"scrypt-aes256", &pkcs8.Opts{Cipher: pkcs8.AES256CBC, KDFOpts: pkcs8.ScryptOpts{SaltSize: 16, CostParameter: 1 << 14,
			BlockSize: 8, ParallelizationParameter: 1}}, []string{"-scrypt"}},
	}
	client := ca.Issue(t, "CN=alice,O=Example")
	for _, g := range good {
		t.Run(g.name, func(t *testing.T) {
			key := encryptedKey(t, dir, g.name, srv, pw, g.opts, g.args...)
			if !strings.Contains(key, "ENCRYPTED PRIVATE KEY") {
				t.Fatalf("not an encrypted PKCS#8 key:\n%s", key)
			}
			file := filepath.Join(dir, g.name+".store.pem")
			if err := os.WriteFile(file, []byte(srv.ChainPEM()+key), 0o600); err != nil {
				t.Fatal(err)
			}
			for how, c := range map[string]Config{
				"file":   {KeystoreType: "PEM", KeystoreLocation: file, KeyPassword: pw},
				"values": {KeystoreType: "PEM", KeystoreChain: srv.ChainPEM(), KeystoreKey: key, KeyPassword: pw},
			} {
				c.TruststoreType, c.TruststoreCerts, c.ClientAuth = "PEM", ca.ChainPEM(), "required"
				r, err := NewReloader(c, nil)
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				if subj, err := handshake(t, r, ca, client, nil); err != nil || subj != "CN=localhost,O=Cascade" {
					t.Errorf("%s: handshake %q %v", how, subj, err)
				}
				c.KeyPassword = "wrong"
				if _, err := NewReloader(c, nil); !errors.Is(err, ErrInvalid) {
					t.Errorf("%s: a wrong ssl.key.password: %v, want ErrInvalid", how, err)
				}
				c.KeyPassword = ""
				if _, err := NewReloader(c, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ssl.key.password") {
					t.Errorf("%s: no ssl.key.password: %v, want ErrInvalid naming it", how, err)
				}
			}
		})
	}
	t.Run("password for an unencrypted key", func(t *testing.T) {
		c := Config{KeystoreType: "PEM", KeystoreLocation: srv.PEMFile(t, dir, "plain.pem"), KeyPassword: pw}
		if _, err := NewReloader(c, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not encrypted") {
			t.Errorf("%v, want ErrInvalid: not encrypted", err)
		}
	})
	t.Run("PBES1", func(t *testing.T) {
		key := encryptedKey(t, dir, "pbes1", srv, pw, nil, "-v1", "PBE-SHA1-3DES")
		c := Config{KeystoreType: "PEM", KeystoreChain: srv.ChainPEM(), KeystoreKey: key, KeyPassword: pw}
		if _, err := NewReloader(c, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "PBES1") {
			t.Errorf("%v, want ErrInvalid naming PBES1", err)
		}
	})
}
