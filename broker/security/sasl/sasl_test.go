package sasl

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
	username="admin" password="admin-secret" // the broker's own login
	user_admin="admin-secret" user_alice="alice pw" /* a comment */ user_bob=bobpw;`

func TestParsePlainJAAS(t *testing.T) {
	users, err := ParsePlainJAAS(plainJAAS)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users["alice"] != "alice pw" || users["bob"] != "bobpw" || users["admin"] != "admin-secret" {
		t.Fatalf("users %v", users)
	}
	for _, bad := range []string{
		``,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule mandatory;`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x;`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a;`,
		`a required; b required;`,
		`org.apache.kafka.common.security.scram.ScramLoginModule required;`,
	} {
		if _, err := ParsePlainJAAS(bad); !errors.Is(err, ErrJAAS) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := CheckScramJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required;`); err != nil {
		t.Fatal(err)
	}
}

func TestPlain(t *testing.T) {
	users, _ := ParsePlainJAAS(plainJAAS)
	cases := []struct {
		token, want string // want: "" accepts
	}{
		{"\x00alice\x00alice pw", ""},
		{"alice\x00alice\x00alice pw", ""},
		{"\x00alice\x00wrong", "Authentication failed: Invalid username or password"},
		{"\x00carol\x00alice pw", "Authentication failed: Invalid username or password"},
		{"bob\x00alice\x00alice pw", "Client requested an authorization id that is different from username"},
		{"\x00\x00pw", "username not specified"},
		{"\x00alice\x00", "password not specified"},
		{"alice", "expected 3 tokens, got 1"},
		{"\x00a\x00b\x00c", "expected 3 tokens, got 4"},
		{"\x00alice\x00\xff", "Authentication failed: Invalid username or password"},
		{"\xff\xfe no separators", "expected 3 tokens, got 1"},
	}
	for _, c := range cases {
		s, _ := NewServer(Plain, Credentials{Plain: users})
		out, err := s.Evaluate([]byte(c.token))
		if c.want == "" {
			if err != nil || !s.Complete() || s.AuthorizationID() != "alice" || len(out) != 0 {
				t.Errorf("%q: %v %v %q", c.token, err, s.Complete(), s.AuthorizationID())
			}
		} else {
			var ce *ClientError
			if !errors.As(err, &ce) || !strings.Contains(ce.ClientMessage(), c.want) || s.Complete() {
				t.Errorf("%q: got %v, want %s", c.token, err, c.want)
			}
		}
		if _, err := s.Evaluate([]byte(c.token)); !errors.Is(err, ErrIllegalState) {
			t.Errorf("%q: second token: %v", c.token, err)
		}
	}
}

// scramCreds derives credentials the way AlterUserScramCredentials clients
// do: a salted password sent to the broker, which derives the keys.
func scramCreds(t testing.TB, mech, user, password string) func(string, string) (ScramCredential, bool) {
	salt := []byte("0123456789abcdef")
	salted, err := SaltedPassword(mech, password, salt, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	cred := DeriveScram(mech, salt, salted, MinIterations)
	return func(m, u string) (ScramCredential, bool) { return cred, m == mech && u == user }
}

func clientFor(mech string) scram.HashGeneratorFcn {
	if mech == ScramSHA512 {
		return scram.SHA512
	}
	return scram.SHA256
}

// exchange runs a full client/server conversation and returns the
// server's error.
func exchange(t *testing.T, srv Server, client *scram.ClientConversation) error {
	t.Helper()
	msg, err := client.Step("")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		out, err := srv.Evaluate([]byte(msg))
		if err != nil {
			return err
		}
		if srv.Complete() {
			if _, err := client.Step(string(out)); err != nil {
				t.Fatalf("client rejects the server's final message: %v", err)
			}
			return nil
		}
		if msg, err = client.Step(string(out)); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("exchange did not end")
	return nil
}

func TestScram(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		creds := Credentials{Scram: scramCreds(t, mech, "alice", "alice-pw")}
		for _, c := range []struct {
			user, password, authz string
			ok                    bool
		}{
			{"alice", "alice-pw", "", true},
			{"alice", "alice-pw", "alice", true},
			{"alice", "wrong", "", false},
			{"carol", "alice-pw", "", false},
			{"alice", "alice-pw", "bob", false},
		} {
			srv, err := NewServer(mech, creds)
			if err != nil {
				t.Fatal(err)
			}
			cl, _ := clientFor(mech).NewClient(c.user, c.password, c.authz)
			err = exchange(t, srv, cl.NewConversation())
			if c.ok != (err == nil) || c.ok != srv.Complete() {
				t.Errorf("%s %+v: %v complete %v", mech, c, err, srv.Complete())
			}
			if c.ok && srv.AuthorizationID() != "alice" {
				t.Errorf("%s: authorization id %q", mech, srv.AuthorizationID())
			}
			if !c.ok && !errors.Is(err, ErrAuthentication) {
				t.Errorf("%s %+v: not ErrAuthentication: %v", mech, c, err)
			}
		}
	}
}

// TestDeriveScram checks the stored keys against xdg-go/scram's own
// derivation from the same salt and iterations.
func TestDeriveScram(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		salt := []byte("salt-of-the-earth")
		salted, _ := SaltedPassword(mech, "pw", salt, 4096)
		got := DeriveScram(mech, salt, salted, 4096)
		cl, _ := clientFor(mech).NewClient("u", "pw", "")
		want := cl.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: 4096})
		if !bytes.Equal(got.StoredKey, want.StoredKey) || !bytes.Equal(got.ServerKey, want.ServerKey) {
			t.Fatalf("%s: keys differ from xdg-go/scram's", mech)
		}
	}
}

func TestUnsupported(t *testing.T) {
	if _, err := NewServer("GSSAPI", Credentials{}); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatal(err)
	}
}
