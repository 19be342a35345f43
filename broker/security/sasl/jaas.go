package sasl

import (
	"errors"
	"fmt"
	"strings"
)

// Login module classes whose JAAS entries configure Cascade's mechanisms.
const (
	PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// ErrJAAS is wrapped by every error about a malformed sasl.jaas.config.
var ErrJAAS = errors.New("sasl: invalid sasl.jaas.config")

// maxJAASBytes bounds a sasl.jaas.config value.
const maxJAASBytes = 1 << 20

// LoginModule is one entry of a JAAS configuration.
type LoginModule struct {
	Class   string
	Flag    string // required, requisite, sufficient or optional
	Options map[string]string
}

// ParseJAAS parses a sasl.jaas.config value as Kafka's JaasConfig does:
// entries of "class flag name=value ... ;", values quoted with " (with
// backslash escapes) or bare words, comments // and /* */. As a broker's
// listener config it must hold exactly one login module.
func ParseJAAS(text string) (LoginModule, error) {
	if len(text) > maxJAASBytes {
		return LoginModule{}, fmt.Errorf("%w: longer than %d bytes", ErrJAAS, maxJAASBytes)
	}
	toks, err := jaasTokens(text)
	if err != nil {
		return LoginModule{}, err
	}
	var mods []LoginModule
	for len(toks) > 0 {
		if len(toks) < 2 || toks[0].quoted || toks[1].quoted {
			return LoginModule{}, fmt.Errorf("%w: expected a login module class and a control flag", ErrJAAS)
		}
		m := LoginModule{Class: toks[0].text, Flag: strings.ToLower(toks[1].text), Options: map[string]string{}}
		switch m.Flag {
		case "required", "requisite", "sufficient", "optional":
		default:
			return LoginModule{}, fmt.Errorf("%w: invalid control flag %q", ErrJAAS, toks[1].text)
		}
		toks = toks[2:]
		for {
			if len(toks) == 0 {
				return LoginModule{}, fmt.Errorf("%w: login module %s does not end with ';'", ErrJAAS, m.Class)
			}
			if !toks[0].quoted && toks[0].text == ";" {
				toks = toks[1:]
				break
			}
			if len(toks) < 3 || toks[0].quoted || toks[1].quoted || toks[1].text != "=" {
				return LoginModule{}, fmt.Errorf("%w: expected name=value in login module %s", ErrJAAS, m.Class)
			}
			m.Options[toks[0].text] = toks[2].text
			toks = toks[3:]
		}
		mods = append(mods, m)
	}
	if len(mods) != 1 {
		// As JaasContext.load for a listener's sasl.jaas.config.
		return LoginModule{}, fmt.Errorf("%w: JAAS config property contains %d login modules, should be 1 module", ErrJAAS, len(mods))
	}
	return mods[0], nil
}

type jaasToken struct {
	text   string
	quoted bool
}

func jaasTokens(s string) ([]jaasToken, error) {
	var out []jaasToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case strings.HasPrefix(s[i:], "//"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return out, nil
			}
			i += j
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("%w: unterminated comment", ErrJAAS)
			}
			i += j + 4
		case c == '=' || c == ';':
			out = append(out, jaasToken{text: string(c)})
			i++
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%w: unterminated quoted value", ErrJAAS)
			}
			out = append(out, jaasToken{text: b.String(), quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n=;\"", rune(s[j])) {
				j++
			}
			out = append(out, jaasToken{text: s[i:j]})
			i = j
		}
	}
	return out, nil
}

// ParsePlainJAAS returns the users of a PlainLoginModule sasl.jaas.config:
// its user_<name>="password" options, as Kafka's
// PlainServerCallbackHandler reads them.
func ParsePlainJAAS(text string) (map[string]string, error) {
	m, err := ParseJAAS(text)
	if err != nil {
		return nil, err
	}
	if m.Class != PlainLoginModule {
		return nil, fmt.Errorf("%w: the PLAIN mechanism needs %s, not %s", ErrJAAS, PlainLoginModule, m.Class)
	}
	users := map[string]string{}
	for k, v := range m.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok {
			users[name] = v
		}
	}
	return users, nil
}

// CheckScramJAAS checks that a SCRAM mechanism's sasl.jaas.config names
// ScramLoginModule, as Kafka's server needs for its SCRAM callback.
func CheckScramJAAS(text string) error {
	m, err := ParseJAAS(text)
	if err != nil {
		return err
	}
	if m.Class != ScramLoginModule {
		return fmt.Errorf("%w: a SCRAM mechanism needs %s, not %s", ErrJAAS, ScramLoginModule, m.Class)
	}
	return nil
}
