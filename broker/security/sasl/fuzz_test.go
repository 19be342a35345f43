package sasl

import (
	"errors"
	"testing"
)

// FuzzPlain feeds arbitrary client tokens to the PLAIN server: every one
// either authenticates a configured user or fails with ErrAuthentication.
func FuzzPlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00pw", "a\x00b\x00c", "", "\x00\x00", "\xff\xfe\x00x\x00y"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, token []byte) {
		s, _ := NewServer(Plain, Credentials{Plain: map[string]string{"alice": "pw"}})
		_, err := s.Evaluate(token)
		if err == nil != s.Complete() {
			t.Fatalf("error %v but complete %v", err, s.Complete())
		}
		if err != nil && !errors.Is(err, ErrAuthentication) {
			t.Fatalf("unexpected error %v", err)
		}
		if err == nil && s.AuthorizationID() != "alice" {
			t.Fatalf("authenticated %q", s.AuthorizationID())
		}
	})
}

// FuzzScram feeds arbitrary client-first and client-final messages to both
// SCRAM servers: none authenticates without the password's proof, and
// every failure is ErrAuthentication.
func FuzzScram(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdefXYZ,p=AAAA"))
	f.Add([]byte("y,,n=alice,r=x"), []byte(""))
	f.Add([]byte("p=tls-unique,,n=alice,r=x"), []byte("c=,r=,p="))
	f.Add([]byte("n,a=bob,n=alice,r=x"), []byte("c=biws"))
	f.Add([]byte("n,,n=al=2Cice,r=x,e=1"), []byte("\x00"))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			s, err := NewServer(mech, Credentials{Scram: scramCreds(t, mech, "alice", "pw")})
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range [][]byte{first, final, final} {
				_, err := s.Evaluate(msg)
				if err != nil {
					if !errors.Is(err, ErrAuthentication) && !errors.Is(err, ErrIllegalState) {
						t.Fatalf("unexpected error %v", err)
					}
					break
				}
			}
			if s.Complete() {
				t.Fatalf("%s authenticated without a proof: %q %q", mech, first, final)
			}
		}
	})
}

// FuzzJAAS parses arbitrary sasl.jaas.config text: it returns a module or
// ErrJAAS.
func FuzzJAAS(f *testing.F) {
	f.Add(plainJAAS)
	f.Add(`a required b="c\"d";`)
	f.Add(`/* x`)
	f.Add(`x optional = ;`)
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := ParseJAAS(s); err != nil && !errors.Is(err, ErrJAAS) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}
